"""`lr = "auto"`: a learning rate that follows how much data the surrogate trains on.

A scheduled `sts-pipeline` trains on its folder's accumulated dataset, which grows from a first run's ~25 triples to
hundreds. One learning rate does not serve both ends (all-MiniLM-L6-v2, TrainSettings' recipe, 3 seeds each, chosen on
STS-B dev, SICK trial not to fall below the backbone; docs/results.md "An lr that follows the dataset's size"):

| training anchors | lr 3e-5 (dev, SICK trial) | lr 1e-4 (dev, SICK trial) |
|---|---|---|
| 27 (a main job's own data, 100 steps) | +0.30, +0.24 | +0.48, −0.01 (overfits: best step 25 of 100) |
| 80 (200 steps) | +0.44, +0.56 | +0.62, +0.51 |
| 156 (200 steps) | +0.34, +0.50 | +0.57, +0.68 |
| 405 (200 steps) | +0.31, +0.39 | +0.57, +0.34 |

So a small dataset keeps 3e-5 and a large one takes 1e-4. The switch sits at `LARGE_FROM_ANCHORS`, just under the
smallest size where 1e-4 was measured to win (80: dev +0.18 [+0.10, +0.26] over 3e-5 paired by seed, SICK trial
−0.05 [−0.25, +0.15], both above the backbone); the sizes between 27 and 80 are not measured, so it errs on the
gentle side there. Resolved by the train stage once its data is read (tasks/train/stage.py), so the stage key, the
manifest and the model card hold the number used.
"""

from __future__ import annotations

from typing import Literal

SMALL_DATA_LR = 3e-5
LARGE_DATA_LR = 1e-4
LARGE_FROM_ANCHORS = 75

LearningRate = float | Literal["auto"]
LR_DESCRIPTION = (f"Peak learning rate, or 'auto': {SMALL_DATA_LR:g} below {LARGE_FROM_ANCHORS} training anchors, "
                  f"{LARGE_DATA_LR:g} from there (tasks/train/learning_rate.py: measured on the recipe)")


def resolve_lr(setting: LearningRate, anchors: int) -> float:
    """The learning rate for `anchors` training triples: `setting` itself when it is a number."""
    if setting != "auto":
        return float(setting)
    return LARGE_DATA_LR if anchors >= LARGE_FROM_ANCHORS else SMALL_DATA_LR
