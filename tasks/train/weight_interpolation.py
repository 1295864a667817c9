"""WiSE-FT: the fine-tuned weights interpolated with the backbone's, θ = (1 − α)·θ₀ + α·θ_ft.

Fine-tuning an already-trained encoder on a few hundred generated examples moves STS-B dev up a little and costs it on
other domains (SICK, STS12: docs/results.md, issue 33); averaging the weights with the starting point keeps much of
the in-domain gain while losing less elsewhere (Wortsman et al., CVPR 2022). α = 1 is plain fine-tuning, α = 0 the
backbone. Neither sentence-transformers nor peft interpolates full weights (peft's weighted adapters are LoRA-only),
and a state-dict lerp is a few lines, so it lives here.
"""

from __future__ import annotations

import torch

CITATION = """@inproceedings{wortsman2022robust,
  title={Robust fine-tuning of zero-shot models},
  author={Wortsman, Mitchell and Ilharco, Gabriel and Kim, Jong Wook and Li, Mike and Kornblith, Simon and
          Roelofs, Rebecca and Lopes, Raphael Gontijo and Hajishirzi, Hannaneh and Farhadi, Ali and
          Namkoong, Hongseok and Schmidt, Ludwig},
  booktitle={CVPR},
  year={2022}
}"""


def backbone_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A CPU copy of the weights before training (the θ₀ of every later interpolation)."""
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}


def interpolate_state(base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor],
                      alpha: float) -> dict[str, torch.Tensor]:
    """(1 − α)·base + α·tuned for every floating-point tensor; integer buffers (position ids) are taken from `tuned`.
    The two state dicts must hold the same names and shapes: a LoRA-merged or re-headed model is not the backbone's."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"WiSE-FT alpha must be in [0, 1] (0 = the backbone, 1 = the fine-tuned weights), got {alpha}")
    if base.keys() != tuned.keys():
        diff = sorted(set(base) ^ set(tuned))[:3]
        raise ValueError(f"the fine-tuned model's weights are not the backbone's (names differ: {diff}); WiSE-FT "
                         "needs the same architecture on both sides")
    out = {}
    for name, t in tuned.items():
        b = base[name]
        if b.shape != t.shape:
            raise ValueError(f"weight {name}: backbone {tuple(b.shape)} vs fine-tuned {tuple(t.shape)}")
        out[name] = torch.lerp(b.to(t.device, t.dtype), t, alpha) if t.is_floating_point() else t.clone()
    return out


def apply_interpolation(model: torch.nn.Module, base: dict[str, torch.Tensor], alpha: float) -> None:
    """Replace `model`'s (fine-tuned) weights in place by their interpolation with `base` at `alpha`."""
    model.load_state_dict(interpolate_state(base, model.state_dict(), alpha))
