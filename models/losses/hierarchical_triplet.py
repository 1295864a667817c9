"""Hierarchical Triplet loss (seed 004, eq. 6): the anchor must be closer to s⁺ than to sᵐ by m1, and closer to sᵐ
than to s⁻ by m2, so the embedding keeps the graded similarity of STS patterns:

L_HT = ½ [ max(cos(s, sᵐ) − cos(s, s⁺) + m1, 0) + max(cos(s, s⁻) − cos(s, sᵐ) + m2, 0) ].

Inputs: `anchors`, `positives`, `intermediates`, `negatives` — (B, D) embeddings of B triples. Margins: the paper's
final setting m1 = 5e-3, m2 = 1e-2 (β = 1 in the total). Returns the mean over the batch.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class HierarchicalTripletLoss(nn.Module):
    def __init__(self, m1: float = 5e-3, m2: float = 1e-2):
        super().__init__()
        self.m1, self.m2 = m1, m2

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor, intermediates: torch.Tensor,
                negatives: torch.Tensor) -> torch.Tensor:
        cos_p = F.cosine_similarity(anchors, positives, dim=-1)
        cos_m = F.cosine_similarity(anchors, intermediates, dim=-1)
        cos_n = F.cosine_similarity(anchors, negatives, dim=-1)
        return 0.5 * (F.relu(cos_m - cos_p + self.m1) + F.relu(cos_n - cos_m + self.m2)).mean()
