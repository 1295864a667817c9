"""Flow `train-on-dataset`: the weekly job — build (or find) the dataset version of every finished run, then train
and evaluate a surrogate on it with the one recipe every entry point trains (TrainSettings' defaults: its labeled
pairs in the regression; the train stage's own rule where no run ran label-pairs, tasks/train/settings.py
`for_data`). Wires flows/build_dataset.py and flows/train_surrogate.py."""

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
    runs: list[str] | None = None,
    dataset: DatasetSettings = DatasetSettings(),
    datasets_dir: str = DATASETS_DIR,
    train: TrainSettings = TrainSettings(),
    output_dir: str = TRAINED_DIR,
    run: str | None = "auto",
) -> dict[str, dict[str, str]]:
    """The dataset version of the finished runs under `runs_dir`, or of the run folders in `runs`
    (`datasets_dir`/ds-…), and a surrogate trained on it (`output_dir`/<run>/train-surrogate/). Returns both stages'
    paths. `train`: the recipe; on a version without labeled pairs the train stage drops the pairs' regression itself
    (`for_data`), as for `./stsgen train`."""
    built = build_dataset(runs_dir=runs_dir, runs=runs, settings=dataset, output_dir=datasets_dir)
    trained = train_surrogate(dataset=built["dataset"], settings=train, output_dir=output_dir, run=run)
    return {"build-dataset": built, "train-surrogate": trained}
