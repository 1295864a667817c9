"""The duplicate finders and the keep-the-first rule on their own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from tasks.core.decontamination import EvalSentences, ngram_containment
from tasks.dataset import dedup
from tasks.dataset.dedup import cosine_pairs, exact_pairs, keep_first, minhash_pairs, normalized, shingles
from tasks.dataset.settings import DatasetSettings


def test_normalized_text_is_lower_case_words_single_spaced():
    assert normalized(pd.Series([" The Bridge,  CRACKED!! "])).tolist() == ["the bridge cracked"]


def test_shingles_are_every_window_of_the_utf8_bytes():
    assert shingles("abcdef", 3) == {b"abc", b"bcd", b"cde", b"def"}
    assert shingles("abc", 3) == {b"abc"}  # exactly one window
    assert shingles("ab", 5) == {b"ab"}  # shorter than a shingle: the whole text, no shorter pieces
    assert shingles("é", 1) == {b"\xc3", b"\xa9"}  # bytes, not characters


def test_exact_duplicates_ignore_case_punctuation_and_spacing():
    keys = normalized(pd.Series(["The bridge cracked.", "the  bridge cracked!", "A bridge cracked.", "THE BRIDGE, cracked"]))
    assert exact_pairs(keys) == [(0, 1, 1.0), (0, 3, 1.0)]


def test_minhash_finds_one_word_edits_not_other_sentences():
    texts = normalized(pd.Series([
        "engineers inspected the old stone bridge on monday morning and found deep cracks",
        "engineers inspected the old stone bridge on tuesday morning and found deep cracks",
        "the orchestra performed the new symphony for the first time in the capital",
        "farmers in the valley planted wheat earlier than usual this spring",
    ])).tolist()
    pairs = minhash_pairs(texts, threshold=0.7, size=5, num_perm=128)
    assert [(i, j) for i, j, _ in pairs] == [(0, 1)] and 0.7 <= pairs[0][2] < 1.0


def _at_the_threshold() -> list[str]:
    # 40 pairs (rows 2k, 2k + 1), each the runs t = 0..9 and t = 3..12 of the characters 33 + s·t mod 94 (stride s
    # = k + 1): 9 distinct 2-byte shingles each, 6 shared, so Jaccard 6 / 12 = 0.5 exactly; a stride of its own per
    # pair, so no shingle is shared across pairs. At the threshold LSH finds each pair with probability ~1/2: which
    # ones depends on the hash functions the seed draws.
    def run(stride, start, stop):
        return "".join(chr(33 + (stride * t) % 94) for t in range(start, stop))
    return [text for s in range(1, 41) for text in (run(s, 0, 10), run(s, 3, 13))]


def test_minhash_keeps_a_pair_exactly_at_the_threshold():
    pairs = minhash_pairs(_at_the_threshold(), threshold=0.5, size=2, num_perm=64)  # not the datasketch default 128
    assert pairs and all(i % 2 == 0 and j == i + 1 and score == 0.5 for i, j, score in pairs)


def test_minhash_is_reproducible_by_seed():
    texts = _at_the_threshold()
    first = minhash_pairs(texts, threshold=0.5, size=2, num_perm=64)
    assert minhash_pairs(texts, threshold=0.5, size=2, num_perm=64) == first  # a rebuild removes the same rows
    assert minhash_pairs(texts, threshold=0.5, size=2, num_perm=64, seed=1) == first  # the default seed is 1
    assert minhash_pairs(texts, threshold=0.5, size=2, num_perm=64, seed=2) != first  # the seed is honoured


def test_minhash_reports_the_exact_jaccard_to_four_places():
    # The 14 5-byte shingles of the first are the first 14 of the second's 21: Jaccard 14 / 21 = 2/3.
    assert minhash_pairs(["the bridge cracked", "the bridge cracked at ten"], threshold=0.5, size=5,
                         num_perm=128) == [(0, 1, 0.6667)]


def test_keep_first_names_the_most_similar_kept_row_and_the_earliest_on_a_tie():
    alive = np.ones(3, dtype=bool)
    assert keep_first([(0, 2, 0.8), (1, 2, 0.95)], alive) == {2: (1, 0.95)}
    assert keep_first([(1, 2, 0.9), (0, 2, 0.9)], alive) == {2: (0, 0.9)}


def test_keep_first_keeps_the_earliest_and_breaks_chains():
    # 0 ~ 1 ~ 2 (0 and 2 unalike): 1 goes with 0, so 2 has no kept duplicate left and stays. 3 ~ 4, but 3 was
    # already removed by an earlier check: 4 stays.
    alive = np.array([True, True, True, False, True])
    removed = keep_first([(1, 2, 0.8), (0, 1, 0.9), (3, 4, 0.99)], alive)
    assert removed == {1: (0, 0.9)}


def test_cosine_pairs_by_blocks_match_the_full_product():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 8))
    vectors[7] = vectors[3] + 0.01
    vectors[40] = vectors[3]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = {(i, j) for i, j, _ in cosine_pairs(vectors, 0.99, block=16)}
    assert found == {(3, 7), (3, 40), (7, 40)}


ANCHORS = ["The old stone bridge cracked on Monday.", "the old stone bridge cracked on monday!",
           "The old stone bridge cracked on Monday morning.", "The orchestra played a new symphony.",
           "A new symphony was played by the orchestra.", "Farmers planted wheat early this spring.",
           "The old stone bridge cracked on Monday"]


def _vectors() -> np.ndarray:
    # By hand: the bridge rows share one direction, the two orchestra rows another; one more row after the anchors
    # (build-dataset appends the evaluation sentences' vectors).
    return np.eye(3)[[0, 0, 0, 1, 1, 2, 0, 1]]


def test_dedup_anchors_runs_the_three_checks_in_order_on_the_rows_still_alive(monkeypatch):
    clock = iter([100.0, 101.23456])
    monkeypatch.setattr(dedup, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    alive = np.array([True] * 6 + [False])  # the last row was removed by an earlier check
    timings = {}
    found = dedup.dedup_anchors(ANCHORS, _vectors(), DatasetSettings(paraphrase_cosine=0.95), alive, timings)
    # Row 1 is row 0 in other case and punctuation; row 2 adds a word: 34 of its 42 shingles are row 0's; row 4
    # is row 3's vector. A row removed by one check is neither removed again by a later one nor a reason to remove.
    assert found == {"duplicate_source": {1: (0, 1.0)}, "near_duplicate_anchor": {2: (0, round(34 / 42, 4))},
                     "paraphrase_anchor": {4: (3, 1.0)}}
    assert alive.tolist() == [True, False, False, True, False, True, False]
    assert timings == {"minhash_s": 1.235}  # seconds of the exact and MinHash checks, to the millisecond


def test_dedup_anchors_skips_the_paraphrase_check_without_vectors_or_threshold():
    settings = DatasetSettings(paraphrase_cosine=None)  # the vectors may exist for the evaluation check alone
    found = dedup.dedup_anchors(ANCHORS, _vectors(), settings, np.ones(7, dtype=bool))
    assert found == {"duplicate_source": {1: (0, 1.0), 6: (0, 1.0)}, "near_duplicate_anchor": {2: (0, 0.8095)}}
    found = dedup.dedup_anchors(ANCHORS, None, DatasetSettings(paraphrase_cosine=0.95), np.ones(7, dtype=bool))
    assert set(found) == {"duplicate_source", "near_duplicate_anchor"}


def test_ngram_containment_counts_the_evaluation_sentence_not_the_text():
    evals = EvalSentences(["e:0:s1", "e:1:s1", "e:2:s1"], ["A man is playing a guitar.", "As soon as possible.",
                                                          "Two brown dogs run across the wet sand."], [])
    best, share = ngram_containment(["Tonight a man is playing a guitar on the stage of the old hall.",
                                     "A man is playing a flute.", "Two brown dogs run across the wet sand.",
                                     "We want this resolved as soon as possible, she said."], evals, n=3)
    assert best[0] == 0 and share[0] == 1.0  # the whole evaluation sentence sits inside a longer one
    assert share[1] == 0.75  # 3 of its 4 trigrams: one word changed, not contamination at 0.8
    assert best[2] == 2 and share[2] == 1.0
    assert share[3] == 0.0  # a two-trigram phrase is no sentence to leak (the default corpus's one false match)
