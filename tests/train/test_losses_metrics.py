"""Losses and embedding metrics on hand-made embeddings with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.embedding_metrics import alignment, rfd, sts_spearman, uniformity
from models.losses import BackboneAnchorLoss, HierarchicalTripletLoss, hierarchical_triplet_parts

E = torch.eye(3)


class Columns(torch.nn.Module):
    """A stand-in encoder for the sentence-transformers losses: each column's "features" are its embeddings."""

    def forward(self, features):
        return {"sentence_embedding": features["embedding"]}


def cols(*tensors):
    return [{"embedding": t} for t in tensors]


def at(deg):
    return torch.tensor([[math.cos(math.radians(deg)), math.sin(math.radians(deg))]])


def test_hierarchical_triplet_parts_and_margins():
    a = torch.tensor([[1.0, 0.0]])
    loss = HierarchicalTripletLoss(Columns(), m1=0.01, m2=0.02)
    total = lambda *e: sum(loss(cols(a, *e)).values()).item()  # noqa: E731
    # Well ordered with room to spare: zero.
    assert total(at(0), at(60), at(90)) == 0.0
    # Intermediate closer than the positive: ½ (cos 10° − cos 20° + m1) in the first part; second part zero.
    parts = loss(cols(a, at(20), at(10), at(90)))
    assert parts["ht_positive_intermediate"].item() == pytest.approx(
        0.5 * (math.cos(math.radians(10)) - math.cos(math.radians(20)) + 0.01), rel=1e-5)
    assert parts["ht_intermediate_negative"].item() == 0.0
    # Negative as close as the intermediate: only the margin m2 remains in the second part.
    parts = loss(cols(a, at(0), at(45), at(45)))
    assert parts["ht_intermediate_negative"].item() == pytest.approx(0.5 * 0.02, rel=1e-4)
    assert parts["ht_positive_intermediate"].item() == 0.0
    with pytest.raises(ValueError, match="needs 4 columns"):
        loss(cols(a, at(0), at(45)))


def test_sentence_transformers_infonce_is_the_papers_and_the_weighted_sum_embeds_once():
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from models.losses import WeightedSumLoss

    tau = 0.5
    mnrl = MultipleNegativesRankingLoss(Columns(), scale=1 / tau)
    # Positives on the diagonal, the other two candidates orthogonal: -log(e^2 / (e^2 + 2 e^0)).
    assert mnrl(cols(E.clone(), E.clone()), None).item() == pytest.approx(
        -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + 2)), rel=1e-5)
    # s⁻ (third column) equal to the anchor adds e^2 to every denominator.
    assert mnrl(cols(E.clone(), E.clone(), E.clone()), None).item() == pytest.approx(
        -math.log(math.exp(2) / (2 * math.exp(2) + 4)), rel=1e-5)

    calls = []

    class Counting(Columns):
        def forward(self, features):
            calls.append(1)
            return super().forward(features)

    encoder = Counting()
    a, p, n, m = (torch.nn.functional.normalize(torch.randn(3, 4), dim=-1).requires_grad_() for _ in range(4))
    ht = HierarchicalTripletLoss(encoder, 0.3, 0.3)
    combined = WeightedSumLoss(encoder, {"infonce": (MultipleNegativesRankingLoss(encoder, scale=2.0), 2.0, (0, 1, 2)),
                                         "hierarchical_triplet": (ht, 0.5, (0, 1, 3, 2))})
    parts = combined(cols(a, p, n, m), None)
    assert set(parts) == {"infonce", "ht_positive_intermediate", "ht_intermediate_negative"}
    assert len(calls) <= 4  # each column embedded once, shared by both losses
    ref_nce = MultipleNegativesRankingLoss(Columns(), scale=2.0)(cols(a, p, n), None)
    ref_ht = hierarchical_triplet_parts(a, p, m, n, 0.3, 0.3)
    assert parts["infonce"].item() == pytest.approx(2.0 * ref_nce.item(), rel=1e-5)
    for key, value in ref_ht.items():
        assert parts[key].item() == pytest.approx(0.5 * value.item(), rel=1e-5, abs=1e-7)
    sum(parts.values()).backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (a, p, n))


def test_regression_losses_on_the_label_scale():
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, CosineSimilarityLoss

    a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # cosines 1 and 0, whatever the norms
    assert CosineSimilarityLoss(Columns())(cols(a, b), torch.tensor([0.5, 0.5])).item() == \
        pytest.approx((0.5**2 + 0.5**2) / 2)
    # CoSENT reads only the labels' order: right order → log(1 + e^{20·(0 − 1)}), wrong order → log(1 + e^{20}).
    cosent = CoSENTLoss(Columns())
    assert cosent(cols(a, b), torch.tensor([0.9, 0.1])).item() == pytest.approx(math.log1p(math.exp(-20)), abs=1e-6)
    assert cosent(cols(a, b), torch.tensor([0.1, 0.9])).item() == pytest.approx(math.log1p(math.exp(20)), rel=1e-4)


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
    from tasks.core.config import ConfigError
    from tasks.core.sts_data import read_sts_source

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


def test_backbone_anchor_measures_the_drift_from_the_frozen_start_and_trains_only_the_student():
    class Rotating(torch.nn.Module):  # a 2-d "encoder" whose weight rotates its input
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(2, 2, bias=False)
            self.w.weight.data = torch.eye(2)

        def forward(self, features):
            return {"sentence_embedding": self.w(features["embedding"])}

    student = Rotating()
    loss = BackboneAnchorLoss(student)
    batch = torch.cat([at(0), at(90)])
    assert loss(cols(batch, batch)).item() == pytest.approx(0.0, abs=1e-7)  # nothing moved yet
    theta = math.radians(60)
    student.w.weight.data = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    value = loss(cols(batch))
    assert value.item() == pytest.approx(1 - math.cos(theta), abs=1e-6)  # every sentence 60° away from its start
    value.backward()
    assert student.w.weight.grad is not None and student.w.weight.grad.abs().sum() > 0
    assert [p for p in loss.parameters()] == [student.w.weight]  # the frozen copy is neither trained nor saved
    assert torch.equal(loss._frozen.w.weight, torch.eye(2)) and loss._frozen.w.weight.grad is None

    # Beside a task loss in WeightedSumLoss the student embeds each column once: the anchor reuses those embeddings
    # (same pass, same dropout masks) and adds only the frozen model's pass.
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from models.losses import WeightedSumLoss

    calls = []
    student.forward = lambda features: calls.append(1) or {"sentence_embedding": student.w(features["embedding"])}
    combined = WeightedSumLoss(student, {"regression": (CoSENTLoss(student), 1.0, (0, 1)),
                                         "backbone_anchor": (loss, 2.0, (0, 1))})
    parts = combined(cols(batch, batch.flip(0)), torch.tensor([1.0, 0.0]))
    assert len(calls) <= 2 and parts["backbone_anchor"].item() == pytest.approx(2 * (1 - math.cos(theta)), abs=1e-6)
