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
