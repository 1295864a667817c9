"""Flow `train-on-dataset`: the weekly job — build (or find) the dataset version of every finished run, then train
and evaluate a surrogate on it with sts-pipeline's recipe (its labeled pairs in the regression), or with the
triples-only recipe where no run ran label-pairs. Wires flows/build_dataset.py and flows/train_surrogate.py."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.build_dataset import build_dataset
from flows.train_surrogate import train_surrogate
from tasks.contracts import dataset_has_pairs
from tasks.core.runs import DATASETS_DIR, OUTPUTS_DIR, TRAINED_DIR
from tasks.dataset.settings import DatasetSettings
from tasks.train.settings import PipelineTrainSettings, recipe_for_data


@flow(name="train-on-dataset")
def train_on_dataset(
    runs_dir: str = OUTPUTS_DIR,
    dataset: DatasetSettings = DatasetSettings(),
    datasets_dir: str = DATASETS_DIR,
    train: PipelineTrainSettings = PipelineTrainSettings(),
    output_dir: str = TRAINED_DIR,
    run: str | None = "auto",
) -> dict[str, dict[str, str]]:
    """The dataset version of the finished runs under `runs_dir` (`datasets_dir`/ds-…), and a surrogate trained on
    it (`output_dir`/<run>/train-surrogate/). Returns both stages' paths. `train` defaults to sts-pipeline's
    recipe; on a version without labeled pairs it falls back to the triples-only one (`recipe_for_data`)."""
    built = build_dataset(runs_dir=runs_dir, settings=dataset, output_dir=datasets_dir)
    settings = recipe_for_data(train, dataset_has_pairs(built["dataset"]), built["dataset"])
    if settings is not train:
        get_run_logger().info("%s has no labeled pairs (none of its runs ran label-pairs, or none of their pairs "
                              "survived): training without the pairs' regression, losses %s, lr %s",
                              built["dataset"], settings.losses.model_dump(), settings.lr)
    trained = train_surrogate(dataset=built["dataset"], settings=settings, output_dir=output_dir, run=run)
    return {"build-dataset": built, "train-surrogate": trained}
