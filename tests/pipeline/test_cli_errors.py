"""What a user reads when an input is bad: one `stsgen: error:` line naming the file and the fix, exit status 2, and
no traceback on the terminal, also when the error is raised inside a flow run (Prefect's console handler would print
the run's traceback above the message; the run's log in the Prefect API keeps it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def test_a_bad_input_inside_a_flow_run_is_one_line_without_a_traceback(child_env):
    done = subprocess.run([sys.executable, "-m", "flows.cli", "train", "--triples", "README.md"], cwd=PROJECT,
                          env={**child_env, "PREFECT_LOGGING_LEVEL": "INFO"},  # as a user sees it
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("stsgen: error:")]
    assert errors == ["stsgen: error: Triples file README.md is not readable Parquet (ArrowInvalid); pass a "
                      "triples.parquet written by generate-sts-triples."]
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
    assert out.getvalue().splitlines() == ["generate: 0/90 (0 %)", "generate: 90/90 (100 %)"]

    out = io.StringIO()
    with progress_bar(Console(file=out, force_terminal=False), every_s=0):
        for done in (1, 2):
            notify_progress("label", done, 2)
    assert out.getvalue().splitlines() == ["label: 1/2 (50 %)", "label: 2/2 (100 %)"]
    assert not isinstance(progress_bar(Console(file=io.StringIO(), force_terminal=True)), PlainProgress)


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
