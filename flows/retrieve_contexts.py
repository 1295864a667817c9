"""Flow `retrieve-contexts`: stage 2, context sets C_s for every sentence (Sun et al. 2022, §3.3;
tasks/retrieve/stage.py).

corpus → context windows → screening index + coherence model (both reused when unchanged) → query sentences in
shards → screen top-K → rank by coherence → greedy diverse selection (and/or contexts the LLM writes around each
sentence: source = generated | both, tasks/retrieve/generated_contexts.py) → `<output_dir>/<run>/retrieve-contexts/`:
contexts.parquet, rejected.parquet, manifest.json. Shards run on a thread pool (default), a process pool, or a Dask
cluster (`settings.execution`).
"""

from __future__ import annotations

import time
from functools import partial

from prefect import flow

from tasks.core.config import LLMSettings
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_stage
from tasks.retrieve.settings import RetrieveSettings
from tasks.retrieve.stage import IO, STAGE, prepare_retrieval, publish_retrieval, retrieve_all


@flow(name=STAGE)
@run_scoped
def retrieve_contexts(
    sentences: str,
    settings: RetrieveSettings = RetrieveSettings(),
    llm: LLMSettings | None = None,
    output_dir: str = OUTPUTS_DIR,
    run: str | None = None,
) -> dict[str, str]:
    """Context sets for every sentence of `sentences` (a triples.parquet, a Parquet with a `sentence`/`text`
    column, or a text file with one sentence per line): retrieved from settings.corpora, written by the LLM at `llm`
    (settings.source.source = generated), or both. Returns output paths."""
    started = time.perf_counter()
    job = prepare_retrieval(sentences, settings, llm)  # an unavailable GPU or a bad input fails here, before any work
    return run_stage(STAGE, output_dir, job.key(), IO, partial(retrieve_all, job),
                     publish_retrieval, started=started)
