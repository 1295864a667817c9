"""Flow `label-pairs`: stage 3, a similarity label for every pair (label.method; tasks/label/stage.py).

triples.parquet (or any pairs Parquet) [+ contexts.parquet for context labels] → scoring units → shards of
(sentence, context) scores and/or the LLM's cached ratings → `<output_dir>/<run>/label-pairs/`: pairs.parquet,
rejected.parquet, label_distribution.png, manifest.json. A re-run scores only unfinished shards and re-sends only
failed calls.
"""

from __future__ import annotations

import time
from functools import partial

from prefect import flow

from tasks.core.config import LLMSettings
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_stage
from tasks.label.settings import LabelSettings
from tasks.label.stage import IO, STAGE, label_all, prepare_labeling, publish_labels


@flow(name=STAGE)
@run_scoped
def label_pairs(
    contexts: str | None = None,
    triples: str | None = None,
    pairs: str | None = None,
    settings: LabelSettings = LabelSettings(),
    coherence_dir: str | None = None,
    llm: LLMSettings | None = None,
    output_dir: str = OUTPUTS_DIR,
    run: str | None = None,
) -> dict[str, str]:
    """Label sentence pairs (settings.method: context-vector labels, the LLM's rating, or both). Input: `contexts` (a
    contexts.parquet from retrieve-contexts; not needed by method 'llm_rating') and either `triples` (a
    triples.parquet) or `pairs` (a Parquet with s1/s2 or sentence1/sentence2, optional relation and gold/score).
    `coherence_dir`: the coherence model of the contexts (default: the one their manifest names). `llm`: the endpoint
    that rates pairs when the method is 'llm_rating' or 'combined' (default: LLMSettings(), i.e. STSGEN_LLM_* or the
    local server). Returns output paths."""
    started = time.perf_counter()
    job = prepare_labeling(contexts, triples, pairs, settings, coherence_dir, llm)
    return run_stage(STAGE, output_dir, job.key(), IO, partial(label_all, job), publish_labels,
                     started=started)
