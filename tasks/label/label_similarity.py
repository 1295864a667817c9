"""Stage 3: how alike two sentences' context-score rows are — the label of a pair (Sun et al. 2022,
Eq. 4 and variants).

Input: a score matrix S (n_sentences, n_contexts), S[i, c] = how well sentence i fits context c, and `own`
(n_sentences, n_contexts, bool): which contexts were retrieved for sentence i itself (its own top-k). Output: an
(n, n) matrix of labels, NaN where a label is undefined (quarantined upstream as `degenerate_vector`): a row that is
constant up to float rounding under the correlation methods, or a pair where neither sentence has own contexts.

- `cosine`: the paper's plain cosine of the two rows. Raw log-probabilities share a large negative offset, so every
  raw cosine is close to 1: it mostly measures the sentences' overall likelihood.
- `centered_cosine`: cosine of the row-centred rows = the Pearson correlation over the contexts (removes each
  sentence's overall likelihood; the contexts' own predictability, common to both rows, remains and pushes labels up).
- `rank`: Spearman correlation of the rows (centred cosine of the rows' ranks: robust to a few extreme contexts).
- `contrast`: a cross-fit contrast that cancels both per-sentence and per-context additive effects. With
  D = S[i] − S[j] (per context: the context's own predictability cancels), d_i = mean of D over i's own contexts
  (how much better i fits its own contexts than j does), d_j = mean of −D over j's own contexts; label =
  exp(−(d_i + d_j)), clipped to 1 (a per-sentence offset adds +a to d_i and −a to d_j and cancels). Sentences that fit
  each other's contexts as well as their own get 1 (so do two sentences that retrieved the very same contexts); the
  label decays as they stop being interchangeable.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.stats import rankdata

Similarity = Literal["centered_cosine", "cosine", "rank", "contrast"]
SIMILARITIES: tuple[str, ...] = ("centered_cosine", "cosine", "rank", "contrast")

# Scores are float32 (or bfloat16) forward passes summed in float64. The same input scored at another batch position
# differs by kernel rounding, ~1e-7–1e-6 relative in float32; two different contexts differ by ≥ 1e-2 relative. A row
# whose spread is within `rtol` × its magnitude is constant. The bfloat16 value scales float32's margin by the
# formats' epsilons (2^-8 vs 2^-23, capped well below real differences); it is not a measurement.
CONSTANT_RTOL = {"float32": 1e-5, "bfloat16": 2e-3}


def constant_rows(matrix: np.ndarray, rtol: float = CONSTANT_RTOL["float32"]) -> np.ndarray:
    """Rows whose spread over the contexts is within float noise of their magnitude (bool, (n,))."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape[1] == 0:
        return np.ones(m.shape[0], dtype=bool)
    spread = m.max(axis=1) - m.min(axis=1)
    return spread <= rtol * (1.0 + np.abs(m).max(axis=1))


def _row_cosine(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = v / norms[:, None]
    return np.clip(unit @ unit.T, -1.0, 1.0)


def contrast_matrix(matrix: np.ndarray, own: np.ndarray) -> np.ndarray:
    """exp(−(d_i + d_j)) for every pair (module docstring). A sentence without own contexts (scored only over its
    partner's) contributes no d of its own: the gap is then twice the partner's d. NaN when neither has any."""
    s = np.asarray(matrix, dtype=np.float64)
    own = np.asarray(own, dtype=bool)
    counts = own.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # fit[i, j] = mean over i's own contexts of S[j]: how well j fits the contexts retrieved for i.
        fit = (own.astype(np.float64) @ s.T) / counts[:, None]
    d = np.diag(fit)[:, None] - fit  # d[i, j] = d_i for the pair (i, j); NaN when i has no own contexts
    gap = np.where(np.isnan(d), 2 * d.T, np.where(np.isnan(d.T), 2 * d, d + d.T))
    out = np.exp(-np.maximum(gap, 0.0))
    np.fill_diagonal(out, 1.0)
    return out


def contrast_gap(matrix: np.ndarray, own: np.ndarray) -> np.ndarray:
    """d_i + d_j for every pair: the unsquashed contrast (≥ 0 when each sentence fits its own contexts best)."""
    with np.errstate(divide="ignore"):
        return -np.log(contrast_matrix(matrix, own))


def similarity_matrix(matrix: np.ndarray, method: str = "centered_cosine", own: np.ndarray | None = None,
                      rtol: float = CONSTANT_RTOL["float32"]) -> np.ndarray:
    """(n, n) labels of a score matrix (n, n_contexts) by `method`; NaN for rows that are constant (cosine-type
    methods) or pairs with nothing to contrast."""
    if method not in SIMILARITIES:
        raise ValueError(f"unknown similarity '{method}'; choose one of {', '.join(SIMILARITIES)}")
    v = np.asarray(matrix, dtype=np.float64)
    if method == "contrast":
        if own is None:
            raise ValueError("the contrast similarity needs each sentence's own contexts (own)")
        return contrast_matrix(v, own)
    if method == "cosine":  # well defined for constant rows too (no centring amplifies their rounding noise)
        return _row_cosine(v)
    centred = rankdata(v, axis=1) - (v.shape[1] + 1) / 2.0 if method == "rank" else v - v.mean(axis=1, keepdims=True)
    out = _row_cosine(centred)
    # A constant row, centred, is rounding noise (or exactly 0): its correlation is undefined, never a label.
    flat = constant_rows(v, rtol)
    out[flat, :] = np.nan
    out[:, flat] = np.nan
    return out
