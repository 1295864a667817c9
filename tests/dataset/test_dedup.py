"""The duplicate finders and the keep-the-first rule on their own."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.dataset.decontamination import EvalSentences, ngram_containment
from tasks.dataset.dedup import cosine_pairs, exact_pairs, keep_first, minhash_pairs, normalized


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
