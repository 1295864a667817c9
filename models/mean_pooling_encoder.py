"""Transformer encoder with mean pooling (Sun et al. 2022's Siamese surrogate; sentence-transformers' default pooling):
the embedding is the mean of the last hidden states over the real (non-padding) tokens.

Input: a transformers encoder (`AutoModel`, e.g. all-MiniLM-L6-v2) and its tokenizer. No Prefect in here.
"""

from __future__ import annotations

import torch
from torch import nn


class MeanPoolingEncoder(nn.Module):
    def __init__(self, encoder: nn.Module, tokenizer, max_length: int = 128):
        super().__init__()
        self.encoder, self.tokenizer, self.max_length = encoder, tokenizer, max_length

    @property
    def dim(self) -> int:
        return self.encoder.config.hidden_size

    def tokenize(self, sentences: list[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(sentences, padding=True, truncation=True, max_length=self.max_length,
                              return_tensors="pt")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
