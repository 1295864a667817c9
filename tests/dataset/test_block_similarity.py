"""The blocked similarity searches of build-dataset (dedup's cosine pairs, decontamination's nearest evaluation
sentence) against every pair computed one by one: blocks smaller than the table, so a block boundary, a row
offset or a threshold at equality cannot go wrong unseen (mutants of these functions survived the larger tests)."""

from __future__ import annotations

import numpy as np

from tasks.core.decontamination import cosine_matches
from tasks.dataset.dedup import cosine_pairs

# Unit vectors whose cosines are exact in binary where they sit on the threshold (0.6 = 1 × 0.6 + 0 × …).
VECTORS = np.array([[1, 0, 0], [0.6, 0.8, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [0.8, 0.6, 0], [0.6, 0, 0.8],
                    [1 / np.sqrt(1.01), 0.1 / np.sqrt(1.01), 0]])


def _every_pair(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    out = []
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            cos = sum(float(a) * float(b) for a, b in zip(vectors[i], vectors[j]))
            if cos >= threshold:
                out.append((i, j, round(cos, 4)))
    return out


def test_cosine_pairs_in_blocks_are_every_pair_at_or_above_the_threshold():
    expected = _every_pair(VECTORS, 0.6)
    # By hand: the equal-to-threshold pairs are in, the duplicate (0, 3) is 1.0, and row 7's are rounded to 4 places.
    assert (0, 1, 0.6) in expected and (0, 3, 1.0) in expected and (0, 7, 0.995) in expected
    for block in (1, 3, 8, 2048):
        assert sorted(cosine_pairs(VECTORS, 0.6, block=block)) == sorted(expected), block


def test_cosine_matches_in_blocks_are_each_rows_nearest_evaluation_vector():
    evals = VECTORS[[0, 2, 4]]
    expected = [max(range(3), key=lambda k: float(VECTORS[i] @ evals[k])) for i in range(len(VECTORS))]
    for block in (1, 3, 4096):
        best, score = cosine_matches(VECTORS, evals, block=block)
        assert best.dtype.kind == "i" and score.dtype.kind == "f" and best.tolist() == expected, block
        assert np.allclose(score, [float(VECTORS[i] @ evals[k]) for i, k in enumerate(expected)]), block
