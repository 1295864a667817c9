"""Stage 1's Prefect tasks: a batch of slots of one kind (`generate_batch`; with `batch_api`, its attempt rounds
through the Batch API) or a batch of sources with their kinds chained (`generate_source_batch`), each on the
endpoint's clients (the judge's own endpoint counted in the stats). The work itself is tasks/generate/generation.py's.
No Prefect result cache: the LLM response cache already makes a retried or re-run batch free.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.core.config import LLMSettings
from tasks.generate.generation import (
    Plan,
    Slot,
    Source,
    Ticker,
    generate_chains,
    generate_slots,
    generate_slots_batched,
    no_tick,
)
from tasks.llm.batch import BatchRunner
from tasks.llm.client import LLMClient, merge_stats


def with_judge_stats(stats: dict, client: LLMClient, judge_client: LLMClient) -> dict:
    """A batch's LLM stats, the judge's own endpoint's counted in."""
    return stats if judge_client is client else merge_stats(stats, asdict(judge_client.stats))


@task(name="generate-batch", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10)
def generate_batch(slots: list[Slot], kind: str, plan: Plan, llm: LLMSettings, on_done: Ticker = no_tick
                   ) -> tuple[list[dict], list[dict], dict]:
    """One batch of one prompt kind (the few-shot prefix stays in the server's prompt cache); with `batch_api`,
    its attempt rounds go through the Batch API (a Prefect retry re-attaches to the stored batch). With `judge`, the
    verifier's calls go to `judge.settings.llm` (default: the generator's endpoint) and count in the stats.

    No Prefect result cache: the LLM response cache already makes a retried or re-run batch free."""
    judge_llm = plan.settings.verifier.llm if plan.verified_by_judge_endpoint(kind) else None
    client = LLMClient(llm)
    judge_client = LLMClient(judge_llm) if judge_llm else client
    if plan.settings.batch_api:
        poll_s = plan.settings.batch_poll_s
        runner = BatchRunner(client, poll_s=poll_s)
        judge_runner = BatchRunner(judge_client, poll_s=poll_s) if judge_client is not client else runner
        accepted, rejected = generate_slots_batched(slots, kind, plan, runner, judge_runner)
        on_done(len(slots))  # a Batch API round ends all its slots at once
        stats = {**asdict(client.stats), **asdict(runner.stats)}
    else:
        accepted, rejected = asyncio.run(generate_slots(slots, plan, client, judge_client, on_done))
        stats = asdict(client.stats)
    return [asdict(g) for g in accepted], rejected, with_judge_stats(stats, client, judge_client)


@task(name="generate-source-batch", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10)
def generate_source_batch(sources: list[Source], kinds: tuple[str, ...], plan: Plan, llm: LLMSettings,
                          on_done: Ticker = no_tick) -> tuple[list[dict], list[dict], dict]:
    """Every kind of a batch of sources, each source's kinds chained (`generate_chains`: a thin task around the
    async function, with the endpoint's clients). Like `generate_batch`: no Prefect result cache (the LLM response cache
    makes a retried batch free); the judge's calls count in the stats."""
    judge_llm = plan.settings.verifier.llm if any(plan.verified_by_judge_endpoint(k) for k in kinds) else None
    client = LLMClient(llm)
    judge_client = LLMClient(judge_llm) if judge_llm else client
    accepted, rejected = asyncio.run(generate_chains(sources, kinds, plan, client, judge_client, on_done))
    return [asdict(g) for g in accepted], rejected, with_judge_stats(asdict(client.stats), client, judge_client)
