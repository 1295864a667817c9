"""Flow `sts-pipeline`: the stages chained, each stage's outputs the next one's inputs.

generate-sts-triples → triples.parquet → retrieve-contexts → contexts.parquet → label-pairs → pairs.parquet
→ build-dataset (this run and the earlier finished runs beside it: deduplicated, decontaminated) → train-surrogate
(the dataset's triples + pairs) → model/ + eval.json; report-patterns (triples vs STS-B dev) beside them, and a
quality table of the run (tasks/report/run_quality.py) as the `pipeline-quality` artifact.

The default labeler (label.method = combined) is the design card's: every pair gets the LLM's rating and its
context-vector label (Sun et al. 2022) from the retrieved contexts, and their mix; with label.method = llm_rating the
pipeline skips retrieve-contexts (the rating reads no contexts).

Every stage is a subflow that computes its cache key from its inputs' content hashes and its parameters and returns
at once when its committed outputs already match (the manifest verifies): a re-run with nothing changed redoes
nothing, and a change reruns only the stages downstream of it.
"""

from __future__ import annotations

import time

from prefect import flow

from flows.build_dataset import build_dataset
from flows.generate_sts_triples import generate_sts_triples
from flows.label_pairs import label_pairs
from flows.report_patterns import report_patterns
from flows.retrieve_contexts import retrieve_contexts
from flows.train_surrogate import train_surrogate
from tasks.core.config import LLMSettings
from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_logger
from tasks.dataset.settings import DatasetSettings
from tasks.generate.settings import GenerateSettings
from tasks.label.settings import LabelSettings
from tasks.pipeline import check_links, dataset_runs, plan_pipeline, require_triples
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
    check_links()  # each stage's declared reads written by a stage before it: else one error, before stage 1
    plan = plan_pipeline(generate, retrieve, label, train, seed)
    generated = generate_sts_triples(settings=plan.generate, llm=llm, output_dir=output_dir)
    require_triples(generated)
    outputs = {"generate-sts-triples": generated}
    if plan.retrieve is not None:
        outputs["retrieve-contexts"] = retrieve_contexts(sentences=generated["triples"], settings=plan.retrieve,
                                                         llm=llm, output_dir=output_dir)
    outputs["label-pairs"] = label_pairs(
        contexts=outputs.get("retrieve-contexts", {}).get("contexts"), triples=generated["triples"],
        settings=plan.label, llm=llm, output_dir=output_dir)
    outputs["report-patterns"] = report_patterns(triples=generated["triples"], encoder=plan.report_encoder,
                                                 output_dir=output_dir)
    if plan.train is not None and dataset is None:
        outputs["train-surrogate"] = train_surrogate(
            triples=generated["triples"], pairs=outputs["label-pairs"]["pairs"], settings=plan.train,
            output_dir=output_dir)
    elif plan.train is not None:
        runs, datasets_dir = dataset_runs(output_dir, plan.generate.pattern.kind)
        outputs["build-dataset"] = build_dataset(runs=runs, settings=dataset, output_dir=datasets_dir)
        outputs["train-surrogate"] = train_surrogate(dataset=outputs["build-dataset"]["dataset"],
                                                     settings=plan.train, output_dir=output_dir)
    publish_run_report(outputs, started, output_dir)
    run_logger().info("sts-pipeline finished in %.0f s", time.perf_counter() - t0)
    return outputs
