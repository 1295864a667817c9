"""Context windows over a sentence table, and the diverse selection of context sets C_s (Sun et al. 2022, §3.3).

A context of position i in a document is (c<, c>) = the k sentences before and the k after it (both sides must be
non-empty; near document edges fewer than k are used). Its chunk is the document, or a fixed window of
`chunk_size` positions of it when chunk_size > 0 — the diversity rule lets each chunk contribute one context.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.coherence import tokenize


def context_windows(sentences: pd.DataFrame, k: int = 1, chunk_size: int = 0) -> pd.DataFrame:
    """sentences: doc_id, position, text (all sentences, in document order) → one row per context:
    context_id, doc_id, position, chunk_id, left, centre, right. Vectorized with group-wise shifts."""
    frame = sentences.sort_values(["doc_id", "position"], kind="stable").reset_index(drop=True)
    grouped = frame.groupby("doc_id", sort=False)["text"]
    lefts = [grouped.shift(j) for j in range(k, 0, -1)]  # farthest first
    rights = [grouped.shift(-j) for j in range(1, k + 1)]

    def join(cols: list[pd.Series]) -> pd.Series:
        out = cols[0].fillna("")
        for col in cols[1:]:
            out = out.str.cat(col.fillna(""), sep=" ")
        return out.str.strip()

    left, right = join(lefts), join(rights)
    keep = left.notna() & right.notna() & (left != "") & (right != "")
    out = pd.DataFrame({
        "doc_id": frame["doc_id"], "position": frame["position"].astype("int32"),
        "left": left, "centre": frame["text"], "right": right,
        "prev_sentence": lefts[-1],  # the (i-1)-th sentence: the Jaccard diversity rule compares these
    })[keep].reset_index(drop=True)
    block = (out["position"] // chunk_size).astype(str) if chunk_size > 0 else "0"
    out.insert(0, "chunk_id", out["doc_id"] + "|" + block)
    out.insert(0, "context_id", np.arange(len(out), dtype=np.int64))
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def select_diverse(ranked: pd.DataFrame, size: int, max_jaccard: float = 0.5, one_per_chunk: bool = True
                   ) -> pd.DataFrame:
    """Greedy C_s: walk candidates best first; take one if its chunk is new and the Jaccard similarity of its
    preceding sentence to every chosen one is below `max_jaccard`; stop at `size`.
    `ranked`: candidate rows (chunk_id, prev_sentence, …) sorted best first."""
    chosen: list[int] = []
    chunks: set[str] = set()
    prev_sets: list[set[str]] = []
    for i, (chunk, prev) in enumerate(zip(ranked["chunk_id"], ranked["prev_sentence"])):
        if one_per_chunk and chunk in chunks:
            continue
        tokens = set(tokenize(prev))
        if any(jaccard(tokens, other) >= max_jaccard for other in prev_sets):
            continue
        chosen.append(i)
        chunks.add(chunk)
        prev_sets.append(tokens)
        if len(chosen) == size:
            break
    return ranked.iloc[chosen]
