"""Named sizes for `stsgen run` / `stsgen pipeline` (`--preset`): parameter overrides for `sts-pipeline`.

- `quick` (the main job's default): the coherence model trained on 10k corpus contexts for one epoch (~3 min on
  2 cores instead of ~11 min); the surrogate (all-MiniLM-L6-v2) trained 100 steps with InfoNCE + HT + context-label
  regression, evaluated on 500 STS-B dev pairs during training (~4 min); everything else at the flows' defaults.
  About 20 min on 2 cores from a fresh machine, setup included.
- `full`: the flows' defaults (coherence model on up to 20k contexts, 2 epochs; 200 training steps on all of
  STS-B dev), with the regression loss on.
"""

from __future__ import annotations

from tasks.coherence import CoherenceSettings
from tasks.training import LossSettings, TrainSettings

PRESETS: dict[str, dict] = {
    "quick": {"coherence": CoherenceSettings(max_train_contexts=10_000, epochs=1),
              "train_settings": TrainSettings(steps=100, eval_every=50, dev_pairs=500,
                                              losses=LossSettings(regression=1.0))},
    "full": {"train_settings": TrainSettings(losses=LossSettings(regression=1.0))},
}
