"""Flow `sts-pipeline`: the stages chained, each stage's outputs the next one's inputs.

generate-sts-triples → triples.parquet → retrieve-contexts → contexts.parquet → label-pairs → pairs.parquet
→ build-dataset (this run and the earlier finished runs beside it: deduplicated, decontaminated) → train-surrogate
(the dataset's triples + pairs) → model/ + eval.json; report-patterns (triples vs STS-B dev) beside them, and a
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

from prefect import flow

from flows.build_dataset import build_dataset
from flows.generate_sts_triples import generate_sts_triples
from flows.label_pairs import label_pairs
from flows.report_patterns import report_patterns
from flows.retrieve_contexts import retrieve_contexts
from flows.train_surrogate import train_surrogate
from tasks.core.config import ConfigError, LLMSettings, with_seed
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_logger
from tasks.core.store import read_manifest
from tasks.dataset.settings import DatasetSettings
from tasks.dataset.sources import accumulated_runs
from tasks.generate.settings import GenerateSettings
from tasks.label.labeling import uses_contexts
from tasks.label.settings import LabelSettings
from tasks.report.run_quality import publish_run_report
from tasks.retrieve.settings import RetrieveSettings
from tasks.train.settings import TrainSettings


@flow(name="sts-pipeline")
@run_scoped
def sts_pipeline(
    generate: GenerateSettings = GenerateSettings(),
    retrieve: RetrieveSettings = RetrieveSettings(),
    label: LabelSettings = LabelSettings(),
    train: TrainSettings | None = TrainSettings(),
    dataset: DatasetSettings | None = DatasetSettings(),
    llm: LLMSettings | None = None,
    seed: int | None = None,
    output_dir: str = OUTPUTS_DIR,
    run: str | None = None,
) -> dict[str, dict[str, str]]:
    """Each stage's settings object as its own flow takes it; `llm`: the endpoint every LLM call goes to (stage 1,
    written contexts, the rating); `seed`: given, it replaces every stage's seed; `train` None stops after labeling.
    Stage 1's corpus is stage 2's unless retrieve.corpora names others, and the one hard negatives are mined from
    unless train.mining.corpus names another.
    `dataset`: the train stage trains on the dataset version (build-dataset: deduplicated, decontaminated) of this
    run and every earlier finished run of its pattern in the same output_dir, so scheduled runs grow the model's
    data; None: on this run's own triples and pairs, undecontaminated.
    Returns each stage's output paths."""
    t0, started = time.perf_counter(), time.time()
    generate, retrieve, label, train = (with_seed(s, seed) if s is not None else None
                                        for s in (generate, retrieve, label, train))
    generated = generate_sts_triples(settings=generate, llm=llm, output_dir=output_dir)
    made = (read_manifest(Path(generated["manifest"]).parent) or {}).get("counts", {})
    if not made.get("triples"):
        raise ConfigError(f"Stage 1 produced no complete triple (quarantined rows by reason: "
                          f"{made.get('rejected_by_reason')}; see {generated['rejected']}), so there is nothing for "
                          "the later stages. Re-run to retry failed LLM calls (answered ones are cached), or "
                          "check the endpoint, model and validation settings.")
    outputs = {"generate-sts-triples": generated}
    if uses_contexts(label):  # label.method = llm_rating reads no contexts: stage 2 is skipped, not run for nothing
        corpora = retrieve.corpora_or(generate.corpus)
        outputs["retrieve-contexts"] = retrieve_contexts(
            sentences=generated["triples"], settings=retrieve.model_copy(update={"corpora": corpora}), llm=llm,
            output_dir=output_dir)
    outputs["label-pairs"] = label_pairs(
        contexts=outputs.get("retrieve-contexts", {}).get("contexts"), triples=generated["triples"], settings=label,
        llm=llm, output_dir=output_dir)
    backbone = (train or TrainSettings()).backbone
    outputs["report-patterns"] = report_patterns(
        triples=generated["triples"], output_dir=output_dir,
        encoder=(backbone.source or DEFAULT_ENCODER) if backbone.kind == "encoder" else DEFAULT_ENCODER)
    if train is not None:
        if train.mining.corpus is None:  # mine from stage 1's corpus unless told otherwise
            train = train.model_copy(update={"mining": train.mining.model_copy(update={"corpus": generate.corpus})})
        if dataset is None:
            outputs["train-surrogate"] = train_surrogate(
                triples=generated["triples"], pairs=outputs["label-pairs"]["pairs"], settings=train,
                output_dir=output_dir)
        else:
            runs, _ = accumulated_runs(Path(output_dir), generate.pattern.kind)
            outputs["build-dataset"] = build_dataset(runs=[str(r) for r in runs], settings=dataset,
                                                     output_dir=str(Path(output_dir) / "build-dataset"))
            outputs["train-surrogate"] = train_surrogate(dataset=outputs["build-dataset"]["dataset"], settings=train,
                                                         output_dir=output_dir)
    publish_run_report(outputs, started, output_dir)
    run_logger().info("sts-pipeline finished in %.0f s", time.perf_counter() - t0)
    return outputs
