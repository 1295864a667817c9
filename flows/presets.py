"""Named sizes for `stsgen run` / `stsgen pipeline` (`--preset`): parameter overrides for `sts-pipeline`.

- `quick` (the main job's default): the coherence model trained on 10k corpus contexts for one epoch (~2–3 min on
  2 cores instead of ~11 min); everything else at the flows' defaults.
- `full`: the flows' defaults (coherence model on up to 20k contexts, 2 epochs).
"""

from __future__ import annotations

from tasks.coherence import CoherenceSettings

PRESETS: dict[str, dict] = {
    "quick": {"coherence": CoherenceSettings(max_train_contexts=10_000, epochs=1)},
    "full": {},
}
