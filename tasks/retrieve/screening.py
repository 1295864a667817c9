"""First-pass screening of candidate contexts for a sentence: sparse vectors, batched sparse products, top-K.

- `tfidf` (the paper's): TF-IDF weighted bag of words with bigrams (ngram_range (1, 2) by default; (2, 2) is the
  strict bigram-only variant), L2-normalized; score = cosine.
- `bm25`: Okapi BM25 (k1, b, epsilon-floored idf exactly as rank-bm25's BM25Okapi), precomputed as one sparse
  document-term weight matrix so a batch of queries is one sparse product.

A context is represented by its text around the gap (c< + c>); queries are sentences. Queries are scored in batches
(`batch_size` rows of a sparse product at a time), so memory is bounded by batch_size × (non-zeros per row), never
by queries × corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

TOKEN_PATTERN = r"(?u)\b\w+\b"


@dataclass
class ScreeningIndex:
    kind: str
    vectorizer: CountVectorizer
    matrix: sp.csr_matrix  # contexts × terms, already weighted (scores = queries @ matrix.T)

    @property
    def size(self) -> int:
        return self.matrix.shape[0]

    def query_vectors(self, queries: list[str]) -> sp.csr_matrix:
        q = self.vectorizer.transform(queries)
        if self.kind == "bm25":
            q = q.astype(np.float32)  # raw term counts: BM25 sums over query tokens
        return q.tocsr()


def build_index(texts: list[str], kind: str = "tfidf", ngram_range: tuple[int, int] = (1, 2), min_df: int = 1,
                k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> ScreeningIndex:
    if not texts:
        raise ValueError("cannot build a screening index over zero contexts")
    if kind == "tfidf":
        vec = TfidfVectorizer(ngram_range=ngram_range, min_df=min_df, sublinear_tf=True, token_pattern=TOKEN_PATTERN,
                              stop_words="english" if ngram_range[0] == 1 else None, dtype=np.float32)
        return ScreeningIndex(kind, vec, vec.fit_transform(texts).tocsr())
    if kind == "bm25":
        vec = CountVectorizer(ngram_range=ngram_range, min_df=min_df, token_pattern=TOKEN_PATTERN,
                              lowercase=True, dtype=np.float32)
        tf = vec.fit_transform(texts).tocsr()
        return ScreeningIndex(kind, vec, bm25_weights(tf, k1=k1, b=b, epsilon=epsilon))
    raise ValueError(f"unknown screener '{kind}' (tfidf | bm25)")


def bm25_weights(tf: sp.csr_matrix, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> sp.csr_matrix:
    """Document-side BM25 weights w[d, t] = idf(t) · tf(k1+1) / (tf + k1(1 − b + b·|d|/avgdl)), vectorized."""
    n_docs = tf.shape[0]
    doc_len = np.asarray(tf.sum(axis=1)).ravel()
    avgdl = doc_len.mean() if n_docs else 1.0
    df = np.bincount(tf.indices, minlength=tf.shape[1]).astype(np.float64)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    idf = np.where(idf < 0, epsilon * idf.mean(), idf)  # rank-bm25's floor for very common terms
    rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
    data = tf.data.astype(np.float64)
    denom = data + k1 * (1 - b + b * doc_len[rows] / avgdl)
    weighted = idf[tf.indices] * data * (k1 + 1) / denom
    return sp.csr_matrix((weighted.astype(np.float32), tf.indices, tf.indptr), shape=tf.shape)


def top_k(index: ScreeningIndex, queries: list[str], k: int, batch_size: int = 256,
          exclude: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k context rows per query: (indices, scores), each (n_queries, k), best first; -1 / -inf pad rows with
    fewer than k matching contexts. `exclude[i]` (optional): context rows never returned for query i (e.g. the
    contexts that contain the query sentence itself, when queries come from the corpus)."""
    n = len(queries)
    k_eff = min(k, index.size)
    out_idx = np.full((n, k_eff), -1, dtype=np.int64)
    out_score = np.full((n, k_eff), -np.inf, dtype=np.float32)
    matrix_t = index.matrix.T.tocsc()
    for start in range(0, n, batch_size):
        q = index.query_vectors(queries[start : start + batch_size])
        scores = (q @ matrix_t).tocsr()  # batch × contexts, sparse
        for r in range(scores.shape[0]):  # per query row (never per corpus row)
            lo, hi = scores.indptr[r], scores.indptr[r + 1]
            cols, vals = scores.indices[lo:hi], scores.data[lo:hi]
            if exclude is not None and len(exclude[start + r]):
                mask = ~np.isin(cols, exclude[start + r])
                cols, vals = cols[mask], vals[mask]
            if len(vals) > k_eff:
                part = np.argpartition(-vals, k_eff - 1)[:k_eff]
                cols, vals = cols[part], vals[part]
            order = np.lexsort((cols, -vals))  # score desc, ties by context row: deterministic
            out_idx[start + r, : len(order)] = cols[order]
            out_score[start + r, : len(order)] = vals[order]
    return out_idx, out_score
