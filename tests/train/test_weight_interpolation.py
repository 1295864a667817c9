"""WiSE-FT (tasks/train/weight_interpolation.py): the shipped weights as a mix of the backbone's and the trained ones."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from tasks.train.settings import BackboneSettings, LossSettings, TrainSettings
from tasks.train.weight_interpolation import apply_interpolation, backbone_snapshot, interpolate_state


def test_interpolation_mixes_float_weights_and_keeps_integer_buffers():
    base = {"w": torch.zeros(2, 3), "ids": torch.arange(4)}
    tuned = {"w": torch.full((2, 3), 4.0), "ids": torch.arange(4) + 1}
    assert torch.allclose(interpolate_state(base, tuned, 0.25)["w"], torch.full((2, 3), 1.0))
    assert torch.equal(interpolate_state(base, tuned, 0.0)["w"], base["w"])
    assert torch.equal(interpolate_state(base, tuned, 1.0)["w"], tuned["w"])
    assert torch.equal(interpolate_state(base, tuned, 0.5)["ids"], tuned["ids"])  # not averaged
    with pytest.raises(ValueError, match="alpha must be in"):
        interpolate_state(base, tuned, 1.5)
    with pytest.raises(ValueError, match="names differ"):
        interpolate_state(base, {"w": tuned["w"]}, 0.5)
    with pytest.raises(ValueError, match=r"weight w: backbone \(2, 3\)"):
        interpolate_state(base, {**tuned, "w": torch.zeros(3, 2)}, 0.5)


def test_alpha_zero_gives_back_the_backbone_and_one_half_the_midpoint(tiny_encoder_dir):
    from tasks.train.backbones import load_sentence_transformer

    model = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0]
    sentences = ["the river flooded the town .", "a cat sleeps on the mat ."]
    before, theta0 = model.encode(sentences), backbone_snapshot(model)
    torch.manual_seed(0)
    with torch.no_grad():  # stands in for fine-tuning: every weight moved
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    tuned = backbone_snapshot(model)
    assert not torch.allclose(torch.as_tensor(model.encode(sentences)), torch.as_tensor(before))
    apply_interpolation(model, theta0, 0.5)
    for name, value in model.state_dict().items():
        if value.is_floating_point():
            assert torch.allclose(value, (theta0[name] + tuned[name]) / 2, atol=1e-6), name
    model.load_state_dict(tuned)
    apply_interpolation(model, theta0, 0.0)
    assert torch.allclose(torch.as_tensor(model.encode(sentences)), torch.as_tensor(before), atol=1e-6)


def test_settings_refuse_an_alpha_outside_0_1_and_wise_with_lora():
    assert TrainSettings().wise_alpha == 1.0  # plain fine-tuning unless asked
    with pytest.raises(ValidationError, match="wise_alpha"):
        TrainSettings(wise_alpha=1.5)
    with pytest.raises(ValidationError, match="wise_alpha"):
        TrainSettings(wise_alpha=0.0)  # the backbone itself: not a training
    with pytest.raises(ValidationError, match="wise_alpha=0.5 interpolates full weights"):
        TrainSettings(wise_alpha=0.5, backbone=BackboneSettings(lora_rank=4))
    with pytest.raises(ValidationError, match="not applied to the SimCSE baseline"):
        LossSettings(simcse=True, backbone_anchor=1.0)
    with pytest.raises(ValidationError, match="infonce_mini_batch's memory bound"):
        LossSettings(backbone_anchor=1.0, infonce_mini_batch=8)


def test_the_options_off_keep_the_stage_keys_and_wise_keys_only_the_outputs():
    from tasks.core.config import key_fields

    plain = TrainSettings(losses=LossSettings())  # the triples alone: the anchor off
    assert "backbone_anchor" not in key_fields(plain.losses)  # trainings from before the options keep their keys
    assert "backbone_anchor" in key_fields(plain.losses.model_copy(update={"backbone_anchor": 1.0}))
    # Interpolation comes after training: another alpha reuses the checkpoints (the training key stays).
    assert key_fields(plain.model_copy(update={"wise_alpha": 0.5})) == key_fields(plain)
