"""Best of N: which of a slot's rule-passing candidates (the `n` choices of one request) is kept.

- positive: fewest fact errors (anchor facts dropped + facts added, tasks/generate/facts.py), then the highest
  encoder cosine to the anchor — the candidate that drifted least (near-copies are already out by the rules);
- intermediate: fewest facts added (dropping is its job), then (`intermediate_choice` 'fewest_added', the default)
  fewest content words the anchor lacks (tasks/generate/validation.added_words: a candidate that only leaves details
  out before one that rewrites), then the cosine nearest the pattern's (the mean encoder cosine of the pattern
  source's pairs in that band: STS12 train pairs scored 1–4), or without a target the highest cosine to the anchor;
- negative: with `negative_choice` 'farthest' (the STS pattern, whose low-score pairs are about different things)
  the cosine nearest the pattern's (pairs scored below 1), or without a target the lowest; 'first' keeps the first
  (the NLI pattern, whose contradictions stay on topic).
Choosing by the pattern's cosine is what makes a kind "follow its pattern" (issue 24): the highest cosine made
intermediates closer to their anchor than STS-B's 1–4 pairs are (docs/results.md). For intermediates the cosine
alone prefers the candidate that changed most — a rewrite, which readers judged the commonest bad intermediate — so
the added words come first (issue 34; 'pattern_cosine' is the rule before it).

Pure: `encode(list[str]) → (N, D)` unit-norm embeddings is passed in (the stage gives all-MiniLM-L6-v2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from tasks.core.defaults import DEFAULT_ENCODER
from tasks.generate.facts import check_facts
from tasks.generate.settings import IntermediateChoice
from tasks.generate.validation import added_words
from tasks.llm.local_models import load_encoder

NegativeChoice = Literal["farthest", "first"]
CHOICE_VERSION = 2  # in stage 1's cache key: a change of the choice rule changes the outputs (2: pattern targets)
NEGATIVE_CHOICE: dict[str, NegativeChoice] = {"sts": "farthest", "nli": "first"}


def rank(kind: str, anchor: str, candidates: list[str], encode: Callable[[list[str]], np.ndarray],
         negative_choice: NegativeChoice = "farthest", target: float | None = None,
         intermediate_choice: IntermediateChoice = "fewest_added") -> tuple[list[int], list[float]]:
    """(candidate indices, best first; each candidate's cosine to the anchor). `target`: the pattern's cosine for
    this kind (intermediate, STS negative), None: the extreme. `candidates` must not be empty."""
    if not candidates:
        raise ValueError("rank() needs at least one candidate")
    vectors = np.asarray(encode([anchor, *candidates]), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = [round(float(c), 4) for c in vectors[1:] @ vectors[0]]
    closeness = (lambda i: abs(cosines[i] - target)) if target is not None else None
    if kind == "negative":
        if negative_choice == "first":
            key = lambda i: i  # noqa: E731
        else:
            key = (lambda i: (closeness(i), i)) if closeness else (lambda i: (cosines[i], i))
    else:
        checks = [check_facts(anchor, c) for c in candidates]
        errors = [c.errors if kind == "positive" else len(c.added) for c in checks]
        if kind == "intermediate" and intermediate_choice == "fewest_added":
            added = [len(added_words(c, anchor)) for c in candidates]
            errors = [(e, a) for e, a in zip(errors, added)]  # tuples compare in order: facts first, then words
        if kind == "intermediate" and closeness:
            key = lambda i: (errors[i], closeness(i), i)  # noqa: E731
        else:
            key = lambda i: (errors[i], -cosines[i], i)  # noqa: E731 — fewest fact errors, then most similar
    return sorted(range(len(candidates)), key=key), cosines


@dataclass(frozen=True)
class Chooser:
    """The best-of-N rule of a run: the pattern's negative choice and the encoder (loaded once per process, only
    when a slot has two or more candidates to rank)."""

    negative_choice: NegativeChoice = "farthest"
    encoder: str = DEFAULT_ENCODER
    targets: tuple[tuple[str, float], ...] = ()  # (kind, the pattern's mean cosine): see `pattern_targets`
    negative_max_cosine: float | None = None  # the negative band's ceiling (STS pattern): `too_close`
    intermediate_choice: IntermediateChoice = "fewest_added"

    def rank(self, kind: str, anchor: str, candidates: list[str]) -> tuple[list[int], list[float | None]]:
        ceiling = kind == "negative" and self.negative_max_cosine is not None
        if len(candidates) < 2 and not (ceiling and candidates):  # a lone negative is still measured for the band
            return list(range(len(candidates))), [None] * len(candidates)
        model = load_encoder(self.encoder)
        return rank(kind, anchor, candidates,
                    lambda texts: model.encode(texts, batch_size=32, convert_to_numpy=True), self.negative_choice,
                    dict(self.targets).get(kind), self.intermediate_choice)


    def too_close(self, kind: str, cosine: float | None) -> str | None:
        """The negative_too_close detail for a negative at or above the band's ceiling, else None."""
        if kind != "negative" or self.negative_max_cosine is None or cosine is None or cosine < self.negative_max_cosine:
            return None
        return f"cosine to the anchor {cosine:.2f} ≥ {self.negative_max_cosine}: too close for a negative"


def pattern_targets(pairs_by_kind: dict[str, list[tuple[str, str]]], encoder: str = DEFAULT_ENCODER
                    ) -> tuple[tuple[str, float], ...]:
    """(kind, mean encoder cosine of the pattern source's pairs in that kind's band) for the kinds given: what the
    best-of-N choice aims at."""
    model = load_encoder(encoder)
    out = []
    for kind, pairs in pairs_by_kind.items():
        if not pairs:
            continue
        first = model.encode([a for a, _ in pairs], batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        second = model.encode([b for _, b in pairs], batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        out.append((kind, round(float(np.mean(np.sum(first * second, axis=1))), 4)))
    return tuple(out)
