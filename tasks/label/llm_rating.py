"""Stage 3 alternative labeler: the LLM asked for a 0–5 similarity rating of the pair (as in CLAIF, Cheng et al. 2023).

One chat request per pair through the OpenAI-compatible endpoint (the same client, response cache, limiter and
retries as stage 1), temperature 0, one answer token with its top log-probs. The rating is the probability-weighted
mean of the digits 0–5 among the first token's alternatives: a continuous score that orders pairs the sampled digit
alone ties (a 1.5B model answers almost only 2, 3 or 4). Endpoints that return no log-probs fall back to the answered
digit. An answer without a digit, or a failed call, is quarantined with its reason (`rating_unparsed`, `llm_error`).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from tasks.core.config import DEFAULT_SEED, LLMSettings, Settings
from tasks.llm.client import ALLOWED_ANSWERS, CallResult, LLMClient
from tasks.llm.prompting import load_template

RATING_PATTERN = "rating"
_DIGIT = re.compile(r"^\s*([0-5])(?:\.\d+)?\b")


class RatingSettings(Settings):
    """The LLM's 0–5 rating of a pair: its prompt and how the answer becomes a score."""

    prompt: Literal["plain", "guidelines"] = Field(
        "plain", description="'plain' asks for a number from 0 (unrelated) to 5 (same meaning); 'guidelines' gives "
        "the STS annotation scale (lower on STS-B dev).")
    top_logprobs: int = Field(20, ge=0, le=20, description="Alternatives of the answer token used for the expected "
                              "rating (0: the answered digit only); 20: every digit's probability.")
    seed: int = Field(DEFAULT_SEED, description="Seed of every rating request.")


@dataclass
class Rating:
    score: float | None  # 0–5, None when the answer holds no digit (see `error`)
    digit: int | None  # the answered digit
    from_logprobs: bool
    cached: bool
    error: str | None = None


def rating_messages(system: str, s1: str, s2: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Sentence 1: {s1}\nSentence 2: {s2}"}]


def expected_rating(top_logprobs: list[list] | None, text: str | None) -> tuple[float | None, int | None, bool]:
    """(score, answered digit, whether the score came from log-probs). The score is Σ d·p(d) / Σ p(d) over the digit
    tokens 0–5 among the answer token's alternatives; without them, the answered digit itself."""
    match = _DIGIT.match(text or "")
    digit = int(match.group(1)) if match else None
    weights: dict[int, float] = {}
    for token, logprob in top_logprobs or []:
        tok = str(token).strip()
        if len(tok) == 1 and tok in "012345" and logprob is not None and math.isfinite(logprob):
            weights[int(tok)] = weights.get(int(tok), 0.0) + math.exp(logprob)
    total = sum(weights.values())
    if total > 0:
        return sum(d * p for d, p in weights.items()) / total, digit, True
    return (None if digit is None else float(digit)), digit, False


def rating_params(settings: RatingSettings) -> dict:
    params = {"temperature": 0.0, "max_tokens": 2, "seed": settings.seed,
              ALLOWED_ANSWERS: [str(d) for d in range(6)]}  # a grammar where the endpoint takes one
    if settings.top_logprobs:
        params |= {"logprobs": True, "top_logprobs": settings.top_logprobs}
    return params


def _to_rating(result: CallResult) -> Rating:
    if not result.ok:
        return Rating(None, None, False, False, f"llm_error: {result.error}")
    score, digit, from_lp = expected_rating(result.top_logprobs, result.text)
    error = None if score is not None else f"rating_unparsed: answer {result.text!r} holds no digit 0-5"
    return Rating(score, digit, from_lp, result.cached, error)


def rate_pairs(pairs: list[tuple[str, str]], llm: LLMSettings, settings: RatingSettings,
               client: LLMClient | None = None, on_rated: Callable[[int], None] | None = None,
               report_every_s: float = 2.0) -> tuple[list[Rating], dict]:
    """Ratings for (s1, s2) pairs, in input order, and the client's stats. Cached answers cost nothing. `on_rated(n)`
    hears every `report_every_s` how many more pairs were rated."""
    template = load_template(RATING_PATTERN, settings.prompt)
    system = template.system_message([])
    client = client or LLMClient(llm)
    params = rating_params(settings)
    requests = [(rating_messages(system, a, b), params) for a, b in pairs]
    results = asyncio.run(_complete_reporting(client, requests, on_rated, report_every_s)) if requests else []
    return [_to_rating(r) for r in results], {"prompt": template.name, "prompt_sha256": template.sha256,
                                              "params": params, **client.stats.__dict__}


async def _complete_reporting(client: LLMClient, requests: list, on_rated: Callable[[int], None] | None,
                              every_s: float) -> list[CallResult]:
    """Every request at the client's full concurrency; `on_rated` runs in a worker thread (with this run's context):
    a progress artifact call made inside the event loop would block it."""
    finished = reported = 0

    def tick() -> None:
        nonlocal finished
        finished += 1

    async def tell() -> None:
        nonlocal reported
        if finished > reported:
            told, reported = finished - reported, finished  # snapshot first: ticks land while on_rated runs
            await asyncio.to_thread(on_rated, told)

    work = asyncio.ensure_future(client.complete_many(requests, on_result=tick if on_rated else None))
    if on_rated is not None:
        while not work.done():
            await asyncio.wait({work}, timeout=every_s)
            await tell()
        await tell()  # what finished while the last report ran
    return await work


@task(name="rate-pairs", cache_policy=NO_CACHE)
def rate_pairs_task(pairs: list[tuple[str, str]], llm: LLMSettings, settings: RatingSettings,
                    on_rated: Callable[[int], None] | None = None) -> tuple[list[Rating], dict]:
    """Prefect wrapper: the LLM's answers are cached by the response cache, so a re-run pays for none twice."""
    return rate_pairs(pairs, llm, settings, on_rated=on_rated)
