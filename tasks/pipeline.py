"""sts-pipeline's decisions between stages, so that flows/sts_pipeline.py only wires: each stage's settings as the run
derives them from the others (one seed, stage 2 on stage 1's corpus, hard negatives mined from it, the pattern
report on the backbone), the check that stage 1 left something for the rest, and the runs the train stage's dataset
grows from. A layer above the stages (it reads their settings and contracts), below the flows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.core.config import ConfigError, with_seed
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.store import read_manifest
from tasks.dataset.sources import accumulated_runs
from tasks.generate.settings import GenerateSettings
from tasks.label.labeling import uses_contexts
from tasks.label.settings import LabelSettings
from tasks.retrieve.settings import RetrieveSettings
from tasks.train.settings import TrainSettings


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
    measures the backbone's cosine when the backbone is an encoder (else all-MiniLM-L6-v2's)."""
    generate, retrieve, label = (with_seed(s, seed) for s in (generate, retrieve, label))
    train = with_seed(train, seed) if train is not None else None
    backbone = (train or TrainSettings()).backbone
    encoder = (backbone.source or DEFAULT_ENCODER) if backbone.kind == "encoder" else DEFAULT_ENCODER
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
