"""Flow `retrieve-contexts`: stage 2, context sets C_s for every sentence (seed 003, §3.3; tasks/retrieve/stage.py).

corpus → context windows → screening index + coherence model (both reused when unchanged) → query sentences in
shards → screen top-K → rank by coherence → greedy diverse selection (and/or contexts the LLM writes around each
sentence: source = generated | both, tasks/retrieve/generated_contexts.py) → `<output_dir>/<run>/retrieve-contexts/`:
contexts.parquet, rejected.parquet, manifest.json. Shards run on a thread pool (default), a process pool, or a Dask
cluster (`dask_address`).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Literal

from prefect import flow

from tasks.core.config import CorpusSettings, LLMSettings
from tasks.core.device import resolve_device
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runs import run_scoped
from tasks.core.stage import run_stage
from tasks.retrieve.coherence import CoherenceSettings
from tasks.retrieve.generated_contexts import ContextSourceSettings
from tasks.retrieve.retrieval import SelectionSettings
from tasks.retrieve.stage import OUTPUT_FILES, STAGE, prepare_retrieval, publish_retrieval, retrieve_all

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed


@flow(name=STAGE)
@run_scoped
def retrieve_contexts(
    sentences: str,
    corpora: list[CorpusSettings] | None = None,
    window_k: int = 1,
    chunk_size: int = 0,
    selection: SelectionSettings | None = None,
    coherence: CoherenceSettings | None = None,
    source: ContextSourceSettings | None = None,
    llm: LLMSettings | None = None,
    shard_size: int = 256,
    workers: Literal["threads", "processes", "dask"] = "threads",
    max_workers: int = 2,
    dask_address: str | None = None,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, str]:
    """Context sets for every sentence of `sentences` (a triples.parquet, a Parquet with a `sentence`/`text`
    column, or a text file with one sentence per line): retrieved from the corpora, written by the LLM at `llm`
    (source.source = generated), or both. Returns output paths."""
    started = time.perf_counter()
    coherence = coherence or CoherenceSettings()
    device = resolve_device(coherence.device)  # an unavailable GPU fails here, before any work
    job = prepare_retrieval(sentences, corpora or [CorpusSettings()], window_k, chunk_size,
                            selection or SelectionSettings(), coherence, source, llm)
    compute = partial(retrieve_all, job, device=device, shard_size=shard_size, workers=workers,
                      dask_address=dask_address, max_workers=max_workers)
    return run_stage(STAGE, output_dir, job.key(), OUTPUT_FILES, compute, publish_retrieval, started=started)
