"""Stage 3: the similarity functions on hand-made score matrices, the scale-aware constant-row check, and the LLM
rating's parsing (pure functions; the rating over real HTTP is in test_labeling.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from tasks.label.label_similarity import constant_rows, contrast_gap, similarity_matrix

# Three sentences over six contexts; sentences 0 and 1 fit contexts alike, sentence 2 fits the others.
S = np.array([[-2.0, -2.5, -3.0, -4.0, -4.5, -5.0],
              [-2.2, -2.4, -3.1, -4.2, -4.4, -5.1],
              [-5.0, -4.6, -4.0, -3.0, -2.4, -2.1]])
OWN = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0], [0, 0, 0, 1, 1, 1]], dtype=bool)


def test_cosine_is_the_plain_cosine_of_the_rows():
    got = similarity_matrix(S, "cosine")
    for i in range(3):
        for j in range(3):
            assert got[i, j] == pytest.approx(S[i] @ S[j] / np.linalg.norm(S[i]) / np.linalg.norm(S[j]))
    assert got[0, 2] > 0.8  # raw log-probs share an offset: even opposite rows look alike


def test_centered_cosine_is_pearson_and_rank_is_spearman():
    centred, rank = similarity_matrix(S, "centered_cosine"), similarity_matrix(S, "rank")
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert centred[i, j] == pytest.approx(np.corrcoef(S[i], S[j])[0, 1])
        assert rank[i, j] == pytest.approx(spearmanr(S[i], S[j]).statistic)
    assert centred[0, 1] > 0.9 and centred[0, 2] < -0.9


def test_contrast_cancels_per_sentence_and_per_context_effects():
    base = similarity_matrix(S, "contrast", OWN)
    rng = np.random.default_rng(0)
    shifted = S + rng.normal(size=(3, 1)) * 3 + rng.normal(size=(1, 6)) * 3  # a_i + b_c
    assert np.allclose(similarity_matrix(shifted, "contrast", OWN), base)
    # The centred cosine is not protected from a per-context shift: it pulls every pair towards +1.
    centred = similarity_matrix(S + np.array([[0, 0, 0, 0, 0, 9.0]]), "centered_cosine")
    assert centred[0, 2] > similarity_matrix(S, "centered_cosine")[0, 2] + 0.5
    # Sentences that fit each other's contexts as well as their own are the most similar.
    assert base[0, 1] > base[0, 2] and base[1, 0] > base[1, 2]
    assert np.allclose(base, base.T) and np.allclose(np.diag(base), 1.0)
    gap = contrast_gap(S, OWN)
    d0 = S[0, OWN[0]].mean() - S[2, OWN[0]].mean()  # how much better 0 fits its own contexts than 2 does
    d2 = S[2, OWN[2]].mean() - S[0, OWN[2]].mean()
    assert gap[0, 2] == pytest.approx(d0 + d2) and base[0, 2] == pytest.approx(np.exp(-(d0 + d2)))


def test_contrast_without_own_contexts_uses_the_partners_and_needs_some():
    own = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=bool)
    got = similarity_matrix(S, "contrast", own)
    assert got[0, 1] == pytest.approx(1.0)  # the very same contexts retrieved: interchangeable
    d0 = S[0, :2].mean() - S[2, :2].mean()  # sentence 2 has no own contexts: only d_0 counts, twice
    assert got[0, 2] == pytest.approx(np.exp(-2 * d0)) and got[2, 0] == pytest.approx(got[0, 2])
    none = similarity_matrix(S[:2], "contrast", np.zeros((2, 6), dtype=bool))
    assert np.isnan(none[0, 1])
    with pytest.raises(ValueError, match="own contexts"):
        similarity_matrix(S, "contrast")


def test_constant_check_is_scale_aware():
    row = np.full(8, -3.21)
    rounding = row * (1 + np.random.default_rng(1).uniform(-1e-6, 1e-6, 8))  # float32 kernel rounding
    real = row + np.linspace(-0.05, 0.05, 8)  # two contexts that truly differ
    m = np.stack([rounding, real, real[::-1]])
    assert constant_rows(m).tolist() == [True, False, False]
    assert not np.all(rounding == rounding[0])  # the old exact check would have kept it
    for method in ("centered_cosine", "rank"):
        got = similarity_matrix(m, method)
        assert np.isnan(got[0]).all() and np.isnan(got[:, 0]).all()
        assert got[1, 2] == pytest.approx(-1.0)
    # A large magnitude does not make a real spread look constant, nor does a tiny one make noise look real.
    assert not constant_rows(np.array([1e3 + np.arange(4) * 1e-1]))[0]
    assert constant_rows(np.array([1e3 * (1 + np.array([0, 1e-7, -1e-7, 0]))]))[0]


def test_unknown_similarity_is_refused():
    with pytest.raises(ValueError, match="unknown similarity 'dot'"):
        similarity_matrix(S, "dot")


def test_expected_rating_from_top_logprobs():
    from tasks.label.llm_rating import expected_rating

    lp = [["4", np.log(0.5)], ["3", np.log(0.3)], [" 5", np.log(0.1)], ["The", np.log(0.1)]]
    score, digit, from_lp = expected_rating(lp, "4")
    assert score == pytest.approx((4 * 0.5 + 3 * 0.3 + 5 * 0.1) / 0.9) and digit == 4 and from_lp
    assert expected_rating(None, "3") == (3.0, 3, False)  # no log-probs: the answered digit
    assert expected_rating([["7", 0.0]], "7.5") == (None, None, False)  # outside 0–5: no rating
    assert expected_rating([], "I think") == (None, None, False)


def test_hierarchy_and_gold_agreement_on_hand_made_pairs():
    import pandas as pd

    from tasks.label.label_quality import gold_agreement, hierarchy_rate

    # t1 ordered a+ > am > a-, t2 not (am > a+), t3 has no intermediate (NLI): only a+ > a- counts for it.
    rows = [("t1", "anchor-positive", 0.9), ("t1", "anchor-intermediate", 0.6), ("t1", "anchor-negative", 0.2),
            ("t2", "anchor-positive", 0.5), ("t2", "anchor-intermediate", 0.7), ("t2", "anchor-negative", 0.1),
            ("t3", "anchor-positive", 0.3), ("t3", "anchor-negative", 0.4),
            ("t1", "positive-negative", 0.0), (None, "cross", 0.99)]
    pairs = pd.DataFrame(rows, columns=["triple_id", "relation", "label"])
    got = hierarchy_rate(pairs)
    assert got == {"triples": 2, "rate": 0.5, "pos_over_neg_triples": 3, "pos_over_neg_rate": pytest.approx(2 / 3)}
    assert hierarchy_rate(pairs[pairs["relation"] == "cross"])["rate"] is None  # nothing to rank: n/a, not 0

    gold = pd.DataFrame({"label": np.linspace(0, 1, 12), "gold": [0, 1, 1.5, 2, 2.5, 2.4, 3, 3.5, 4, 4.2, 4.8, 5]})
    assert gold_agreement(gold) == {"pairs": 12, "spearman": round(100 * spearmanr(gold["label"], gold["gold"])
                                                                   .statistic, 2)}
    assert gold_agreement(gold.head(9)) is None  # too few gold pairs for a meaningful correlation
    assert gold_agreement(gold.drop(columns="gold")) is None
