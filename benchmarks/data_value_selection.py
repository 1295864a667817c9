"""What benchmarks/data_value.py chooses, and on what (issue 62): only STS-B dev chooses, only trained weights are a
trained row's candidates, and a row's budget (steps, lr) is searched the same way for every data variant.

- **Sets.** STS-B dev chooses (the checkpoint, the budget); SICK trial confirms; STS-B test is evaluated once, on
  each row's final chosen weights. STS12 train (STS-B's 2012train rows: MSRpar, MSRvid, SMTeuroparl) is the
  generator's few-shot pattern pool: reported as the column `sts12_train_pattern_pool` — a pattern pool, not a
  judgement — and in no choice and no mean. The only mean is that of STS-B dev and SICK trial (`MEAN`).
- **The backbone.** The untrained backbone is its own row (`backbone`, step 0), never a candidate of a trained row:
  a trained row reports its best *trained* checkpoint on dev (step > 0), so a row can land under its backbone, and
  the columns `… vs backbone` say by how much.
- **The budget.** With `--search-budget`, for each learning rate of a small grid the steps double (100, 200, 400, …)
  while the mean over seeds of STS-B dev improves; the best (steps, lr) on that mean is the row's. SimCSE's paper
  setting (lr 3e-5, batch 64, one epoch) is a row of its own, `simcse-paper`, never searched.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from benchmarks.data_value_columns import DEV, MEAN, VS_BACKBONE, mean_of
from benchmarks.data_value_search import Candidate, SeedRun
from tasks.core.sts_evaluation import evaluate_frame
from tasks.train import baselines
from tasks.train.trainer import train

PAPER_SIMCSE = {"lr": 3e-5, "batch_size": 64}  # unsupervised SimCSE (Gao et al., 2021): 1 epoch, best on STS-B dev


def encoder_of(model) -> Callable[[list[str]], np.ndarray]:
    return lambda sentences: model.encode(sentences, batch_size=64, convert_to_numpy=True)


def held_scores(model, held: dict[str, pd.DataFrame]) -> dict[str, float]:
    """The sets never chosen on (SICK trial, STS-B test, the pattern pool), for a row's final chosen weights only."""
    return {name: evaluate_frame(encoder_of(model), frame)["spearman"] for name, frame in held.items()}


def scores_of(model, dev: pd.DataFrame, held: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Every reported set's Spearman ×100 for these (already chosen) weights, and the mean of dev and SICK trial."""
    return with_mean({DEV: evaluate_frame(encoder_of(model), dev)["spearman"]} | held_scores(model, held))


def with_mean(scores: dict) -> dict:
    return scores | {MEAN: float(mean_of(scores))}


def against_backbone(scores: dict, backbone: dict) -> dict:
    """The separate comparison: a trained row − the untrained backbone, on dev, SICK trial and their mean."""
    return {column: scores[s] - backbone[s] for s, column in VS_BACKBONE.items()}


class BestTrained:
    """An `on_eval` hook for tasks.train.trainer.train: keeps the best trained checkpoint on STS-B dev. Step 0 (the
    untrained backbone, which the trainer evaluates on start and would ship when training only hurts dev) is not a
    candidate here. A tie keeps the earlier checkpoint; NaN wins only over nothing."""

    def __init__(self, model):
        self.model, self.step, self.dev, self.weights = model, None, float("nan"), None

    def __call__(self, state, record: dict) -> None:
        step, dev = record["step"], record["dev_spearman"]
        if step <= 0 or not (self.weights is None or dev > self.dev or (math.isnan(self.dev) and not math.isnan(dev))):
            return
        self.step, self.dev = step, dev
        self.weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def load(self) -> None:
        if self.weights is None:
            raise RuntimeError("training evaluated no trained checkpoint on STS-B dev (steps < eval_every?)")
        self.model.load_state_dict(self.weights)
        self.weights = None


def train_candidate(untrained, datas: dict, dev: pd.DataFrame, settings, simcse_dropout: float | None = None
                    ) -> Candidate:
    """Train a fresh copy of `untrained` per seed ({seed: TrainingData}) under `settings`; each copy ends holding
    its best trained checkpoint on dev (BestTrained), whatever the trainer itself would have kept."""
    candidate = Candidate(settings.steps, float(settings.lr), settings.batch_size)
    for seed, data in datas.items():
        model = copy.deepcopy(untrained)
        if simcse_dropout is not None:
            baselines.ensure_dropout(model, simcse_dropout)
        best, t = BestTrained(model), time.perf_counter()
        # model_copy skips TrainSettings' validators on purpose: `hardneg` reads negatives "both" from the NLI run's
        # column, not from mining, which the _mined_negatives_need_mining rule would demand.
        with tempfile.TemporaryDirectory() as work:
            train(model, data, dev, settings.model_copy(update={"seed": seed}), Path(work), on_eval=best)
        seconds = time.perf_counter() - t
        step, best_dev = best.step, best.dev
        best.load()
        candidate.runs[seed] = SeedRun(model, step, best_dev, seconds)
    return candidate


def budget_of(steps: int, settings, **update):
    """The settings of a budget: evaluation every steps/4 (as every row of the harness)."""
    return settings.model_copy(update={"steps": steps, "eval_every": max(steps // 4, 1), **update})


def paper_steps(rows: int, batch_size: int = PAPER_SIMCSE["batch_size"]) -> int:
    """One epoch of the training rows (SimCSE's paper setting) in optimizer steps."""
    return max(1, math.ceil(rows / batch_size))


def backbone_row(scores: dict) -> dict:
    """The untrained backbone as a row of the table: step 0, its scores on every reported set."""
    return {"anchors": 0, "data": "backbone", "seed": None, "rows": 0, "steps": 0, "lr": None, "batch_size": None,
            "best_step": 0, "train_s": 0.0, "search_train_s": 0.0, "budget": "untrained", **scores,
            **{column: 0.0 for column in VS_BACKBONE.values()}}
