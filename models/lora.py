"""Low-rank adapters (LoRA, Hu et al. 2021) on a model's linear layers, so that CPU training updates a few thousand
parameters instead of all weights. `add_lora` freezes the whole module and wraps the named linear layers;
`merge_lora` folds each adapter back into its layer's weight (W + scale·B·A), so exported folders are plain models.

Input: any torch module whose attention projections are `nn.Linear` children with recognizable names (BERT:
query/key/value; Llama: q_proj/k_proj/v_proj/o_proj).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    """base(x) + scale · B(A(x)); B starts at zero, so the wrapped layer starts as the base layer."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base, self.scale = base, alpha / rank
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    def merged(self) -> nn.Linear:
        with torch.no_grad():
            self.base.weight += self.scale * self.lora_b @ self.lora_a
        return self.base


def add_lora(module: nn.Module, targets: tuple[str, ...], rank: int, alpha: float) -> int:
    """Freeze `module`, wrap every nn.Linear whose attribute name is in `targets`; returns how many were wrapped."""
    module.requires_grad_(False)
    wrapped = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(parent, name, LoRALinear(child, rank, alpha))
                wrapped += 1
    return wrapped


def merge_lora(module: nn.Module) -> int:
    """Replace every LoRALinear by its base layer with the adapter folded in; returns how many were merged."""
    merged = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, LoRALinear):
                setattr(parent, name, child.merged())
                merged += 1
    return merged
