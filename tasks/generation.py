"""Stage 1 work: pattern simulation for a batch of source sentences, one prompt kind at a time.

Each *slot* (source sentence × kind) is tried up to `max_attempts` times: attempt k samples with its own seed and a
temperature raised by k*temperature_step. Every rejected attempt and every failed call is returned as a quarantine
row with its reason; a slot whose attempts all fail is quarantined, never filled with None.
Request seeds depend only on (run seed, sentence, kind, attempt), so results do not depend on batch order or
concurrency, and an interrupted run re-issues exactly the requests it had not finished (they hit the cache
otherwise).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.config import LLMSettings, SamplingSettings, ValidationSettings
from tasks.llm.client import LLMClient
from tasks.prompting import PromptTemplate
from tasks.validation import validate


@dataclass(frozen=True)
class Slot:
    source_id: str
    kind: str
    anchor: str
    base_text: str
    siblings: tuple[str, ...]  # accepted generations of earlier kinds for this source (duplicate check)


@dataclass
class Generation:
    source_id: str
    kind: str
    text: str
    attempts: int
    seed: int
    temperature: float
    top_p: float
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    rules_passed: list[str]


def request_seed(run_seed: int, source_id: str, kind: str, attempt: int) -> int:
    digest = hashlib.sha256(f"{run_seed}:{source_id}:{kind}:{attempt}".encode()).hexdigest()
    return int(digest[:8], 16)  # 32-bit: accepted by llama.cpp and OpenAI alike


def attempt_params(sampling: SamplingSettings, seed: int, attempt: int) -> dict:
    return {
        "temperature": round(min(2.0, sampling.temperature + attempt * sampling.temperature_step), 4),
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "seed": seed,
    }


def _rejection(slot: Slot, attempt: int, seed: int, text: str | None, reason: str, detail: str) -> dict:
    return {
        "stage": "generation", "source_id": slot.source_id, "kind": slot.kind, "attempt": attempt, "seed": seed,
        "anchor": slot.anchor, "base_text": slot.base_text, "text": text, "reason": reason, "detail": detail,
    }


async def generate_slots(
    slots: list[Slot],
    *,
    template: PromptTemplate,
    system: str,
    client: LLMClient,
    sampling: SamplingSettings,
    validation: ValidationSettings,
    max_attempts: int,
    run_seed: int,
) -> tuple[list[Generation], list[dict]]:
    """Generate one kind for a batch of slots. Returns (accepted generations, quarantine rows)."""

    async def one(call, slot: Slot) -> tuple[Generation | None, list[dict]]:
        rejected = []
        messages = template.messages(system, slot.base_text)
        tokens = [0, 0, 0.0]
        for attempt in range(max_attempts):
            seed = request_seed(run_seed, slot.source_id, slot.kind, attempt)
            params = attempt_params(sampling, seed, attempt)
            result = await call(messages, params)
            if not result.ok:
                # The client already retried transport errors; another attempt would hit the same failure.
                rejected.append(_rejection(slot, attempt, seed, None, "llm_error", result.error or ""))
                return None, rejected
            tokens = [tokens[0] + result.prompt_tokens, tokens[1] + result.completion_tokens,
                      tokens[2] + result.latency_s]
            text = (result.text or "").strip()
            verdict = validate(text, kind=slot.kind, base=slot.base_text, anchor=slot.anchor,
                               siblings=slot.siblings, settings=validation)
            if verdict.ok:
                return Generation(
                    slot.source_id, slot.kind, text, attempt + 1, seed, params["temperature"], params["top_p"],
                    tokens[0], tokens[1], round(tokens[2], 4), result.cached, list(verdict.passed),
                ), rejected
            rejected.append(_rejection(slot, attempt, seed, text, verdict.reason or "invalid", verdict.detail))
        return None, rejected

    async with client.open() as call:
        outcomes = await asyncio.gather(*(one(call, s) for s in slots))
    accepted = [g for g, _ in outcomes if g is not None]
    rejected = [row for _, rows in outcomes for row in rows]
    return accepted, rejected


@task(name="generate-batch", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10)
def generate_batch(
    slots: list[Slot],
    template: PromptTemplate,
    system: str,
    llm: LLMSettings,
    sampling: SamplingSettings,
    validation: ValidationSettings,
    max_attempts: int,
    run_seed: int,
) -> tuple[list[dict], list[dict], dict]:
    """One batch of one prompt kind (the few-shot prefix stays in the server's prompt cache).

    No Prefect result cache: the LLM response cache already makes a retried or re-run batch free."""
    client = LLMClient(llm)
    accepted, rejected = asyncio.run(
        generate_slots(slots, template=template, system=system, client=client, sampling=sampling,
                       validation=validation, max_attempts=max_attempts, run_seed=run_seed)
    )
    return [asdict(g) for g in accepted], rejected, asdict(client.stats)
