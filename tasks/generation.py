"""Stage 1 work: pattern simulation for a batch of source sentences, one prompt kind at a time.

Each *slot* (source sentence × kind) is tried up to `max_attempts` times: attempt k samples with its own seed and a
temperature raised by k*temperature_step. Every rejected attempt and every failed call is returned as a quarantine
row with its reason; a slot whose attempts all fail is quarantined, never filled with None.
Request seeds depend only on (run seed, sentence, kind, attempt), so results do not depend on batch order or
concurrency, and an interrupted run re-issues exactly the requests it had not finished (they hit the cache
otherwise). With `llm.batch_api` the same attempts run in rounds, one Batch API batch per round (tasks/llm/batch.py).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.config import LLMSettings, SamplingSettings, ValidationSettings, VerifierSettings
from tasks.llm.batch import BatchRunner
from tasks.llm.client import CallResult, LLMClient, merge_stats
from tasks.prompting import PromptTemplate
from tasks.validation import validate
from tasks.verification import JudgeTemplate, JudgeVerdict, judge_one, judge_rounds


# Reasons that mean a call failed (after the client's retries), not that a generation was judged: the slot ends there
# and a re-run of the stage retries it.
FAILED_CALL_REASONS = ("llm_error", "judge_llm_error")


@dataclass(frozen=True)
class Judge:
    """The verifier of one prompt kind: its question and settings (the endpoint is the caller's business)."""

    template: JudgeTemplate
    settings: VerifierSettings


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
    judge_p_pass: float | None = None  # the verifier's P(pass); None when the judge is off


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


def _judge(slot: Slot, attempt: int, seed: int, params: dict, result: CallResult, tokens: list,
           validation: ValidationSettings) -> tuple[Generation | None, dict | None]:
    """One attempt's verdict, shared by the direct and the batched loop: the accepted Generation, or its quarantine
    row. `tokens` ([prompt, completion, latency] of the slot so far) is updated in place."""
    if not result.ok:
        return None, _rejection(slot, attempt, seed, None, "llm_error", result.error or "")
    tokens[0] += result.prompt_tokens
    tokens[1] += result.completion_tokens
    tokens[2] += result.latency_s
    text = (result.text or "").strip()
    verdict = validate(text, kind=slot.kind, base=slot.base_text, anchor=slot.anchor, siblings=slot.siblings,
                       settings=validation)
    if verdict.ok:
        return Generation(
            slot.source_id, slot.kind, text, attempt + 1, seed, params["temperature"], params["top_p"],
            tokens[0], tokens[1], round(tokens[2], 4), result.cached, list(verdict.passed),
        ), None
    return None, _rejection(slot, attempt, seed, text, verdict.reason or "invalid", verdict.detail)


def _apply_verdict(slot: Slot, attempt: int, generation: Generation, verdict: JudgeVerdict
                   ) -> tuple[Generation | None, dict | None]:
    """A rule-passing generation after the judge: accepted with its P(pass), or quarantined with the judge's reason."""
    if verdict.reason is None:
        generation.judge_p_pass = verdict.p_pass
        return generation, None
    return None, _rejection(slot, attempt, generation.seed, generation.text, verdict.reason, verdict.detail)


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
    judge: Judge | None = None,
    judge_client: LLMClient | None = None,
) -> tuple[list[Generation], list[dict]]:
    """Generate one kind for a batch of slots. Returns (accepted generations, quarantine rows). With `judge`, each
    rule-passing generation is verified (through `judge_client`, default: `client`) before it counts."""

    async def one(call, judge_call, slot: Slot) -> tuple[Generation | None, list[dict]]:
        rejected = []
        messages = template.messages(system, slot.base_text)
        tokens = [0, 0, 0.0]
        for attempt in range(max_attempts):
            seed = request_seed(run_seed, slot.source_id, slot.kind, attempt)
            params = attempt_params(sampling, seed, attempt)
            generation, row = _judge(slot, attempt, seed, params, await call(messages, params), tokens, validation)
            if generation is not None and judge is not None:
                verdict = await judge_one(judge_call, judge.template, slot.anchor, generation.text, judge.settings)
                generation, row = _apply_verdict(slot, attempt, generation, verdict)
            if generation is not None:
                return generation, rejected
            rejected.append(row)
            if row["reason"] in FAILED_CALL_REASONS:
                # The client already retried transport errors; another attempt would hit the same failure.
                return None, rejected
        return None, rejected

    async with client.open() as call:
        if judge_client is None or judge_client is client:
            outcomes = await asyncio.gather(*(one(call, call, s) for s in slots))
        else:
            async with judge_client.open() as judge_call:
                outcomes = await asyncio.gather(*(one(call, judge_call, s) for s in slots))
    accepted = [g for g, _ in outcomes if g is not None]
    rejected = [row for _, rows in outcomes for row in rows]
    return accepted, rejected


def generate_slots_batched(
    slots: list[Slot],
    *,
    template: PromptTemplate,
    system: str,
    runner: BatchRunner,
    sampling: SamplingSettings,
    validation: ValidationSettings,
    max_attempts: int,
    run_seed: int,
    judge: Judge | None = None,
    judge_runner: BatchRunner | None = None,
) -> tuple[list[Generation], list[dict]]:
    """`generate_slots` in rounds for the Batch API: round a is one batch with attempt a of every slot still open
    (a batch takes minutes to hours, so slots cannot each wait for their own retry), then the judge's batches for
    that round's rule-passing generations. Same requests, seeds, verdicts and rows as the direct loop."""
    messages = [template.messages(system, slot.base_text) for slot in slots]
    tokens = [[0, 0, 0.0] for _ in slots]
    accepted: list[Generation | None] = [None] * len(slots)
    rejected: list[list[dict]] = [[] for _ in slots]
    open_slots = list(range(len(slots)))
    for attempt in range(max_attempts):
        if not open_slots:
            break
        seeds = {i: request_seed(run_seed, slots[i].source_id, slots[i].kind, attempt) for i in open_slots}
        params = {i: attempt_params(sampling, seeds[i], attempt) for i in open_slots}
        results = runner.run([(messages[i], params[i]) for i in open_slots])
        outcomes = {i: _judge(slots[i], attempt, seeds[i], params[i], result, tokens[i], validation)
                    for i, result in zip(open_slots, results)}
        if judge is not None:
            passing = [i for i in open_slots if outcomes[i][0] is not None]
            verdicts = judge_rounds(judge_runner or runner, [(judge.template, slots[i].anchor, outcomes[i][0].text)
                                                             for i in passing], judge.settings)
            for i, verdict in zip(passing, verdicts):
                outcomes[i] = _apply_verdict(slots[i], attempt, outcomes[i][0], verdict)
        still_open = []
        for i in open_slots:
            accepted[i], row = outcomes[i]
            if row is not None:
                rejected[i].append(row)
                if row["reason"] not in FAILED_CALL_REASONS:  # a failed call ends the slot
                    still_open.append(i)
        open_slots = still_open
    return [g for g in accepted if g is not None], [row for rows in rejected for row in rows]


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
    judge: Judge | None = None,
) -> tuple[list[dict], list[dict], dict]:
    """One batch of one prompt kind (the few-shot prefix stays in the server's prompt cache); with `llm.batch_api`,
    its attempt rounds go through the Batch API (a Prefect retry re-attaches to the stored batch). With `judge`, the
    verifier's calls go to `judge.settings.llm` (default: the generator's endpoint) and count in the stats.

    No Prefect result cache: the LLM response cache already makes a retried or re-run batch free."""
    client = LLMClient(llm)
    judge_client = LLMClient(judge.settings.llm) if judge is not None and judge.settings.llm else client
    if llm.batch_api:
        runner = BatchRunner(client)
        judge_runner = BatchRunner(judge_client) if judge_client is not client else runner
        accepted, rejected = generate_slots_batched(
            slots, template=template, system=system, runner=runner, sampling=sampling, validation=validation,
            max_attempts=max_attempts, run_seed=run_seed, judge=judge, judge_runner=judge_runner)
        stats = {**asdict(client.stats), **asdict(runner.stats)}
    else:
        accepted, rejected = asyncio.run(
            generate_slots(slots, template=template, system=system, client=client, sampling=sampling,
                           validation=validation, max_attempts=max_attempts, run_seed=run_seed, judge=judge,
                           judge_client=judge_client))
        stats = asdict(client.stats)
    if judge_client is not client:
        stats = merge_stats(stats, asdict(judge_client.stats))
    return [asdict(g) for g in accepted], rejected, stats
