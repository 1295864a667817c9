"""Where stsgen keeps its caches. Standard library only: setup's llama.cpp build (tasks/llm/llama_build.py) uses it
before the project's dependencies are installed."""

from __future__ import annotations

import os
from pathlib import Path


def stsgen_home() -> Path:
    """Where stsgen keeps caches (LLM responses, assembled model files, llama.cpp builds, local Prefect DB)."""
    return Path(os.environ.get("STSGEN_HOME", Path.home() / ".cache" / "stsgen")).expanduser()
