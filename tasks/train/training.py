"""Stage-4 training data and its held-out split, and the state a training run reports (the settings:
tasks/train/settings.py). The training itself is `tasks/train/trainer.py` (SentenceTransformerTrainer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# The settings live in tasks/train/settings.py; re-exported here for the callers that import them from training.
from tasks.train.settings import LossSettings, TrainSettings  # noqa: E402,F401


@dataclass
class TrainingData:
    triples: pd.DataFrame  # anchor, positive, intermediate (may be null), negative
    pairs: pd.DataFrame  # s1, s2, label (cosine scale)
    heldout: pd.DataFrame  # held-out triples: their (anchor, positive) pairs measure alignment / uniformity


@dataclass
class TrainState:
    step: int = 0
    history: list[dict] = field(default_factory=list)
    best_step: int | None = None
    best_dev: float = float("-inf")


def split_data(triples: pd.DataFrame, pairs: pd.DataFrame, fraction: float, seed: int) -> TrainingData:
    order = np.random.default_rng(seed).permutation(len(triples))
    n_held = int(round(len(triples) * fraction))
    held, train = triples.iloc[np.sort(order[:n_held])], triples.iloc[np.sort(order[n_held:])]
    # Pairs derived from held-out triples stay out of training too.
    held_ids = set(held.get("source_id", pd.Series(dtype=str)))
    if "triple_id" in pairs and held_ids:
        pairs = pairs[~pairs["triple_id"].isin(held_ids) & ~pairs.get("other_triple_id", pairs["triple_id"]).isin(
            held_ids)]
    return TrainingData(train.reset_index(drop=True), pairs.reset_index(drop=True), held.reset_index(drop=True))
