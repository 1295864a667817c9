"""A weighted sum of sentence-transformers losses over one batch, each reading some of its columns.

Why not one dataset per loss (sentence-transformers' multi-dataset training): InfoNCE and the hierarchical triplet
loss read the same triples, so one batch should be embedded once and both losses computed from those embeddings
(what the project's objective, NGCSE, eq. 7, sums). Parts that can reuse embeddings (`compute_loss_from_embeddings`)
share one forward pass; a part that needs its columns' features beside the shared embeddings (the backbone anchor runs
a frozen model on them: `compute_loss_from_features_and_embeddings`) gets both; a part that must embed itself
(`CachedMultipleNegativesRankingLoss`, whose gradient cache needs its own forward) is called on its columns' features.

Inputs: `parts` — {name: (loss, weight, column indices)}; the batch's text columns in dataset order, and its label
column if any. Returns {name: weight · loss} (a dict-valued part contributes each of its entries, weighted), which
`SentenceTransformerTrainer` logs one by one and sums.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class WeightedSumLoss(nn.Module):
    def __init__(self, model: nn.Module, parts: dict[str, tuple[nn.Module, float, tuple[int, ...]]]):
        super().__init__()
        if not parts:
            raise ValueError("WeightedSumLoss needs at least one part")
        self.model = model
        self.losses = nn.ModuleDict({name: loss for name, (loss, _, _) in parts.items()})
        self.weights = {name: float(w) for name, (_, w, _) in parts.items()}
        self.columns = {name: tuple(cols) for name, (_, _, cols) in parts.items()}

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None
                ) -> dict[str, torch.Tensor]:
        from sentence_transformers.base.losses.merged_forward import embed_columns  # lazy: ~2 s import

        features = list(sentence_features)
        shared = sorted({c for name, cols in self.columns.items() if self._shares(name) for c in cols})
        embedded = dict(zip(shared, embed_columns(self.model, [features[c] for c in shared]))) if shared else {}
        out: dict[str, torch.Tensor] = {}
        for name, loss in self.losses.items():
            cols = self.columns[name]
            if hasattr(loss, "compute_loss_from_features_and_embeddings"):
                value = loss.compute_loss_from_features_and_embeddings([features[c] for c in cols],
                                                                       [embedded[c] for c in cols], labels)
            elif self._shares(name):
                value = loss.compute_loss_from_embeddings([embedded[c] for c in cols], labels)
            else:
                value = loss([features[c] for c in cols], labels)
            for key, v in (value.items() if isinstance(value, dict) else [(name, value)]):
                out[key] = self.weights[name] * v
        return out

    def _shares(self, name: str) -> bool:
        return any(hasattr(self.losses[name], hook)
                   for hook in ("compute_loss_from_embeddings", "compute_loss_from_features_and_embeddings"))

    def get_config_dict(self) -> dict:
        return {name: {"loss": type(loss).__name__, "weight": self.weights[name], "columns": list(self.columns[name])}
                for name, loss in self.losses.items()}
