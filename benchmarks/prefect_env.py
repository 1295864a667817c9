"""Benchmarks that run flows use their own ephemeral Prefect API and home, quietly, with no telemetry. Import this
module before anything imports Prefect."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="stsgen-bench-prefect-"))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# The ephemeral API migrates a fresh SQLite database first: 20 s (the default) is too short on a busy 2-core machine.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.pop("PREFECT_API_URL", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
