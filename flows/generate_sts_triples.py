"""Flow `generate-sts-triples`: stage 1, LLM pattern simulation (seed 004; tasks/generate/stage.py).

n source sentences sampled from the corpus → s+, s^m, s- per sentence with the run's fixed in-context examples →
`<output_dir>/<run>/generate-sts-triples/`: triples.parquet, rejected.parquet, manifest.json (committed last).
Unchanged inputs + parameters → reused (a run with failed LLM calls is retried instead).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Literal

from prefect import flow

from tasks.core.config import CorpusSettings, LLMSettings
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runs import run_scoped
from tasks.core.stage import run_stage
from tasks.generate.settings import (
    GenerateConfig,
    PatternSettings,
    SamplingSettings,
    ValidationSettings,
    VerifierSettings,
)
from tasks.generate.stage import (
    OUTPUT_FILES,
    STAGE,
    failed_llm_calls,
    generate_triples,
    prepare_generation,
    publish_generation,
)

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed


@flow(name=STAGE)
@run_scoped
def generate_sts_triples(
    n: int = 20,
    pattern: Literal["sts", "nli"] = "sts",
    corpus: str = "default",
    pattern_source: str = "default",
    seed: int = 13,
    llm: LLMSettings | None = None,
    sampling: SamplingSettings | None = None,
    validation: ValidationSettings | None = None,
    verifier: VerifierSettings | None = None,
    max_attempts: int = 3,
    batch_size: int = 32,
    avoid_used_sources: bool = False,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, str]:
    """Generate STS triples; returns the output file paths.

    `corpus`: 'default' or a path (file, folder, zip); `pattern_source`: 'default' (STS12 train rows of STS-B) or a
    SemEval TSV / SICK file; `avoid_used_sources`: sample no sentence an earlier run under output_dir used (the
    nightly deployment's default: scheduled runs grow one dataset). LLM endpoint and model come from `llm` (or STSGEN_LLM_BASE_URL / STSGEN_LLM_MODEL)."""
    started = time.perf_counter()
    cfg = GenerateConfig(
        n=n, seed=seed, corpus=CorpusSettings(source=corpus),
        pattern=PatternSettings(kind=pattern, source=pattern_source),
        llm=llm or LLMSettings(), sampling=sampling or SamplingSettings(), validation=validation or ValidationSettings(),
        verifier=verifier or VerifierSettings(), max_attempts=max_attempts, batch_size=batch_size, output_dir=output_dir,
        avoid_used_sources=avoid_used_sources,
    )
    job = prepare_generation(cfg)  # every input checked before anything is spent on the LLM
    return run_stage(STAGE, cfg.output_dir, job.key(), OUTPUT_FILES, partial(generate_triples, job),
                     publish_generation, reusable=lambda folder: not failed_llm_calls(folder), started=started)
