"""L2 regression of the embeddings' cosine onto context labels (seed 003, §3.4: the Siamese surrogate is trained so
that cos(f(s1), f(s2)) reproduces the similarity the contextual model assigned).

Inputs: `emb1`, `emb2` — (B, D) embeddings of the two sides of B pairs (not necessarily normalized);
`labels` — (B,) targets on the cosine scale [−1, 1] (stage 3's `label` column). Returns the mean squared error.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class CosineRegressionLoss(nn.Module):
    def forward(self, emb1: torch.Tensor, emb2: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        cos = F.cosine_similarity(emb1, emb2, dim=-1)
        return F.mse_loss(cos, labels.to(cos.dtype))
