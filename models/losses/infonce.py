"""InfoNCE with in-batch negatives and optional hard negatives (seed 004, eq. 1; SimCSE's supervised objective).

For anchor i the positive is `positives[i]`; every other positive in the batch and every hard negative (if given) is a
negative: loss_i = −log exp(cos(a_i, p_i)/τ) / Σ_j [exp(cos(a_i, p_j)/τ) + exp(cos(a_i, n_j)/τ)].

Inputs: `anchors`, `positives` — (B, D); `negatives` — (B, D) or None (for triples: s⁻ as the hard negative);
`temperature` τ (0.05 in SimCSE / seed 004). Returns the mean over the batch.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class InfoNCELoss(nn.Module):
    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = temperature

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor,
                negatives: torch.Tensor | None = None) -> torch.Tensor:
        a = F.normalize(anchors, dim=-1)
        candidates = positives if negatives is None else torch.cat([positives, negatives], dim=0)
        logits = a @ F.normalize(candidates, dim=-1).T / self.temperature  # (B, B) or (B, 2B)
        return F.cross_entropy(logits, torch.arange(len(a), device=a.device))
