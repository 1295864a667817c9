"""Losses and embedding metrics on hand-made embeddings with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.losses import CosineRegressionLoss, HierarchicalTripletLoss, InfoNCELoss
from tasks.embedding_metrics import alignment, rfd, sts_spearman, uniformity

E = torch.eye(3)


def test_cosine_regression_is_the_mse_of_cosines():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # cosines 1 and 0, whatever the norms
    loss = CosineRegressionLoss()(a, b, torch.tensor([0.5, 0.5]))
    assert loss.item() == pytest.approx((0.5**2 + 0.5**2) / 2)


def test_infonce_with_and_without_hard_negatives():
    a, p = E.clone(), E.clone()
    tau = 0.5
    # Positives on the diagonal, the other two candidates orthogonal: -log(e^2 / (e^2 + 2 e^0)).
    expect = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + 2))
    assert InfoNCELoss(tau)(a, p).item() == pytest.approx(expect, rel=1e-5)
    # A hard negative equal to the anchor adds e^2 to every denominator.
    hard = InfoNCELoss(tau)(a, p, E.clone()).item()
    assert hard == pytest.approx(-math.log(math.exp(2) / (2 * math.exp(2) + 4)), rel=1e-5)
    # Gradients flow to every input.
    x = E.clone().requires_grad_()
    InfoNCELoss()(x, E.clone() + 0.1, -E.clone()).backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_hierarchical_triplet_margins():
    a = torch.tensor([[1.0, 0.0]])
    at = lambda deg: torch.tensor([[math.cos(math.radians(deg)), math.sin(math.radians(deg))]])  # noqa: E731
    loss = HierarchicalTripletLoss(m1=0.01, m2=0.02)
    # Well ordered with room to spare: zero.
    assert loss(a, at(0), at(60), at(90)).item() == 0.0
    # Intermediate closer than the positive: ½ (cos 10° − cos 20° + m1); second term zero.
    got = loss(a, at(20), at(10), at(90)).item()
    assert got == pytest.approx(0.5 * (math.cos(math.radians(10)) - math.cos(math.radians(20)) + 0.01), rel=1e-5)
    # Negative as close as the intermediate: only the margin m2 remains in the second term.
    assert loss(a, at(0), at(45), at(45)).item() == pytest.approx(0.5 * 0.02, rel=1e-4)


def test_alignment_uniformity_rfd_and_spearman():
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert alignment(x, x) == 0.0
    assert alignment(x, -x) == pytest.approx(4.0)  # antipodal: ‖2‖² = 4
    # Two orthogonal unit vectors: squared distance 2 → log e^{-4} = -4.
    assert uniformity(x) == pytest.approx(-4.0)
    spread = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    clumped = np.array([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02], [1.0, 0.03]])
    assert uniformity(spread) < uniformity(clumped)
    assert rfd([0.5, 0.7], [0.4, 0.4]) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        rfd([1.0], [])
    e1 = np.array([[1.0, 0.0]] * 4)
    e2 = np.array([[1.0, 0.0], [1.0, 0.5], [1.0, 2.0], [0.0, 1.0]])  # cosine falls row by row
    assert sts_spearman(e1, e2, np.array([5.0, 4.0, 2.0, 0.0])) == pytest.approx(100.0)
    assert sts_spearman(e1, e2, np.array([0.0, 2.0, 4.0, 5.0])) == pytest.approx(-100.0)


def test_sts_loaders_semeval_folder_sick_and_stsb(tmp_path):
    from tasks.config import ConfigError
    from tasks.sts_data import read_sts_source

    folder = tmp_path / "STS12-en-test"
    folder.mkdir()
    (folder / "STS.input.MSRpar.txt").write_text("a b\tc d\ne f\tg h\ni j\tk l\n")
    (folder / "STS.gs.MSRpar.txt").write_text("4.5\n\n1.0\n")  # the second pair is unscored
    (folder / "STS.input.OnWN.txt").write_text("m n\to p\n")
    (folder / "STS.gs.OnWN.txt").write_text("3\n")
    frame = read_sts_source(str(folder))
    assert frame["gold"].tolist() == [4.5, 1.0, 3.0] and frame["subset"].tolist() == ["MSRpar", "MSRpar", "OnWN"]
    (folder / "STS.gs.OnWN.txt").write_text("3\n4\n")
    with pytest.raises(ConfigError, match="STS.input.OnWN.txt has 1 lines but STS.gs.OnWN.txt has 2"):
        read_sts_source(str(folder))
    sick = tmp_path / "SICK_test.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\tA man runs.\tA man is running.\t4.8\tENTAILMENT\n")
    assert read_sts_source(str(sick)).iloc[0].tolist() == ["A man runs.", "A man is running.", 4.8, "sick"]
    dev = read_sts_source("stsb-dev")
    assert len(dev) == 1500 and dev["gold"].between(0, 5).all()
    with pytest.raises(ConfigError, match="neither stsb-dev"):
        read_sts_source(str(tmp_path / "nope"))
