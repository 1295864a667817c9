"""Flow `train-on-dataset`: the weekly job — build (or find) the dataset version of every finished run, then train
and evaluate a surrogate on it. Wires flows/build_dataset.py and flows/train_surrogate.py; nothing of its own."""

from __future__ import annotations

from prefect import flow

from flows.build_dataset import build_dataset
from flows.train_surrogate import train_surrogate
from tasks.core.runs import DATASETS_DIR, OUTPUTS_DIR, TRAINED_DIR
from tasks.dataset.settings import DatasetSettings
from tasks.train.settings import TrainSettings


@flow(name="train-on-dataset")
def train_on_dataset(
    runs_dir: str = OUTPUTS_DIR,
    dataset: DatasetSettings = DatasetSettings(),
    datasets_dir: str = DATASETS_DIR,
    train: TrainSettings = TrainSettings(),
    output_dir: str = TRAINED_DIR,
    run: str | None = "auto",
) -> dict[str, dict[str, str]]:
    """The dataset version of the finished runs under `runs_dir` (`datasets_dir`/ds-…), and a surrogate trained on
    it (`output_dir`/<run>/train-surrogate/). Returns both stages' paths."""
    built = build_dataset(runs_dir=runs_dir, settings=dataset, output_dir=datasets_dir)
    trained = train_surrogate(dataset=built["dataset"], settings=train, output_dir=output_dir, run=run)
    return {"build-dataset": built, "train-surrogate": trained}
