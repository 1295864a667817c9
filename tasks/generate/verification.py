"""Stage 1 verifier: an LLM judge asked one yes/no question per generated sentence, after the rule checks.

- positive: is everything the anchor says also said by it (passes on yes; v1 asked "is it a paraphrase?", which
  the 1.5B judge answered yes to almost every dropped detail)?
- intermediate: is everything it says also said by the anchor (passes on yes)?
- negative: do anchor and sentence mean the same thing (passes on no: a paraphrase is not a negative)?

The question is a versioned template (prompts/templates/judge-<kind>.v<N>.j2, or `<template_dir>/judge-<kind>.j2`) with
the placeholders {{ anchor }} and {{ candidate }}, and a `{# passes: yes|no #}` comment naming the answer that passes
(default yes): a small judge answers "same meaning?" far better than "different meaning?", so the negative's question
is asked that way round (docs/results.md, verifier). The judge answers at temperature 0 with one token; its
verdict is P(pass), the passing answer's share of the yes / no mass among the answer token's top log-probs, so a
threshold can trade precision for recall; an endpoint without log-probs gives 0 or 1 from the answer text. An answer
that is neither yes nor no is asked again (new seed, some temperature) up to `attempts` times, then quarantined as
`judge_unparsed`; a failing verdict as `judge_rejected`; a failed call as `judge_llm_error`. Each rejection is retried like any rejected
generation (tasks/generate/generation.py). Answers go through the response cache like every LLM call.

The judge is asked against the anchor, not the sentence the generation was derived from: the triple trains
(anchor, s⁺, sᵐ, s⁻), so that is the relation that must hold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jinja2
import numpy as np
from jinja2 import meta

from models.embedding_metrics import cosine_scores
from tasks.core.config import ConfigError
from tasks.generate.settings import VerifierSettings
from tasks.llm.client import ALLOWED_ANSWERS, CallResult

JUDGE_VERSION = "v1"
# Kinds whose built-in question is newer: the positive's v2 asks whether everything the anchor says is also said by
# the positive (recall of bad positives 0.03 → 0.66 on 70 labeled ones; docs/results.md, issue 24).
JUDGE_VERSIONS = {"positive": "v2"}
PLACEHOLDERS = ("anchor", "candidate")
# The verifier's quarantine reasons (verifier_rejected: the combined verifier, tasks/generate/combined_verifier.py).
REASONS = ("judge_rejected", "judge_unparsed", "judge_llm_error", "verifier_rejected")
_YES, _NO = re.compile(r"^\W*yes\b", re.IGNORECASE), re.compile(r"^\W*no\b", re.IGNORECASE)
_PASSES = re.compile(r"\{#\s*passes:\s*(yes|no)\b", re.IGNORECASE)
_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


@dataclass(frozen=True)
class JudgeTemplate:
    kind: str
    name: str  # e.g. judge-negative.v1 (built in) or the custom file's path
    source: str

    @property
    def passes(self) -> str:
        """The answer that passes the generation: the template's `{# passes: … #}`, else yes."""
        found = _PASSES.search(self.source)
        return found.group(1).lower() if found else "yes"

    @property
    def sha256(self) -> str:
        import hashlib

        return hashlib.sha256(self.source.encode()).hexdigest()

    def messages(self, anchor: str, candidate: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": _env.from_string(self.source).render(anchor=anchor,
                                                                                 candidate=candidate).strip()}]


@dataclass(frozen=True)
class JudgeVerdict:
    p_pass: float | None  # P(the passing answer); None: no usable answer (see reason)
    answer: str | None
    reason: str | None  # None (accepted), judge_rejected, judge_unparsed, judge_llm_error
    detail: str
    calls: int


def load_judge_template(kind: str, template_dir: str | None = None) -> JudgeTemplate:
    """The judge question for `kind`; a custom one must use both placeholders (else the judge would not see the
    sentences it is asked about)."""
    if template_dir:
        path = Path(template_dir) / f"judge-{kind}.j2"
        if not path.is_file():
            raise ConfigError(f"verifier.template_dir: {path} does not exist; put judge-positive.j2, "
                              "judge-intermediate.j2 and judge-negative.j2 there (see prompts/templates/judge-*.v1.j2).")
        source, name = path.read_text(encoding="utf-8"), str(path)
    else:
        name = f"judge-{kind}.{JUDGE_VERSIONS.get(kind, JUDGE_VERSION)}"
        source = resources.files("prompts").joinpath("templates", f"{name}.j2").read_text(encoding="utf-8")
    try:
        used = meta.find_undeclared_variables(_env.parse(source))
    except jinja2.TemplateSyntaxError as err:
        raise ConfigError(f"Judge template {name}: line {err.lineno}: {err.message}") from None
    missing = [p for p in PLACEHOLDERS if p not in used]
    if missing:
        raise ConfigError(f"Judge template {name} lacks the placeholder(s) "
                          + ", ".join("{{ " + p + " }}" for p in missing)
                          + ": the judge must see both the anchor and the generated sentence.")
    return JudgeTemplate(kind, name, source)


def judge_params(settings: VerifierSettings, attempt: int, seed: int) -> dict:
    # Attempt 0 is greedy; a re-ask after a garbled answer samples (else the cache would return the same answer).
    params = {"temperature": 0.0 if attempt == 0 else 0.7, "max_tokens": 3, "seed": seed + attempt,
              ALLOWED_ANSWERS: ["yes", "no"]}  # a grammar where the endpoint takes one (tasks.llm.client)
    if settings.top_logprobs:
        params |= {"logprobs": True, "top_logprobs": settings.top_logprobs}
    return params


def p_yes(top_logprobs: list | None, text: str | None) -> tuple[float | None, str | None]:
    """(P(yes) among the yes/no alternatives of the answer token, the answer's yes/no); the answer alone when the
    alternatives hold neither."""
    answer = "yes" if _YES.match(text or "") else "no" if _NO.match(text or "") else None
    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in top_logprobs or []:
        word = str(token).strip().lower()
        if word in mass and logprob is not None and math.isfinite(logprob):
            mass[word] += math.exp(logprob)
    if mass["yes"] + mass["no"] > 0:
        return mass["yes"] / (mass["yes"] + mass["no"]), answer
    return (None if answer is None else float(answer == "yes")), answer


def verdict_of(results: list[CallResult], settings: VerifierSettings, passes: str = "yes",
               kind: str = "") -> JudgeVerdict | None:
    """The verdict after the calls made so far, or None when the last answer was garbled and attempts remain."""
    last = results[-1]
    if not last.ok:
        return JudgeVerdict(None, None, "judge_llm_error", last.error or "", len(results))
    prob, answer = p_yes(last.top_logprobs, last.text)
    if prob is None:
        if len(results) < settings.attempts:
            return None
        return JudgeVerdict(None, (last.text or "")[:80], "judge_unparsed",
                            f"{len(results)} answers without yes/no, last {last.text!r}", len(results))
    prob = prob if passes == "yes" else 1.0 - prob
    ok = prob >= settings.threshold_for(kind)
    return JudgeVerdict(prob, answer, None if ok else "judge_rejected",
                        f"answered {answer}, P(pass) = {prob:.3f}", len(results))


async def judge_one(call, template: JudgeTemplate, anchor: str, candidate: str,
                    settings: VerifierSettings, seed: int) -> JudgeVerdict:
    """Ask until a yes/no answer (or `attempts` calls); `call` is an LLMClient.open() caller."""
    messages, results = template.messages(anchor, candidate), []
    while True:
        results.append(await call(messages, judge_params(settings, len(results), seed)))
        verdict = verdict_of(results, settings, template.passes, template.kind)
        if verdict is not None:
            return verdict


def judge_rounds(runner, items: list[tuple[JudgeTemplate, str, str]], settings: VerifierSettings, seed: int
                 ) -> list[JudgeVerdict]:
    """`judge_one` for the Batch API: round a asks every item still garbled after a rounds (one batch per round)."""
    results: list[list[CallResult]] = [[] for _ in items]
    verdicts: list[JudgeVerdict | None] = [None] * len(items)
    open_items = list(range(len(items)))
    while open_items:
        answers = runner.run([(items[i][0].messages(items[i][1], items[i][2]),
                               judge_params(settings, len(results[i]), seed)) for i in open_items])
        still = []
        for i, result in zip(open_items, answers):
            results[i].append(result)
            verdicts[i] = verdict_of(results[i], settings, items[i][0].passes, items[i][0].kind)
            if verdicts[i] is None:
                still.append(i)
        open_items = still
    return [v for v in verdicts if v is not None]


def ordering_gaps(anchors: list[str], positives: list[str], negatives: list[str], encode) -> np.ndarray:
    """cos(a, s⁺) − cos(a, s⁻) per triple, with `encode(list[str]) → (N, D)` embeddings: the ordering check that
    needs no LLM (a negative that paraphrases the anchor sits as close as the positive, gap ≈ 0 or below)."""
    n = len(anchors)
    e = np.asarray(encode([*anchors, *positives, *negatives]))
    a, p, neg = e[:n], e[n : 2 * n], e[2 * n :]
    return cosine_scores(a, p) - cosine_scores(a, neg)
