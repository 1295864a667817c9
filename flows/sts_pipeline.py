"""Flow `sts-pipeline`: the stages chained, each stage's outputs the next one's inputs.

generate-sts-triples → triples.parquet → retrieve-contexts → contexts.parquet → label-pairs → pairs.parquet
→ train-surrogate (triples + pairs) → model/ + eval.json; report-patterns (triples vs STS-B dev) beside them, and a
quality table of the run (tasks/report/run_quality.py) as the `pipeline-quality` artifact.

The default labeler (label.method = combined) is the design card's: every pair gets the LLM's rating and its
context-vector label (seed 003) from the retrieved contexts, and their mix; with label.method = llm_rating the
pipeline skips retrieve-contexts (the rating reads no contexts).

Every stage is a subflow that computes its cache key from its inputs' content hashes and its parameters and returns
at once when its committed outputs already match (the manifest verifies): a re-run with nothing changed redoes
nothing, and a change reruns only the stages downstream of it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from prefect import flow

from flows.generate_sts_triples import generate_sts_triples
from flows.label_pairs import label_pairs
from flows.report_patterns import report_patterns
from flows.retrieve_contexts import retrieve_contexts
from flows.train_surrogate import train_surrogate
from tasks.core.config import ConfigError, CorpusSettings, LLMSettings
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runs import run_scoped
from tasks.core.stage import run_logger
from tasks.core.store import read_manifest
from tasks.generate.settings import SamplingSettings, ValidationSettings, VerifierSettings
from tasks.label.labeling import LabelSettings, uses_contexts
from tasks.report.run_quality import publish_run_report
from tasks.retrieve.coherence import CoherenceSettings
from tasks.retrieve.generated_contexts import ContextSourceSettings
from tasks.retrieve.retrieval import SelectionSettings
from tasks.train.training import TrainSettings

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed


@flow(name="sts-pipeline")
@run_scoped
def sts_pipeline(
    n: int = 30,
    pattern: Literal["sts", "nli"] = "sts",
    corpus: str = "default",
    pattern_source: str = "default",
    seed: int = 13,
    llm: LLMSettings | None = None,
    sampling: SamplingSettings | None = None,
    validation: ValidationSettings | None = None,
    verifier: VerifierSettings | None = None,
    max_attempts: int = 3,
    avoid_used_sources: bool = False,
    context_corpora: list[CorpusSettings] | None = None,
    context_source: ContextSourceSettings | None = None,
    window_k: int = 1,
    selection: SelectionSettings | None = None,
    coherence: CoherenceSettings | None = None,
    label: LabelSettings | None = None,
    calibration: str | None = None,
    label_shard_size: int = 8,
    train: bool = True,
    train_settings: TrainSettings | None = None,
    eval_sets: list[str] | None = None,
    workers: Literal["threads", "processes", "dask"] = "threads",
    max_workers: int = 2,
    dask_address: str | None = None,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, dict[str, str]]:
    """Generate triples from `corpus`, retrieve contexts for their sentences from `context_corpora` (default: the
    same corpus), label the pairs, train and evaluate a surrogate encoder (`train=False` stops after labeling).
    Returns each stage's output paths."""
    t0, started = time.perf_counter(), time.time()
    generated = generate_sts_triples(n=n, pattern=pattern, corpus=corpus, pattern_source=pattern_source, seed=seed,
                                     llm=llm, sampling=sampling, validation=validation, verifier=verifier,
                                     max_attempts=max_attempts, avoid_used_sources=avoid_used_sources,
                                     output_dir=output_dir)
    made = (read_manifest(Path(generated["manifest"]).parent) or {}).get("counts", {})
    if not made.get("triples"):
        raise ConfigError(f"Stage 1 produced no complete triple (quarantined rows by reason: "
                          f"{made.get('rejected_by_reason')}; see {generated['rejected']}), so there is nothing for "
                          "the later stages. Re-run to retry failed LLM calls (answered ones are cached), or "
                          "check the endpoint, model and validation settings.")
    label = label or LabelSettings(seed=seed)
    outputs = {"generate-sts-triples": generated}
    if uses_contexts(label):  # label.method = llm_rating reads no contexts: stage 2 is skipped, not run for nothing
        corpora = context_corpora or [CorpusSettings() if corpus == "default" else CorpusSettings(source=corpus)]
        outputs["retrieve-contexts"] = retrieve_contexts(
            sentences=generated["triples"], corpora=corpora, window_k=window_k, selection=selection,
            coherence=coherence, source=context_source, llm=llm, workers=workers, max_workers=max_workers, dask_address=dask_address,
            output_dir=output_dir)
    # The labeler's LM already uses every core: more than one thread-pool worker would only contend.
    outputs["label-pairs"] = label_pairs(
        contexts=outputs.get("retrieve-contexts", {}).get("contexts"), triples=generated["triples"], label=label,
        calibration=calibration, llm=llm, workers=workers, shard_size=label_shard_size,
        max_workers=1 if workers == "threads" else max_workers, dask_address=dask_address, output_dir=output_dir)
    backbone = (train_settings or TrainSettings()).backbone
    outputs["report-patterns"] = report_patterns(
        triples=generated["triples"], output_dir=output_dir,
        encoder=(backbone.source or "all-minilm-l6-v2") if backbone.kind == "encoder" else "all-minilm-l6-v2")
    if train:
        outputs["train-surrogate"] = train_surrogate(
            triples=generated["triples"], pairs=outputs["label-pairs"]["pairs"],
            train_settings=(train_settings or TrainSettings()).model_copy(update={"seed": seed}),
            eval_sets=eval_sets, output_dir=output_dir, mining_corpus=corpus)
    publish_run_report(outputs, started, output_dir)
    run_logger().info("sts-pipeline finished in %.0f s", time.perf_counter() - t0)
    return outputs
