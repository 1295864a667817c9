"""Backbone anchoring: the student's embedding of every sentence in the batch kept near the embedding the frozen
backbone it started from gives the same sentence — 1 − cos(student(x), backbone(x)), the mean over the batch's text
columns. Learning without forgetting (Li & Hoiem, 2016) in embedding space: a few hundred generated examples move an
already-trained encoder toward STS-B and away from other domains (SICK trial, docs/results.md issue 33); this term
lets the task losses reorder the space only as far as they pay for the drift.

Why not sentence-transformers' `EmbedDistillLoss`: it reads pre-computed teacher embeddings from the dataset's label
column, which the pairs' regression already uses for its score, and as a dataset of its own it would take half of
the round-robin steps from the task losses. Here the teacher is the student's starting point, so it is embedded on
the fly from the same batch: one extra forward pass without gradients, the student's embeddings shared with the task
losses (WeightedSumLoss's `compute_loss_from_features_and_embeddings` hook: same pass, same dropout masks).

Inputs: any text columns (WeightedSumLoss passes the columns named for it); labels ignored. The frozen copy is taken
when the loss is built — before a resumed trainer loads its checkpoint, so it is always the backbone — and is never
trained or saved.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import nn
from torch.nn import functional as F

CITATION = """@article{li2016learning,
  title={Learning without Forgetting},
  author={Li, Zhizhong and Hoiem, Derek},
  journal={IEEE Transactions on Pattern Analysis and Machine Intelligence},
  year={2017}
}"""


class BackboneAnchorLoss(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        frozen = copy.deepcopy(model).eval()
        frozen.requires_grad_(False)
        # Not a registered submodule: the trainer must neither optimise, move nor save it.
        object.__setattr__(self, "_frozen", frozen)

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None
                ) -> torch.Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns  # lazy: ~2 s import

        features = list(sentence_features)
        return self.compute_loss_from_features_and_embeddings(features, embed_columns(self.model, features), labels)

    def compute_loss_from_features_and_embeddings(self, features: list[dict[str, torch.Tensor]],
                                                  embeddings: list[torch.Tensor],
                                                  labels: torch.Tensor | None = None) -> torch.Tensor:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        inputs = [_inputs(f) for f in features]
        device = next(iter(inputs[0].values())).device
        if next(self._frozen.parameters()).device != device:
            self._frozen.to(device)
        with torch.no_grad():
            targets = embed_columns(self._frozen, inputs)
        return torch.stack([(1 - F.cosine_similarity(e, t, dim=-1)).mean()
                            for e, t in zip(embeddings, targets)]).mean()

    def get_config_dict(self) -> dict:
        return {"distance": "1 - cosine", "teacher": "the frozen backbone"}

    @property
    def citation(self) -> str:
        return CITATION


def _inputs(features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tokenizer's tensors of a column, in a new dict: a forward pass writes its outputs into the dict it gets."""
    return {k: v for k, v in features.items() if k not in ("token_embeddings", "sentence_embedding")}
