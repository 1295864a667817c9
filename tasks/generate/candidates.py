"""Best of N: which of a slot's rule-passing candidates (the `n` choices of one request) is kept.

- positive: fewest fact errors (anchor facts dropped + facts added, tasks/generate/facts.py), then the highest
  encoder cosine to the anchor — the candidate that drifted least (near-copies are already out by the rules);
- intermediate: fewest facts added (dropping is its job), then the highest cosine to the anchor;
- negative: with `negative_choice` 'farthest' (the STS pattern, whose low-score pairs are about different things)
  the lowest cosine to the anchor; 'first' keeps the first (the NLI pattern, whose contradictions stay on topic).

Pure: `encode(list[str]) → (N, D)` unit-norm embeddings is passed in (the stage gives all-MiniLM-L6-v2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from tasks.generate.facts import check_facts

NegativeChoice = Literal["farthest", "first"]
NEGATIVE_CHOICE: dict[str, NegativeChoice] = {"sts": "farthest", "nli": "first"}


def rank(kind: str, anchor: str, candidates: list[str], encode: Callable[[list[str]], np.ndarray],
         negative_choice: NegativeChoice = "farthest") -> tuple[list[int], list[float]]:
    """(candidate indices, best first; each candidate's cosine to the anchor). `candidates` must not be empty."""
    if not candidates:
        raise ValueError("rank() needs at least one candidate")
    vectors = np.asarray(encode([anchor, *candidates]), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = [round(float(c), 4) for c in vectors[1:] @ vectors[0]]
    if kind == "negative":
        key = (lambda i: (cosines[i], i)) if negative_choice == "farthest" else (lambda i: i)
    else:
        checks = [check_facts(anchor, c) for c in candidates]
        errors = [c.errors if kind == "positive" else len(c.added) for c in checks]
        key = lambda i: (errors[i], -cosines[i], i)  # noqa: E731 — fewest fact errors, then most similar
    return sorted(range(len(candidates)), key=key), cosines


def choose(kind: str, anchor: str, candidates: list[str], encode: Callable[[list[str]], np.ndarray],
           negative_choice: NegativeChoice = "farthest") -> tuple[str, int, list[float]]:
    """(the kept candidate, its index, each candidate's cosine to the anchor)."""
    order, cosines = rank(kind, anchor, candidates, encode, negative_choice)
    return candidates[order[0]], order[0], cosines


@functools.lru_cache(maxsize=2)
def _encoder(name: str):
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    return SentenceTransformer(str(encoder_folder(name)))  # CUDA when present


@dataclass(frozen=True)
class Chooser:
    """The best-of-N rule of a run: the pattern's negative choice and the encoder (loaded once per process, only
    when a slot has two or more candidates to rank)."""

    negative_choice: NegativeChoice = "farthest"
    encoder: str = "all-minilm-l6-v2"

    def rank(self, kind: str, anchor: str, candidates: list[str]) -> tuple[list[int], list[float | None]]:
        if len(candidates) < 2:
            return list(range(len(candidates))), [None] * len(candidates)
        model = _encoder(self.encoder)
        return rank(kind, anchor, candidates,
                    lambda texts: model.encode(texts, batch_size=32, convert_to_numpy=True), self.negative_choice)
