"""Discriminative coherence model p(y=1 | c<, s, c>) (Sun et al. 2022, §3.2.1).

A single-layer BiLSTM (hidden 300) encodes each text (the concatenated last states of both directions); the
encodings of [c<, s, c>] are concatenated and a sigmoid layer scores coherence.

One deliberate extension, documented in docs/results.md: the concatenation also holds the element-wise products
c<⊙s and s⊙c>. With the plain concatenation a linear sigmoid layer scores h·[h<, hs, h>] = a(c) + b(s), so for a
fixed sentence the ranking of contexts would not depend on the sentence at all. The products keep the model a single
sigmoid layer over cached encodings (ranking N candidates is two matrix-vector products) while letting the score
depend on how s fits the context.

Inputs: token id tensors (batch, length) with 0 = padding, and lengths (batch,). No Prefect in here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

PAD, UNK = 0, 1
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@dataclass
class Vocab:
    tokens: list[str]  # index = id; 0 <pad>, 1 <unk>

    @classmethod
    def build(cls, texts, max_size: int = 30_000, min_count: int = 2) -> "Vocab":
        counts = Counter(tok for text in texts for tok in tokenize(text))
        kept = [t for t, c in counts.most_common(max_size) if c >= min_count]
        return cls(["<pad>", "<unk>", *kept])

    def __post_init__(self) -> None:
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, max_len: int) -> list[int]:
        ids = [self.index.get(t, UNK) for t in tokenize(text)[-max_len:]]  # keep the end: nearest the gap
        return ids or [UNK]


def pad_batch(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.zeros(len(seqs), int(lengths.max()), dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out, lengths


class BiLSTMEncoder(nn.Module):
    def __init__(self, vocab_size: int, embedding_dim: int = 100, hidden: int = 300):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(embedding_dim, hidden, num_layers=1, batch_first=True, bidirectional=True)
        self.dim = 2 * hidden

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.embedding(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        return torch.cat([h_n[0], h_n[1]], dim=-1)  # last state left-to-right ‖ last state right-to-left


class CoherenceHead:
    """The sigmoid layer over [h<, hs, h>, h<⊙hs, hs⊙h>] of width-`dim` encodings (`self.head`), shared by the
    BiLSTM model and the head over a frozen sentence encoder."""

    dim: int
    head: nn.Linear

    def logits_from_encodings(self, left: torch.Tensor, sent: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([left, sent, right, left * sent, sent * right], dim=-1)).squeeze(-1)

    @torch.no_grad()
    def rank_logits(self, sent: np.ndarray, lefts: np.ndarray, rights: np.ndarray) -> np.ndarray:
        """Logits of one sentence encoding (D,) against N cached context encodings (N, D) each: the head
        decomposes into two matrix-vector products, so no encoder runs at ranking time."""
        d = self.dim
        w = self.head.weight.detach().cpu().numpy()[0].astype(np.float32)
        w_l, w_s, w_r, w_ls, w_sr = (w[i * d : (i + 1) * d] for i in range(5))
        const = float(sent @ w_s + self.head.bias.item())
        return lefts @ (w_l + w_ls * sent) + rights @ (w_r + w_sr * sent) + const


class CoherenceModel(CoherenceHead, nn.Module):
    def __init__(self, vocab_size: int, embedding_dim: int = 100, hidden: int = 300):
        nn.Module.__init__(self)
        self.encoder = BiLSTMEncoder(vocab_size, embedding_dim, hidden)
        self.dim = self.encoder.dim
        self.head = nn.Linear(5 * self.dim, 1)

    def forward(self, left, left_len, sent, sent_len, right, right_len) -> torch.Tensor:
        enc = self.encoder
        return self.logits_from_encodings(enc(left, left_len), enc(sent, sent_len), enc(right, right_len))


class EncoderHeadCoherence(CoherenceHead, nn.Module):
    """The head alone, over the unit vectors of a frozen pretrained sentence encoder (`coherence.encoder`): its only
    parameters; the encoder is named by the trained model's manifest and loaded by whoever encodes."""

    def __init__(self, dim: int):
        nn.Module.__init__(self)
        self.dim = dim
        self.head = nn.Linear(5 * dim, 1)


@torch.no_grad()
def encode_texts(model: CoherenceModel, vocab: Vocab, texts: list[str], max_len: int = 64,
                 batch_size: int = 256) -> np.ndarray:
    """Encode texts in length-sorted batches (little padding) on the model's device; returns float32 (N, D) in input
    order."""
    model.eval()
    device = next(model.parameters()).device
    ids = [vocab.encode(t, max_len) for t in texts]
    order = np.argsort([len(x) for x in ids], kind="stable")
    out = np.empty((len(texts), model.encoder.dim), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch, lengths = pad_batch([ids[i] for i in idx])
        out[idx] = model.encoder(batch.to(device), lengths).cpu().numpy()  # lengths stay on the CPU (packing)
    return out
