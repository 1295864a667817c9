"""Decontamination's n-gram containment (tasks/core/decontamination.py) on tiny hand-counted inputs: the share is
of the evaluation sentence's distinct n-grams, the shortest sentence the check still covers, and the answer when no
evaluation sentence is long enough; the mining corpus's filter (`without_eval_sentences`)."""

from __future__ import annotations

from tasks.core.decontamination import EvalSentences, ngram_containment, without_eval_sentences


def _evals(*texts: str) -> EvalSentences:
    return EvalSentences([f"e:{i}:s1" for i in range(len(texts))], list(texts), [])


def test_a_text_repeating_an_evaluation_sentence_holds_all_of_it_not_more():
    # "a man is playing a guitar": 4 trigrams, each found twice in the text; the share is of distinct trigrams: 4/4
    best, share = ngram_containment(["A man is playing a guitar. A man is playing a guitar."],
                                     _evals("A man is playing a guitar."), n=3)
    assert best.tolist() == [0] and share.tolist() == [1.0]


def test_a_five_word_evaluation_sentence_is_still_checked_at_n_3():
    # 5 words = 3 trigrams = MIN_EVAL_NGRAMS: the shortest sentence the overlap check covers
    best, share = ngram_containment(["Reports say the old bridge cracked today, again.", "Nothing in common here."],
                                    _evals("A cat sleeps.", "The old bridge cracked today."), n=3)
    assert best[0] == 1 and share.tolist() == [1.0, 0.0]


def test_no_evaluation_sentence_with_n_words_matches_nothing_with_usable_indices():
    evals = _evals("A cat sleeps.", "Hello there.")  # no 4-gram in any of them
    best, share = ngram_containment(["A cat sleeps on the mat.", "Hello there, friend.", "x"], evals, n=4)
    assert share.tolist() == [0.0, 0.0, 0.0] and best.tolist() == [0, 0, 0]
    # the indices point into the evaluation ids (build.py reports the matched id): integers, one per text
    assert best.dtype.kind == "i" and [evals.ids[i] for i in best] == ["e:0:s1"] * 3


def test_the_mining_filter_drops_evaluation_sentences_held_or_repeated_in_other_case_and_punctuation():
    evals = _evals("A man is dancing.", "The old bridge cracked today.")  # the first: 2 trigrams, under the check
    texts = ["a man is dancing", "A MAN IS DANCING!", "A man is dancing with his wife.",  # exact forms: out; longer: in
             "Reports say the old bridge cracked today, again.", "Nothing in common here."]
    kept, removed = without_eval_sentences(texts, evals)
    assert kept == ["A man is dancing with his wife.", "Nothing in common here."] and removed == 3
    assert without_eval_sentences(texts, _evals()) == (texts, 0) and without_eval_sentences([], evals) == ([], 0)
