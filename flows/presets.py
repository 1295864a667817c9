"""Named sizes for `stsgen run` / `stsgen pipeline` (`--preset`): parameter overrides for `sts-pipeline`.

- `quick` (the main job's default): the coherence model trained on 10k corpus contexts for one epoch (~3 min on
  2 cores instead of ~11 min); context labels from each sentence's 8 best-fitting of 16 candidate contexts (the
  label stage's defaults, 24 of 32, cost ~2× as much: docs/labeling.md); the surrogate (all-MiniLM-L6-v2) trained
  200 optimizer steps (100 batches of triples with InfoNCE + HT, 100 of labeled pairs with the regression,
  round-robin), evaluated on 500 STS-B dev pairs at steps 100 and 200 (~4 min); everything else at the flows'
  defaults. Wall time per stage: docs/benchmarks.md.
- `full`: the flows' defaults (coherence model on up to 20k contexts, 2 epochs; context labels from 24 of 32
  candidates; STS-B dev in full during training), with the regression loss on and 400 optimizer steps (200 of each
  dataset).
"""

from __future__ import annotations

from tasks.retrieve.coherence import CoherenceSettings
from tasks.train.training import LossSettings, TrainSettings

PRESETS: dict[str, dict] = {
    "quick": {"coherence": CoherenceSettings(max_train_contexts=10_000, epochs=1),
              # LabelSettings fields the preset sets unless a flag gives them (flows/cli/options.label_settings).
              "label": {"contexts_per_sentence": 8, "candidates_per_sentence": 16},
              "train_settings": TrainSettings(steps=200, eval_every=100, dev_pairs=500,
                                              losses=LossSettings(regression=1.0))},
    "full": {"train_settings": TrainSettings(steps=400, eval_every=100, losses=LossSettings(regression=1.0))},
}
