"""What a user reads when an input is bad: one `stsgen: error:` line naming the file and the fix, exit status 2, and
no traceback on the terminal, also when the error is raised inside a flow run (Prefect's console handler would print
the run's traceback above the message; the run's log in the Prefect API keeps it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def test_a_bad_input_file_is_refused_before_any_server_starts(child_env):
    """`label` rates with the local LLM server and runs on Prefect: a file that is no triples table must stop it
    before either starts (they take half a minute), with one line naming the file and the fix."""
    env = {k: v for k, v in child_env.items() if k != "PREFECT_API_URL"}  # a run would start an ephemeral server
    for command in (["label", "--triples", "README.md"], ["train", "--triples", "README.md"],
                    ["label", "--pairs", "README.md"]):
        done = subprocess.run([sys.executable, "-m", "flows.cli", *command], cwd=PROJECT,
                              env={**env, "PREFECT_LOGGING_LEVEL": "INFO"}, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 2, command
        errors = [line for line in done.stderr.splitlines() if line.startswith("stsgen: error:")]
        assert len(errors) == 1 and "README.md is not readable Parquet" in errors[0], (command, done.stderr[-2000:])
        assert "Starting the local LLM server" not in done.stderr and "Starting temporary server" not in done.stderr
        assert "Beginning flow run" not in done.stderr and "Traceback" not in done.stderr + done.stdout


def test_a_bad_input_inside_a_flow_run_is_one_line_without_a_traceback(child_env, tmp_path):
    """An input only the flow can judge: triples with no intermediate, which stage 4's default losses need (the
    preflight reads the file; what the losses need is the stage's to decide, inside its run)."""
    import pandas as pd

    triples = tmp_path / "triples.parquet"
    pd.DataFrame({"source_id": ["d:0"], "anchor": ["A man plays a guitar."], "positive": ["A man is playing guitar."],
                  "negative": ["A woman slices an onion."]}).to_parquet(triples)
    done = subprocess.run([sys.executable, "-m", "flows.cli", "train", "--triples", str(triples)], cwd=PROJECT,
                          env={**child_env, "PREFECT_LOGGING_LEVEL": "INFO"},  # as a user sees it
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("stsgen: error:")]
    assert len(errors) == 1 and f"{triples}: the triples lack column(s) intermediate" in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert "Finished in state Failed" in done.stderr  # the flow run did start: the error came from inside it


def test_progress_is_printed_as_plain_lines_when_the_output_is_no_terminal():
    """Piped to a file (cron, CI, `| tee`), the progress bar would draw nothing for the minutes of stage 1."""
    import io

    from rich.console import Console

    from flows.cli.console import PlainProgress, progress_bar
    from tasks.core.artifacts import notify_progress

    out = io.StringIO()
    with progress_bar(Console(file=out, force_terminal=False), every_s=3600) as shown:
        assert isinstance(shown, PlainProgress)
        for done in range(0, 91):
            notify_progress("generate", done, 90)
        notify_progress("generate", 90, 90)  # the end is said once
    notify_progress("generate", 5, 90)  # after the run: the listener is gone
    lines = out.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == ["generate: 0/90 (0 %)", "generate: 90/90 (100 %)"]
    assert not isinstance(progress_bar(Console(file=io.StringIO(), force_terminal=True)), PlainProgress)


def test_a_plain_line_says_done_total_rate_and_eta():
    from flows.cli.console import progress_line

    # 30 of 90 in 10 minutes: 3 a minute, 60 left → 20 minutes.
    assert progress_line("generate", 30, 90, 600) == \
        "generate: 30/90 (33 %) · 10 min 00 s elapsed · 3.0/min · ETA 20 min 00 s"
    # 120 of 480 in 1 minute: 2 a second; 360 left → 3 minutes. Done or not started: no rate, no ETA.
    assert progress_line("label", 120, 480, 60) == "label: 120/480 (25 %) · 1 min 00 s elapsed · 2.0/s · ETA 3 min 00 s"
    assert progress_line("train", 0, 200, 5400) == "train: 0/200 (0 %) · 1 h 30 min elapsed"
    assert progress_line("train", 200, 200, 42) == "train: 200/200 (100 %) · 42 s elapsed"


def test_a_stage_that_does_not_advance_still_speaks_every_interval():
    """One long shard (retrieve on a small run) must not look like a hang: the heartbeat repeats its state."""
    import io
    import time

    from rich.console import Console

    from flows.cli.console import progress_bar
    from tasks.core.artifacts import notify_progress

    out = io.StringIO()
    with progress_bar(Console(file=out, force_terminal=False), every_s=0.05):
        notify_progress("retrieve", 3, 10)
        deadline = time.monotonic() + 10
        while out.getvalue().count("retrieve: 3/10") < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        notify_progress("retrieve", 10, 10)
        silent_from = len(out.getvalue())
        time.sleep(0.3)  # an ended stage is not repeated
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("retrieve: 3/10 (30 %) · 0 s elapsed")  # the start: no time yet, so no rate
    # then the heartbeat, with the rate and the time left at it
    assert sum(line.startswith("retrieve: 3/10 (30 %)") and "ETA" in line for line in lines[1:]) >= 3
    assert out.getvalue()[silent_from:] == ""


def test_generate_off_a_terminal_prints_its_progress_within_a_batch(tmp_path, child_env):
    """The main job's stage 1 sends every source in one batch: its lines must move before the batch ends (a slow
    endpoint: each answer takes 0.4 s)."""
    import re

    from tasks.llm.scripted_server import ScriptedOpenAI

    with ScriptedOpenAI(latency_s=0.4) as server:
        done = subprocess.run(
            [sys.executable, "-m", "flows.cli", "generate", "--n", "4", "--base-url", server.base_url, "--model",
             "scripted-model", "--concurrency", "2", "--output-dir", str(tmp_path), "--corpus", "data/examples/docs"],
            cwd=PROJECT, env={**child_env, "STSGEN_PROGRESS_EVERY_S": "0.5"}, capture_output=True, text=True,
            timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = [tuple(map(int, m.groups())) for m in re.finditer(r"^generate: (\d+)/(\d+) ", done.stderr, re.M)]
    assert shown[0] == (0, 12) and shown[-1] == (12, 12)
    assert any(0 < d < 12 for d, _ in shown), shown  # progress moved inside the one batch
    assert [d for d, _ in shown] == sorted(d for d, _ in shown)


def test_the_outputs_end_with_where_to_see_them_in_the_ui(monkeypatch, capsys, tmp_path):
    """A run on a Prefect server names its UI; a local run (ephemeral API, gone with the process) says how to start one."""
    from flows.cli.console import print_outputs

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4321/api")
    print_outputs({"triples": str(tmp_path / "triples.parquet")})
    out = capsys.readouterr().out
    assert "Prefect UI: http://127.0.0.1:4321/runs" in out and "./stsgen ui" not in out
    monkeypatch.delenv("PREFECT_API_URL")
    print_outputs({"triples": str(tmp_path / "triples.parquet")})
    out = capsys.readouterr().out
    assert "./stsgen ui" in out and "Prefect UI: http" not in out and str(tmp_path / "triples.parquet") in out
