"""Where stsgen keeps its caches. Standard library only: setup's llama.cpp build (tasks/llm/llama_build.py) uses it
before the project's dependencies are installed.

This is the one place besides `tasks.core.env_settings` that reads an STSGEN_* variable itself (STSGEN_HOME): the typed
settings object needs pydantic-settings, which is not installed yet when setup runs this module. The two agree by
construction — `StsgenEnv.home` takes its default from `default_home()` and both treat an empty value as unset —
and tests/core/test_env_settings.py checks it."""

from __future__ import annotations

import os
from pathlib import Path

LATEST = "latest"  # <output_dir>/latest → the last finished run (tasks/core/runs.py)
# The default folders (relative to the project checkout): runs, dataset versions, surrogates trained on them.
OUTPUTS_DIR, DATASETS_DIR, TRAINED_DIR = "data/outputs", "data/datasets", "data/trained"


def latest_output(stage: str, name: str) -> str:
    """A file of the last finished run under the default output folder (the stage commands' default inputs)."""
    return f"{OUTPUTS_DIR}/{LATEST}/{stage}/{name}"


def default_home() -> Path:
    """STSGEN_HOME when it is not set (or set to an empty string)."""
    return Path.home() / ".cache" / "stsgen"


def stsgen_home() -> Path:
    """Where stsgen keeps caches (LLM responses, assembled model files, llama.cpp builds, local Prefect DB)."""
    return Path(os.environ.get("STSGEN_HOME") or default_home()).expanduser()
