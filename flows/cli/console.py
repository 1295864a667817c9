"""What the commands show: a progress bar fed by the stages' progress listeners, the outputs and quality tables
printed when a run ends, and running a job against an LLM endpoint or the embedded local server."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path


class PlainProgress:
    """Progress as plain lines, for a console that is no terminal (cron, CI, `| tee`): rich draws no bar there, and a
    run would print nothing for the minutes of stage 1. One line per stage at its start, then at most one every
    `every_s` seconds, and one at its end."""

    def __init__(self, console, every_s: float = 30.0):
        self.console, self.every_s = console, every_s
        self._last: dict[str, float] = {}
        self._ended: set[str] = set()
        self._lock = threading.Lock()

    def listener(self, stage: str, done: int, total: int) -> None:
        import time

        now = time.monotonic()
        with self._lock:
            if stage in self._ended or (done < total and stage in self._last
                                        and now - self._last[stage] < self.every_s):
                return
            self._last[stage] = now
            if done >= total:
                self._ended.add(stage)
        self.console.print(f"{stage}: {done}/{total} ({100 * done // max(total, 1)} %)", highlight=False)

    def __enter__(self) -> "PlainProgress":
        from tasks.core.artifacts import add_progress_listener

        add_progress_listener(self.listener)
        return self

    def __exit__(self, *exc) -> None:
        from tasks.core.artifacts import remove_progress_listener

        remove_progress_listener(self.listener)


def progress_bar(console, every_s: float = 30.0):
    """A rich progress bar fed by the stages' progress listeners (one row per stage); plain lines every `every_s`
    seconds when the console is no terminal."""
    if not console.is_terminal:
        return PlainProgress(console, every_s)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from tasks.core.artifacts import add_progress_listener

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=console)
    ids: dict[str, int] = {}
    rows = threading.Lock()  # listeners are called from task threads: one row per stage, never two

    def listener(stage: str, done: int, total: int) -> None:
        with rows:
            if stage not in ids:
                ids[stage] = bar.add_task(stage, total=total)
        bar.update(ids[stage], completed=done, total=total)

    add_progress_listener(listener)
    return bar


def print_outputs(outputs: dict) -> None:
    print("\nOutputs:")
    for name, path in outputs.items():
        if isinstance(path, dict):
            print(f"  {name}")
            for sub, p in path.items():
                print(f"    {sub:9s} {Path(p).resolve()}")
        else:
            print(f"  {name:9s} {Path(path).resolve()}")
    trained = outputs.get("train-surrogate")
    if isinstance(trained, dict) and Path(trained["eval"]).is_file():
        import json

        from tasks.train.surrogate_selection import comparison_markdown, comparison_rows, verdict

        report = json.loads(Path(trained["eval"]).read_text())
        print("\nSurrogate evaluation (Spearman ×100 of cosine vs gold):")
        print(comparison_markdown(comparison_rows(report["backbone_results"], report["results"])))
        print(verdict(report["shipped_step"], report.get("checkpoint_turned_down")))
    if "generate-sts-triples" in outputs and "label-pairs" in outputs:  # a pipeline run: its quality table
        from tasks.report.run_quality import quality_markdown, quality_rows, run_manifests

        print("\nRun quality:\n" + quality_markdown(quality_rows(run_manifests(outputs))))
    from tasks.core.env_settings import env

    if env().prefect_api_url:
        ui = env().prefect_api_url.removesuffix("/api")
        print(f"\nPrefect UI: {ui}/runs  (flow runs, artifacts: progress, samples, summary, plots, outputs)")
    else:
        print("\nTo inspect the run and its artifacts in the Prefect UI:\n"
              "  ./stsgen ui      # then open http://127.0.0.1:4200/runs")


def with_llm(args: argparse.Namespace, job) -> int:
    """Run `job(llm_settings)` against --base-url, or against the embedded local server (stopped afterwards)."""
    from rich.console import Console

    from flows.cli.options import given
    from tasks.core.config import LLMSettings
    from tasks.core.env_settings import env
    from tasks.llm.server import local_server

    console = Console(stderr=True)
    # Flags left out keep LLMSettings' defaults (prices: STSGEN_LLM_PRICE_*_PER_MILLION, or none).
    llm_kwargs = given(max_concurrency=args.concurrency,
                       requests_per_minute=args.rpm, price_prompt_per_million=getattr(args, "price_prompt", None),
                       price_completion_per_million=getattr(args, "price_completion", None))
    if args.base_url:
        model = args.model or env().llm.model  # STSGEN_LLM_MODEL, default qwen2.5-coder-1.5b-instruct
        with progress_bar(console):
            outputs = job(LLMSettings(base_url=args.base_url, model=model, **llm_kwargs))
    else:
        console.print(f"Starting the local LLM server ({args.local_model}) on 127.0.0.1 …")
        slots = args.concurrency or LLMSettings.model_fields["max_concurrency"].default  # a slot per request in flight
        with local_server(args.local_model, engine=args.llm_engine, parallel=slots) as server:
            # The server's identity travels in the settings: manifests, the rating's key, the request order.
            with progress_bar(console):
                outputs = job(LLMSettings(base_url=server.base_url, model=server.model, model_sha256=server.sha256,
                                          server_engine=server.engine, **llm_kwargs))
        console.print("Local LLM server stopped.")
    print_outputs(outputs)
    return 0

