"""One training recipe for every entry point: `./stsgen train`, `./stsgen run` (sts-pipeline) and the weekly
deployment (train-on-dataset) build the same TrainSettings — the recipe, TrainSettings' defaults — and the train stage
itself applies the one rule for data without labeled pairs (tasks/train/settings.py `for_data`), so all three train
the same settings on the same data, with pairs and without."""

from __future__ import annotations

import inspect

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.cli import build_parser
from flows.cli.stages import pipeline_settings, train_fields
from flows.serve import deployment_specs
from flows.sts_pipeline import sts_pipeline
from flows.train_on_dataset import train_on_dataset
from tasks.core.config import ConfigError
from tasks.train.backbones import BackboneSettings
from tasks.train.settings import LossSettings, TrainSettings, for_data
from tasks.train.stage import prepare_training
from tests.conftest import TOPICS

# The recipe by hand: InfoNCE + HT on the triples, CoSENT on stage 3's label, the backbone anchor at 50, lr auto.
RECIPE = {"infonce": 1.0, "hierarchical_triplet": 1.0, "regression": 1.0, "regression_loss": "cosent",
          "backbone_anchor": 50.0}
# Without pairs, by hand: the triples-only recipe as measured (InfoNCE + HT, lr 3e-5).
WITHOUT_PAIRS = {"infonce": 1.0, "hierarchical_triplet": 1.0, "regression": 0.0, "regression_loss": "cosine",
                 "backbone_anchor": 0.0}


def entry_point_settings() -> dict[str, TrainSettings]:
    """The train settings each entry point builds with nothing given: the CLI's (the real parser), the pipeline
    flow's parameter default, and the weekly deployment's parameters from prefect.yaml."""
    parser = build_parser()
    weekly = next(d for d in deployment_specs()
                  if d["name"] == "weekly" and d["entrypoint"] == "flows/train_on_dataset.py:train_on_dataset")
    weekly_param = inspect.signature(train_on_dataset.fn, eval_str=True).parameters["train"]
    assert weekly_param.annotation is TrainSettings
    given = (weekly.get("parameters") or {}).get("train")  # unset: Prefect runs the flow's default
    return {
        "./stsgen train": TrainSettings.model_validate(train_fields(parser.parse_args(["train"]))),
        "./stsgen run": pipeline_settings(parser.parse_args(["run"]))["train"],
        "sts-pipeline's default": inspect.signature(sts_pipeline.fn).parameters["train"].default,
        "train-on-dataset/weekly": TrainSettings.model_validate(given) if given is not None else weekly_param.default,
    }


def _losses(settings: TrainSettings, names) -> dict:
    return {name: getattr(settings.losses, name) for name in names}


def write_data(folder, with_pairs: bool | None) -> tuple[str, str | None]:
    """18 triples of the test topics, and their pairs (None: no pairs file; False: a pairs file with no rows)."""
    rows, names = [], list(TOPICS)
    for t, name in enumerate(names):
        for i, s in enumerate(TOPICS[name]):
            words = s.rstrip(".").split()
            rows.append({"source_id": f"{name}{i}", "anchor": s, "positive": " ".join(words[1:]) + ".",
                         "intermediate": " ".join(words[: len(words) // 2]) + ".",
                         "negative": TOPICS[names[(t + 1) % 3]][i]})
    triples = pd.DataFrame(rows)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), folder / "triples.parquet")
    if with_pairs is None:
        return str(folder / "triples.parquet"), None
    pairs = pd.DataFrame({"s1": triples["anchor"], "s2": triples["positive"], "label": 0.9,
                          "triple_id": triples["source_id"]})
    pq.write_table(pa.Table.from_pandas(pairs if with_pairs else pairs.iloc[:0], preserve_index=False),
                   folder / "pairs.parquet")
    return str(folder / "triples.parquet"), str(folder / "pairs.parquet")


def test_train_run_and_the_weekly_deployment_build_the_one_recipe():
    built = entry_point_settings()
    recipe = TrainSettings()
    assert _losses(recipe, RECIPE) == RECIPE and recipe.lr == "auto" and recipe.label_source == "label"
    for name, settings in built.items():
        assert type(settings) is TrainSettings, name
        assert settings.model_dump() == recipe.model_dump(), name


@pytest.mark.parametrize("pairs", [True, None, False], ids=["with pairs", "no pairs file", "a pairs file, no rows"])
def test_every_entry_point_trains_the_same_settings_on_the_same_data(pairs, tiny_encoder_dir, tmp_path):
    """The train stage's prepare step on the same data from each entry point's settings: identical settings and
    training key — the recipe with pairs, the triples-only recipe without (the stage's own rule; the pipeline's
    plan, which fills in the mining corpus, keeps the key)."""
    from tasks.pipeline import plan_pipeline

    triples, pairs_path = write_data(tmp_path / "data", pairs)
    tiny = {"backbone": BackboneSettings(source=str(tiny_encoder_dir))}  # the same small backbone for all
    jobs = {name: prepare_training(triples, pairs_path, settings.model_copy(update=tiny))
            for name, settings in entry_point_settings().items()}
    run = pipeline_settings(build_parser().parse_args(["run"]))
    planned = plan_pipeline(run["generate"], run["retrieve"], run["label"], run["train"], None).train
    planned_job = prepare_training(triples, pairs_path, planned.model_copy(update=tiny))
    first = next(iter(jobs.values()))
    for name, job in jobs.items():
        assert job.settings.model_dump() == first.settings.model_dump(), name
        assert job.train_key == first.train_key == planned_job.train_key, name
    expected = RECIPE if pairs else WITHOUT_PAIRS
    assert _losses(first.settings, expected) == expected
    assert first.settings.lr == 3e-5  # "auto" below 75 training anchors, and the triples-only recipe's rate


def test_data_without_pairs_trains_the_triples_only_recipe_by_one_rule():
    """`for_data`: with pairs, the settings as given; without, each recipe value among the regression's weight and
    form, the anchor and the lr takes the triples-only recipe's — compared with the defaults, so a form that sent
    every default gets the same — while a value set away from the recipe stays; a regression target that needs pairs
    is refused naming the data."""
    recipe = TrainSettings()
    assert for_data(recipe, True, "ds-1") is recipe
    fallback = for_data(recipe, False, "ds-1")
    expected = recipe.model_dump()
    expected["losses"].update(WITHOUT_PAIRS)
    expected["lr"] = 3e-5
    assert fallback.model_dump() == expected
    every_default = TrainSettings.model_validate(recipe.model_dump(mode="json"))  # a UI form sends every field
    assert for_data(every_default, False).model_dump() == expected
    kept = for_data(TrainSettings(steps=7, lr=1e-4, losses={"backbone_anchor": 10.0, "temperature": 0.1}), False)
    assert (kept.steps, kept.lr, kept.losses.backbone_anchor, kept.losses.temperature) == (7, 1e-4, 10.0, 0.1)
    assert (kept.losses.regression, kept.losses.regression_loss) == (0.0, "cosine")
    triples_only = TrainSettings(losses=LossSettings(), lr=3e-5)  # already the triples alone: unchanged
    assert for_data(triples_only, False) is triples_only
    explicit = TrainSettings(losses={"regression": 2.0})  # not the recipe's weight: kept, and the stage refuses it
    assert for_data(explicit, False).losses.regression == 2.0
    with pytest.raises(ConfigError, match=r"ds-1: train.label_source='rating' .* no labeled pairs"):
        for_data(TrainSettings(label_source="rating"), False, "ds-1")


def test_a_partial_losses_mapping_keeps_the_recipe():
    """A flag or a deployment's `{"losses": {…}}` fills in the recipe; a LossSettings object is taken as given; the
    SimCSE baseline and the cached InfoNCE, which the anchor cannot go with, leave the recipe's anchor out."""
    partial = TrainSettings.model_validate({"losses": {"temperature": 0.1}})
    assert partial.losses == TrainSettings().losses.model_copy(update={"temperature": 0.1})
    assert TrainSettings(losses=LossSettings(negatives="generated")).losses == LossSettings()
    flags = build_parser().parse_args(["train", "--simcse"])
    simcse = TrainSettings.model_validate(train_fields(flags)).losses
    assert simcse.simcse and simcse.backbone_anchor == 0.0
    assert TrainSettings.model_validate({"losses": {"infonce_mini_batch": 4}}).losses.backbone_anchor == 0.0


def test_the_train_stage_applies_the_rule_itself(tiny_encoder_dir, tmp_path):
    """Triples without pairs and the default settings: the stage's prepare step succeeds with the regression off
    (without the rule the recipe's regression would have no pairs and be refused) and the job — whose settings the
    manifest's `parameters` and the key record — holds the triples-only recipe; a regression weight the caller set
    away from the recipe's still fails fast."""
    triples, _ = write_data(tmp_path / "data", None)
    settings = TrainSettings(backbone=BackboneSettings(source=str(tiny_encoder_dir)))
    job = prepare_training(triples, None, settings)
    assert _losses(job.settings, WITHOUT_PAIRS) == WITHOUT_PAIRS and job.settings.lr == 3e-5
    by_hand = settings.model_copy(update={"losses": LossSettings(), "lr": 3e-5})
    assert job.train_key == prepare_training(triples, None, by_hand).train_key
    with pytest.raises(ConfigError, match="losses.regression is non-zero but there are no labeled pairs"):
        prepare_training(triples, None, settings.model_copy(update={"losses": LossSettings(regression=2.0)}))
