"""What a run of `n` source sentences will cost, before it starts: requests, tokens, money and time per stage,
scaled from the manifests of earlier runs (no LLM call, nothing loaded). distilabel's users ask for this
(argilla-io/distilabel#462); an estimate from a model's *measured* rates on this machine is worth more than one
from a price list, since the requests per triple depend on the generator's rejection rate.

Rates are per source sentence (stage 1's `n`): a stage's LLM answers, tokens (sent and from the cache: what the
data cost to make) and wall seconds, summed over the earlier runs of the same model and divided by their sources.
Seconds come only from runs that sent most of their requests (a run served from the response cache is no
measure of time)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

LLM_STAGES = {"generate-sts-triples": "llm_stats", "label-pairs": "rating"}  # where each keeps its client stats
STAGES = ("generate-sts-triples", "retrieve-contexts", "label-pairs", "train-surrogate")
MOSTLY_SENT = 0.5  # a run whose answers were at least this share fresh times its stages


@dataclass(frozen=True)
class StageRate:
    """One stage's measured cost per source sentence."""

    stage: str
    runs: int
    sources: int
    answers: float  # LLM answers used (sent + cached)
    prompt_tokens: float
    completion_tokens: float
    seconds: float | None  # None: no run of it sent most of its requests


def _stats(manifest: dict, stage: str) -> dict:
    return manifest.get(LLM_STAGES[stage]) or {} if stage in LLM_STAGES else {}


def _answers(stats: dict) -> int:
    return int(stats.get("requests_sent", 0)) + int(stats.get("cache_hits", 0))


def run_manifests(output_dirs: list[Path]) -> list[dict[str, dict]]:
    """{stage: manifest} of every run folder under `output_dirs` (and each folder itself) with a stage-1 manifest."""
    runs = []
    for root in output_dirs:
        for folder in [root, *sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())] \
                if root.is_dir() else []:
            manifests = {s: json.loads((folder / s / "manifest.json").read_text()) for s in STAGES
                         if (folder / s / "manifest.json").is_file()}
            if "generate-sts-triples" in manifests:
                runs.append(manifests)
    return runs


def measured_rates(runs: list[dict[str, dict]], model: str) -> list[StageRate]:
    """Per stage, the cost per source sentence over the runs whose generator was `model`."""
    runs = [r for r in runs if r["generate-sts-triples"].get("llm", {}).get("model") == model]
    rates = []
    for stage in STAGES:
        sources = answers = prompt = completion = 0
        timed_sources, timed_s, count = 0, 0.0, 0
        for run in runs:
            if stage not in run:
                continue
            n = int(run["generate-sts-triples"].get("counts", {}).get("sources", 0))
            stats = _stats(run[stage], stage)
            cost = run[stage].get("cost") or {}
            count, sources = count + 1, sources + n
            answers += _answers(stats)
            prompt += int(cost.get("prompt_tokens", 0))
            completion += int(cost.get("completion_tokens", 0))
            fresh = _stats(run["generate-sts-triples"], "generate-sts-triples")
            if n and int(fresh.get("requests_sent", 0)) >= MOSTLY_SENT * max(_answers(fresh), 1):
                timed_sources += n
                timed_s += float(run[stage].get("timings", {}).get("total_s", 0.0))
        if sources:
            rates.append(StageRate(stage, count, sources, answers / sources, prompt / sources, completion / sources,
                                   timed_s / timed_sources if timed_sources else None))
    return rates


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{max(minutes, 1)} min"


def estimate_markdown(rates: list[StageRate], n: int, model: str,
                      prices: tuple[float | None, float | None] = (None, None)) -> str:
    """The estimate for `n` source sentences as a Markdown table, one row per measured stage and a total."""
    priced = prices != (None, None)
    header = "| stage | measured on | LLM requests | prompt tokens | completion tokens |" + \
        (" money |" if priced else "") + " time here |"
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    total = [0.0, 0.0, 0.0, 0.0, 0.0]
    untimed = False
    for r in rates:
        requests, prompt, completion = r.answers * n, r.prompt_tokens * n, r.completion_tokens * n
        money = (prompt * (prices[0] or 0.0) + completion * (prices[1] or 0.0)) / 1e6
        seconds = r.seconds * n if r.seconds is not None else None
        untimed |= seconds is None
        for i, v in enumerate((requests, prompt, completion, money, seconds or 0.0)):
            total[i] += v
        rows.append(f"| {r.stage} | {r.runs} run(s), {r.sources} sources | {requests:,.0f} | {prompt:,.0f} | "
                    f"{completion:,.0f} |" + (f" {money:,.2f} |" if priced else "") +
                    f" {_duration(seconds) if seconds is not None else 'not measured'} |")
    rows.append(f"| **total** | | {total[0]:,.0f} | {total[1]:,.0f} | {total[2]:,.0f} |" +
                (f" {total[3]:,.2f} |" if priced else "") + f" {_duration(total[4])}{'+' if untimed else ''} |")
    note = (f"Estimate for n = {n:,} source sentences with {model}, scaled from earlier runs' manifests (LLM answers "
            "and tokens include cached ones; time is wall time on the machine those runs ran on).")
    if not priced:
        note += " No prices given: pass --price-prompt / --price-completion (per million tokens) for money."
    return note + "\n\n" + "\n".join(rows)
