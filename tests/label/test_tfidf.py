"""The pairs' TF-IDF cosine (tasks/label/labeling.tfidf_cosines, the word-overlap part of the combined label) against
values computed by hand, and a reference written from the definition that the label flow's test compares with."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from tasks.label.labeling import tfidf_cosines


def tfidf_reference(s1: list[str], s2: list[str]) -> list[float]:
    """The pairs' TF-IDF cosines written out from their definition (not the labeler's scikit-learn call): lower-cased
    words of two or more characters, unigrams and bigrams, tf 1 + ln(count), idf ln((1 + n) / (1 + df)) + 1 over the
    n = 2 × pairs sentences, each vector of unit length."""
    def terms(text: str) -> Counter:
        words = re.findall(r"\b\w\w+\b", text.lower())
        return Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:])])

    docs = [terms(t) for t in [*s1, *s2]]
    df = Counter(term for doc in docs for term in doc)
    idf = {term: math.log((1 + len(docs)) / (1 + d)) + 1 for term, d in df.items()}

    def vector(doc: Counter) -> dict:
        weights = {t: (1 + math.log(c)) * idf[t] for t, c in doc.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items()}

    left, right = [vector(d) for d in docs[: len(s1)]], [vector(d) for d in docs[len(s1):]]
    return [sum(w * b.get(t, 0.0) for t, w in a.items()) for a, b in zip(left, right)]


def test_tfidf_cosines_on_hand_computed_pairs():
    """Six sentences, all terms once: idf(red) = ln(7/6) + 1 (in 5 of 6), idf(cat) = idf(red cat) = ln(7/4) + 1 (3 of
    6), idf(dog) = idf(red dog) = ln(7/3) + 1 (2 of 6). "red cat" · "red dog" share only "red":
    red² / √((red² + 2 cat²)(red² + 2 dog²)) = 1.33206 / (2.48935 × 2.85606) = 0.187358."""
    s1, s2 = ["red cat", "red dog", "red cat"], ["red cat", "blue fish", "red dog"]
    expected = [1.0, 0.0, 0.187358]
    assert tfidf_cosines(s1, s2) == pytest.approx(expected, abs=1e-6)
    assert tfidf_reference(s1, s2) == pytest.approx(expected, abs=1e-6)
    assert tfidf_cosines([], []).shape == (0,)
