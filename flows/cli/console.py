"""What the commands show: a progress bar fed by the stages' progress listeners, the outputs and quality tables
printed when a run ends, and running a job against an LLM endpoint or the embedded local server."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def progress_line(stage: str, done: int, total: int, elapsed_s: float) -> str:
    """One plain progress line: items done / total, the rate since the stage started and the time left at it."""
    line = f"{stage}: {done}/{total} ({100 * done // max(total, 1)} %) · {_duration(elapsed_s)} elapsed"
    if 0 < done < total and elapsed_s > 0:
        per_min = 60.0 * done / elapsed_s
        rate = f"{per_min:.1f}/min" if per_min < 60 else f"{per_min / 60:.1f}/s"
        line += f" · {rate} · ETA {_duration((total - done) * elapsed_s / done)}"
    return line


class PlainProgress:
    """Progress as plain lines, for a console that is no terminal (cron, CI, `| tee`): rich draws no bar there, and a
    run would print nothing for the minutes of stage 1. A line per stage when it starts and when it ends, and, while
    it works, one every `every_s` seconds from a heartbeat thread whether or not it advanced (a stage that works on
    one long shard still says it is alive): items done / total, rate, ETA."""

    def __init__(self, console, every_s: float):
        self.console, self.every_s = console, every_s
        self._stages: dict[str, list] = {}  # stage → [done, total, started (monotonic)]
        self._ended: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="plain-progress", daemon=True)

    def listener(self, stage: str, done: int, total: int) -> None:
        import time

        now = time.monotonic()
        with self._lock:
            if stage in self._ended:
                return
            first = stage not in self._stages
            state = self._stages.setdefault(stage, [done, total, now])
            state[0], state[1] = done, total
            if done >= total:
                self._ended.add(stage)
            if not (first or done >= total):
                return
        self._print(stage, done, total, now - state[2])

    def _beat(self) -> None:
        import time

        while not self._stop.wait(self.every_s):
            with self._lock:
                now = time.monotonic()
                working = [(stage, d, t, now - t0) for stage, (d, t, t0) in self._stages.items()
                           if stage not in self._ended]
            for line in working:
                self._print(*line)

    def _print(self, stage: str, done: int, total: int, elapsed_s: float) -> None:
        self.console.print(progress_line(stage, done, total, elapsed_s), highlight=False)

    def __enter__(self) -> "PlainProgress":
        from tasks.core.artifacts import add_progress_listener

        add_progress_listener(self.listener)
        self._heartbeat.start()
        return self

    def __exit__(self, *exc) -> None:
        from tasks.core.artifacts import remove_progress_listener

        self._stop.set()
        self._heartbeat.join()
        remove_progress_listener(self.listener)


def progress_bar(console, every_s: float | None = None):
    """A rich progress bar fed by the stages' progress listeners (one row per stage); plain lines every `every_s`
    seconds (default: STSGEN_PROGRESS_EVERY_S, 30) when the console is no terminal."""
    if not console.is_terminal:
        from tasks.core.env_settings import env

        return PlainProgress(console, env().progress_every_s if every_s is None else every_s)
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

