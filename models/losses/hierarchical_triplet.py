"""Hierarchical Triplet loss (NGCSE, eq. 6) as a sentence-transformers loss: the anchor must be closer to s⁺ than
to sᵐ by m1, and closer to sᵐ than to s⁻ by m2, so the embedding keeps the graded similarity of STS patterns:

L_HT = ½ [ max(cos(s, sᵐ) − cos(s, s⁺) + m1, 0) + max(cos(s, s⁻) − cos(s, sᵐ) + m2, 0) ].

Inputs: a dataset with four text columns in this order — anchor, positive, intermediate, negative (no label column
needed; a label column is ignored). Margins: the paper's final setting m1 = 5e-3, m2 = 1e-2 (β = 1 in the total).
Returns its two parts as a dict, so `SentenceTransformerTrainer` logs each and optimises their sum:
`ht_positive_intermediate` (the first hinge, halved) and `ht_intermediate_negative` (the second, halved).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.nn import functional as F


def hierarchical_triplet_parts(anchors: torch.Tensor, positives: torch.Tensor, intermediates: torch.Tensor,
                               negatives: torch.Tensor, m1: float, m2: float) -> dict[str, torch.Tensor]:
    """The two halved hinges of L_HT, each the mean over the batch ((B, D) embeddings in, scalars out)."""
    cos_p = F.cosine_similarity(anchors, positives, dim=-1)
    cos_m = F.cosine_similarity(anchors, intermediates, dim=-1)
    cos_n = F.cosine_similarity(anchors, negatives, dim=-1)
    return {"ht_positive_intermediate": 0.5 * F.relu(cos_m - cos_p + m1).mean(),
            "ht_intermediate_negative": 0.5 * F.relu(cos_n - cos_m + m2).mean()}


class HierarchicalTripletLoss(nn.Module):
    def __init__(self, model: nn.Module, m1: float = 5e-3, m2: float = 1e-2):
        super().__init__()
        self.model, self.m1, self.m2 = model, m1, m2

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None
                ) -> dict[str, torch.Tensor]:
        from sentence_transformers.base.losses.merged_forward import embed_columns  # lazy: ~2 s import

        return self.compute_loss_from_embeddings(embed_columns(self.model, sentence_features), labels)

    def compute_loss_from_embeddings(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None = None
                                     ) -> dict[str, torch.Tensor]:
        if len(embeddings) != 4:
            raise ValueError(f"HierarchicalTripletLoss needs 4 columns (anchor, positive, intermediate, negative), "
                             f"got {len(embeddings)}")
        return hierarchical_triplet_parts(*embeddings, self.m1, self.m2)

    def get_config_dict(self) -> dict:
        return {"m1": self.m1, "m2": self.m2}
