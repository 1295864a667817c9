"""sts-pipeline's decisions between stages, so that flows/sts_pipeline.py only wires: each stage's settings as the run
derives them from the others (one seed, stage 2 on stage 1's corpus, hard negatives mined from it, the pattern
report on the backbone), the check that stage 1 left something for the rest, and the runs the train stage's dataset
grows from, and the links between the stages (each declared read written by a stage before it), checked before stage 1
starts. A layer above the stages (it reads their settings and contracts), below the flows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.core.config import ConfigError, with_seed
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.stage import StageIO
from tasks.core.store import read_manifest
from tasks.dataset import build
from tasks.dataset.sources import accumulated_runs
from tasks.generate import stage as generate_stage
from tasks.generate.settings import GenerateSettings
from tasks.label import stage as label_stage
from tasks.label.labeling import uses_contexts
from tasks.label.settings import LabelSettings
from tasks.llm.local_models import encoder_folder
from tasks.report import stage as report_stage
from tasks.retrieve import stage as retrieve_stage
from tasks.retrieve.settings import RetrieveSettings
from tasks.train import stage as train_stage
from tasks.train.settings import TrainSettings

# sts-pipeline's stages in the order it runs them (flows/sts_pipeline.py), each with its declared IO.
PIPELINE_STAGES: tuple[tuple[str, StageIO], ...] = tuple(
    (m.STAGE, m.IO) for m in (generate_stage, retrieve_stage, label_stage, report_stage, build, train_stage))


def check_links(stages: tuple[tuple[str, StageIO], ...] | None = None) -> None:
    """Every column a stage declares it reads from another stage's table (`IO.reads`) is written by a stage before
    it in the pipeline's order (`IO.writes`), or one ConfigError naming the stage, the table and the columns — raised
    before stage 1 starts: no LLM call made, nothing written. `stages`: (name, IO) in order; None: the pipeline's."""
    written: dict[str, tuple[str, ...]] = {}
    for stage, io in PIPELINE_STAGES if stages is None else stages:
        for table, columns in io.reads.items():
            missing = [c for c in columns if c not in written.get(table, ())]
            if missing:
                producer = table.split("/")[0]
                why = (f"{producer} writes no such column" if table in written else
                       f"no stage before {stage} writes {table}")
                raise ConfigError(f"sts-pipeline: stage {stage} reads {table} column(s) {', '.join(missing)} ({why}); "
                                  f"declare the column in {producer}'s IO.writes, or drop it from {stage}'s IO.reads.")
        written |= {f"{stage}/{file}": columns for file, columns in io.writes.items()}


@dataclass(frozen=True)
class PipelinePlan:
    """The stages' settings as one run uses them."""

    generate: GenerateSettings
    retrieve: RetrieveSettings | None  # None: the labeler reads no contexts (label.method = llm_rating): no stage 2
    label: LabelSettings
    train: TrainSettings | None  # None: the run stops after labeling
    report_encoder: str  # the encoder whose cosine the pattern report measures


def plan_pipeline(generate: GenerateSettings, retrieve: RetrieveSettings, label: LabelSettings,
                  train: TrainSettings | None, seed: int | None) -> PipelinePlan:
    """`seed` (given) replaces every stage's seed; stage 2 reads stage 1's corpus unless retrieve.corpora names
    others, and hard negatives are mined from it unless train.mining.corpus names another; the pattern report
    measures the backbone's cosine when the backbone is an encoder (else all-MiniLM-L6-v2's), and that encoder must be
    there (a clear ConfigError otherwise)."""
    generate, retrieve, label = (with_seed(s, seed) for s in (generate, retrieve, label))
    train = with_seed(train, seed) if train is not None else None
    backbone = (train or TrainSettings()).backbone
    encoder = (backbone.source or DEFAULT_ENCODER) if backbone.kind == "encoder" else DEFAULT_ENCODER
    encoder_folder(encoder)  # a missing encoder fails here, before stage 1 pays for any LLM call
    if train is not None and train.mining.corpus is None:
        train = train.model_copy(update={"mining": train.mining.model_copy(update={"corpus": generate.corpus})})
    stage2 = retrieve.model_copy(update={"corpora": retrieve.corpora_or(generate.corpus)}) \
        if uses_contexts(label) else None
    return PipelinePlan(generate, stage2, label, train, encoder)


def require_triples(generated: dict[str, str]) -> None:
    """Stop the run when stage 1 made no complete triple: nothing for the later stages."""
    made = (read_manifest(Path(generated["manifest"]).parent) or {}).get("counts", {})
    if not made.get("triples"):
        raise ConfigError(f"Stage 1 produced no complete triple (quarantined rows by reason: "
                          f"{made.get('rejected_by_reason')}; see {generated['rejected']}), so there is nothing for "
                          "the later stages. Re-run to retry failed LLM calls (answered ones are cached), or "
                          "check the endpoint, model and validation settings.")


def dataset_runs(output_dir: str, pattern: str) -> tuple[list[str], str]:
    """(the finished runs of `pattern` under output_dir, this one included, oldest first; the folder their dataset
    versions go to): what the train stage's dataset grows from."""
    runs, _ = accumulated_runs(Path(output_dir), pattern)
    return [str(r) for r in runs], str(Path(output_dir) / "build-dataset")
