"""Decontamination at the sentence level: no sentence of an evaluation set the project reports on may enter the data.

NeMo Curator's TaskDecontamination matches 13-gram overlaps between whole documents and benchmark texts; STS
sentences are 5–20 words, so here a dataset sentence is contaminated by an evaluation sentence when it holds most of
that sentence's word n-grams (containment ≥ `eval_containment`: the evaluation sentence copied inside a longer one
counts, one shared phrase does not), or — anchors — when the training backbone embeds the two within
`eval_cosine` (a paraphrase of a test sentence teaches the test set too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tasks.core.store import sha256_path
from tasks.core.sts_data import read_sts_source, stsb_version

TOKEN_PATTERN = r"(?u)\b\w+\b"  # every word, one-letter ones included ("a man is …")
MIN_EVAL_NGRAMS = 3  # an evaluation sentence needs this many n-grams (5 words at n = 3) for the overlap check
# The defaults of build-dataset's checks (DatasetSettings) and the mining corpus's filter (stage 4): one place.
DEFAULT_EVAL_SETS = ("stsb-dev", "stsb-test")
EVAL_NGRAM = 3
EVAL_CONTAINMENT = 0.8


@dataclass
class EvalSentences:
    """Distinct evaluation sentences, each with the id of its first occurrence (`<set>:<row>:<s1|s2>`)."""

    ids: list[str]
    texts: list[str]
    sources: list[dict]  # {"source", "sentences", "sha256" or "version"}


def sts_eval_frame(source: str) -> tuple[pd.DataFrame, str]:
    """(frame with s1, s2 columns, label) of an STS evaluation set: stsb-dev / stsb-test, a SemEval STS folder, a SICK
    file, an STS-B layout .tsv/.csv (build-dataset reads sentence lists too: tasks/dataset/eval_sets.py)."""
    return read_sts_source(source), source if source in ("stsb-dev", "stsb-test") else Path(source).name


def collect_eval_sentences(sources: list[str], read_frame: Callable[[str], tuple[pd.DataFrame, str]] = sts_eval_frame
                           ) -> EvalSentences:
    """Every evaluation set read by `read_frame` (a bad one fails here, before anything is written), sentences
    deduplicated."""
    ids: list[str] = []
    texts: list[str] = []
    described = []
    for source in sources:
        frame, label = read_frame(source)
        columns = [c for c in ("s1", "s2", "sentence") if c in frame.columns]
        stacked = pd.concat([pd.DataFrame({"text": frame[c].astype(str).str.strip(),
                                           "id": [f"{label}:{r}:{c}" for r in range(len(frame))]})
                             for c in columns], ignore_index=True)
        ids += stacked["id"].tolist()
        texts += stacked["text"].tolist()
        described.append({"source": source, "sentences": len(stacked),
                          **({"version": stsb_version()} if source.startswith("stsb-") else
                             {"sha256": sha256_path(Path(source))})})  # a file's or a folder's content
    distinct = pd.DataFrame({"id": ids, "text": texts}).drop_duplicates("text")
    distinct = distinct[distinct["text"] != ""]
    return EvalSentences(distinct["id"].tolist(), distinct["text"].tolist(), described)


def ngram_containment(texts: list[str], evals: EvalSentences, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per text: (index of the evaluation sentence with the largest share of its word n-grams found in the text,
    that share). Sparse products (scikit-learn's vectorizer) — no loop over sentences. Evaluation sentences shorter
    than n words have no n-gram and never match here (the embedding check covers them for anchors)."""
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(ngram_range=(n, n), token_pattern=TOKEN_PATTERN, lowercase=True, binary=True)
    try:
        grams_eval = vectorizer.fit_transform(evals.texts)
    except ValueError:  # no evaluation sentence has n words
        return np.zeros(len(texts), dtype=int), np.zeros(len(texts))
    grams_text = vectorizer.transform(texts)
    per_eval = np.asarray(grams_eval.sum(axis=1)).ravel()
    shared = (grams_text @ grams_eval.T).tocsr().astype(np.float64)
    # Share of each evaluation sentence's n-grams; one with fewer than MIN_EVAL_NGRAMS ("As soon as possible.") is a
    # phrase any text may hold, not a sentence to leak: left to the embedding check (read on the default corpus).
    weight = np.where(per_eval >= MIN_EVAL_NGRAMS, 1.0 / np.maximum(per_eval, 1), 0.0)
    shared = shared.multiply(weight).tocsr()
    best = np.asarray(shared.argmax(axis=1)).ravel()
    return best, shared.max(axis=1).toarray().ravel()


def cosine_matches(vectors: np.ndarray, eval_vectors: np.ndarray, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Per vector: (index of the most similar evaluation vector, cosine); unit vectors, by blocks."""
    best = np.zeros(len(vectors), dtype=int)
    score = np.full(len(vectors), -1.0)
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ eval_vectors.T
        best[start:start + block] = sims.argmax(axis=1)
        score[start:start + block] = sims.max(axis=1)
    return best, score


def normalized(texts: pd.Series) -> pd.Series:
    """Lower case, every run of non-alphanumerics one space: the text two copies share whatever their punctuation."""
    return texts.str.lower().str.replace(r"[\W_]+", " ", regex=True).str.strip()


def without_eval_sentences(texts: list[str], evals: EvalSentences, n: int = EVAL_NGRAM,
                           containment: float = EVAL_CONTAINMENT) -> tuple[list[str], int]:
    """`texts` less those that hold `containment` of an evaluation sentence's word n-grams or are one, in its words
    (case and punctuation aside: the n-gram check does not cover sentences under MIN_EVAL_NGRAMS n-grams), and how
    many went. For a corpus hard negatives are mined from: no evaluation sentence may train the model."""
    if not texts or not evals.texts:
        return texts, 0
    _, share = ngram_containment(texts, evals, n)
    exact = normalized(pd.Series(texts, dtype=object)).isin(set(normalized(pd.Series(evals.texts, dtype=object))))
    keep = (share < containment) & ~exact.to_numpy()
    return np.asarray(texts, dtype=object)[keep].tolist(), int((~keep).sum())
