"""Embedding-space diagnostics (NGCSE, eq. 2–5; Wang & Isola 2020) and the STS score.

- alignment = E_(x,y)~pos ‖f(x) − f(y)‖₂^α   (α = 2), on L2-normalized embeddings of positive pairs
- uniformity = log E_x,y~data exp(−t‖f(x) − f(y)‖₂²)   (t = 2), over all distinct pairs of a sentence sample
- RFD_a = mean over checkpoints of alignment(held-out training pairs) − alignment(evaluation pairs); RFD_u likewise
- STS score: Spearman ×100 between cosine similarities and gold scores.
Inputs are numpy arrays of embeddings (N, D); nothing here trains or loads a model.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr


def _normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def alignment(emb1: np.ndarray, emb2: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ‖f(x) − f(y)‖^α over positive pairs (rows of emb1 / emb2); lower = positives closer."""
    return float((np.linalg.norm(_normalize(emb1) - _normalize(emb2), axis=-1) ** alpha).mean())


def uniformity(emb: np.ndarray, t: float = 2.0) -> float:
    """log of the mean Gaussian potential over all distinct pairs; lower = more uniform on the sphere."""
    x = _normalize(emb)
    sq = np.maximum(2.0 - 2.0 * (x @ x.T), 0.0)  # squared distances of unit vectors
    iu = np.triu_indices(len(x), k=1)
    v = -t * sq[iu]
    return float(np.log(np.exp(v - v.max()).mean()) + v.max())  # log-mean-exp, stable


def rfd(held_out: list[float], evaluation: list[float]) -> float:
    """Relative Fitting Difficulty over the recorded checkpoints: mean(held-out − evaluation)."""
    if len(held_out) != len(evaluation) or not held_out:
        raise ValueError("RFD needs the same non-zero number of held-out and evaluation measurements")
    return float(np.mean(np.asarray(held_out) - np.asarray(evaluation)))


def cosine_scores(emb1: np.ndarray, emb2: np.ndarray) -> np.ndarray:
    return (_normalize(emb1) * _normalize(emb2)).sum(axis=-1)


def sts_spearman(emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray) -> float:
    """Spearman ×100 between the pairs' cosine similarities and the gold scores."""
    return float(100.0 * spearmanr(cosine_scores(emb1, emb2), gold).statistic)
