"""Duplicate anchors, three ways, each returning (kept index, removed index, score) pairs; `keep_first` turns them
into removals where the earlier row always wins:

- exact: the same normalized text (case, punctuation and spacing aside);
- near-duplicate text: MinHash LSH (datasketch) over character shingles, candidates verified by exact Jaccard —
  LSH finds the candidates without comparing all n² pairs;
- paraphrases: cosine of the training backbone's embeddings, exact, by a block matrix product: n² work in blocks of
  2,048 rows (seconds at 10⁴–10⁵ anchors; past ~10⁶ an approximate index such as FAISS would be the next step).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from tasks.core.decontamination import normalized

Pair = tuple[int, int, float]  # (earlier row, later row, similarity)


def exact_pairs(keys: pd.Series) -> list[Pair]:
    """(first row with the key, later row with it, 1.0) for every repeated key."""
    frame = pd.DataFrame({"key": keys.to_numpy(), "row": np.arange(len(keys))})
    first = frame.groupby("key", sort=False)["row"].transform("min")
    later = frame[frame["row"] != first]
    return [(int(i), int(j), 1.0) for i, j in zip(first[later.index], later["row"])]


def shingles(text: str, size: int) -> set[bytes]:
    data = text.encode("utf-8")
    return {data[k:k + size] for k in range(max(len(data) - size + 1, 1))}


def minhash_pairs(texts: Sequence[str], threshold: float, size: int, num_perm: int, seed: int = 1) -> list[Pair]:
    """Pairs of texts whose character-shingle Jaccard is ≥ threshold: MinHash LSH candidates, then the exact
    Jaccard of the two shingle sets (an LSH candidate below the threshold is dropped, so the result is exact for
    the pairs LSH finds)."""
    from datasketch import MinHash, MinHashLSH

    sets = [shingles(t, size) for t in texts]
    hashes = MinHash.bulk(sets, num_perm=num_perm, seed=seed)
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for row, minhash in enumerate(hashes):
            session.insert(row, minhash, check_duplication=False)
    pairs = []
    for j, minhash in enumerate(hashes):
        for i in lsh.query(minhash):
            if i < j:
                jaccard = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
                if jaccard >= threshold:
                    pairs.append((int(i), j, round(jaccard, 4)))
    return pairs


def cosine_pairs(vectors: np.ndarray, threshold: float, block: int = 2048) -> list[Pair]:
    """Pairs (i < j) of unit vectors with cosine ≥ threshold, by blocks of rows (memory block × n)."""
    pairs = []
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ vectors.T
        rows, cols = np.nonzero(sims >= threshold)
        keep = cols > rows + start
        pairs += [(int(i + start), int(j), round(float(sims[i, j]), 4)) for i, j in zip(rows[keep], cols[keep])]
    return pairs


def keep_first(pairs: list[Pair], alive: np.ndarray) -> dict[int, tuple[int, float]]:
    """{removed row: (the kept row it duplicates, similarity)}: rows in order, each later row removed when it
    duplicates an earlier row that is still kept (a chain a ~ b ~ c with a, c unalike keeps a and c). `alive`: rows
    an earlier check already removed are neither removed again nor a reason to remove. Loops over the pairs found,
    not the rows."""
    removed: dict[int, tuple[int, float]] = {}
    for i, j, score in sorted(pairs, key=lambda p: (p[1], -p[2], p[0])):
        if alive[i] and alive[j] and i not in removed and j not in removed:
            removed[j] = (i, score)
    return removed


def dedup_anchors(anchors: list[str], vectors: np.ndarray | None, settings, alive: np.ndarray,
                  timings: dict | None = None) -> dict[str, dict[int, tuple[int, float]]]:
    """The three checks in order on the rows still `alive` (updated in place): {reason: {removed row: (kept row,
    similarity)}} for duplicate_source, near_duplicate_anchor and (with `vectors` and settings.paraphrase_cosine)
    paraphrase_anchor. `settings`: a DatasetSettings; `timings` gets "minhash_s" (exact + MinHash) when given."""
    started = time.perf_counter()
    keys = normalized(pd.Series(anchors))
    found = {"duplicate_source": keep_first(exact_pairs(keys), alive)}
    alive[list(found["duplicate_source"])] = False
    found["near_duplicate_anchor"] = keep_first(minhash_pairs(keys.tolist(), settings.near_duplicate_jaccard,
                                                              settings.shingle_chars, settings.num_perm), alive)
    alive[list(found["near_duplicate_anchor"])] = False
    if timings is not None:
        timings["minhash_s"] = round(time.perf_counter() - started, 3)
    if vectors is not None and settings.paraphrase_cosine is not None:
        found["paraphrase_anchor"] = keep_first(cosine_pairs(vectors[:len(anchors)], settings.paraphrase_cosine), alive)
        alive[list(found["paraphrase_anchor"])] = False
    return found
