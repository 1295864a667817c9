"""Flow `train-surrogate`: stage 4, a Siamese sentence encoder trained on the pipeline's own data (Sun et al. 2022,
NGCSE, BeLLM; tasks/train/stage.py).

triples.parquet (+ pairs.parquet from label-pairs) → held-out split → backbone as a SentenceTransformer (encoder with
mean pooling, or a BeLLM-style decoder) → `SentenceTransformerTrainer` (tasks/train/trainer.py): InfoNCE + hierarchical
triplet + regression onto stage-3 labels, evaluation every N steps (STS-B dev Spearman; alignment / uniformity on
held-out pairs and dev → RFD) → best-on-dev weights, the backbone included → `<output_dir>/<run>/train-surrogate/`:
model/ (a sentence-transformers folder with its model card), eval.json, curves, manifest. The trainer's checkpoints make an
interrupted training resume where it stopped.

Multi-GPU: the flow is a plain Python function; `torchrun --nproc_per_node N -m flows.cli train …` or
`accelerate launch -m flows.cli train …` run the trainer data-parallel (the trainer reads the launcher's
environment); on one CPU it runs as is.
"""

from __future__ import annotations

import time
from functools import partial

from prefect import flow

from tasks.core.runs import OUTPUTS_DIR, run_scoped
from tasks.core.stage import run_stage
from tasks.train.settings import TrainSettings
from tasks.train.stage import IO, STAGE, prepare_training, publish_training, train_and_select


@flow(name=STAGE)
@run_scoped
def train_surrogate(
    triples: str | None = None,
    pairs: str | None = None,
    dataset: str | None = None,
    settings: TrainSettings = TrainSettings(),
    output_dir: str = OUTPUTS_DIR,
    run: str | None = None,
) -> dict[str, str]:
    """Train and evaluate a surrogate encoder. `triples`: a triples.parquet; `pairs`: a pairs.parquet from
    label-pairs (the recipe's regression target: without it the stage trains the triples-only recipe,
    tasks/train/settings.py `for_data`); `dataset`: a dataset version from build-dataset instead of the two (its
    triples and pairs). Returns output paths."""
    started = time.perf_counter()
    job = prepare_training(triples, pairs, settings, dataset)  # an unavailable GPU or a bad input fails here
    return run_stage(STAGE, output_dir, job.key(), IO, partial(train_and_select, job), publish_training,
                     started=started)
