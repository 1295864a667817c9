"""Flow `generate-sts-triples`: stage 1, LLM pattern simulation (NGCSE; tasks/generate/stage.py).

n source sentences sampled from the corpus → s+, s^m, s- per sentence with the run's fixed in-context examples →
`<output_dir>/<run>/generate-sts-triples/`: triples.parquet, rejected.parquet, manifest.json (committed last).
Unchanged inputs + parameters → reused (a run with failed LLM calls is retried instead).
"""

from __future__ import annotations

import time
from functools import partial

from prefect import flow

from tasks.core.config import LLMSettings
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_stage
from tasks.generate.settings import GenerateSettings
from tasks.generate.stage import (
    IO,
    STAGE,
    generate_triples,
    prepare_generation,
    publish_generation,
    reusable,
)


@flow(name=STAGE)
@run_scoped
def generate_sts_triples(
    settings: GenerateSettings = GenerateSettings(),
    llm: LLMSettings | None = None,
    output_dir: str = OUTPUTS_DIR,
    run: str | None = None,
) -> dict[str, str]:
    """Generate STS triples; returns the output file paths.

    `settings.corpus.source`: 'default' or a path (file, folder, zip); `settings.pattern.source`: 'default' (STS12
    train rows of STS-B) or a SemEval TSV / SICK file; `settings.avoid_used_sources`: sample no sentence an earlier
    run under output_dir used (the nightly deployment's: scheduled runs grow one dataset). LLM endpoint and model come
    from `llm` (or STSGEN_LLM_BASE_URL / STSGEN_LLM_MODEL)."""
    started = time.perf_counter()
    job = prepare_generation(settings, llm or LLMSettings(), output_dir)  # every input checked before any LLM spend
    return run_stage(STAGE, output_dir, job.key(), IO, partial(generate_triples, job),
                     publish_generation, reusable=reusable, started=started)
