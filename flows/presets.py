"""Named sizes for `stsgen run` / `stsgen pipeline` (`--preset`): fields of `sts-pipeline`'s stage settings
(each stage's settings class keeps every other default; a flag given on the command line wins over the preset).

- `quick` (the main job's default): context labels from each sentence's 8 best-fitting of 16 candidate contexts (the
  label stage's defaults, 24 of 32, cost ~2× as much: docs/results.md); the surrogate (all-MiniLM-L6-v2) trained
  200 optimizer steps, every checkpoint (each 50 steps) judged on the full STS-B dev (1,500 pairs encode in seconds),
  so the checkpoint chosen is the one the never-worse guard then compares. The losses are TrainSettings' own, the
  recipe every entry point trains (tasks/train/settings.py: InfoNCE + HT on the triples, CoSENT on the labeled
  pairs' label, the backbone anchor).
  Everything else at the settings' defaults. Wall time per stage: docs/results.md.
- both train the coherence model with its settings' defaults, the model `./stsgen corpus prepare` (flow
  prepare-corpus) builds once per corpus: a run after it reuses it.
- `full`: the settings' defaults (context labels from 24 of 32 candidates) and 400 optimizer steps.
"""

from __future__ import annotations

# Per stage: the settings fields the preset sets (validated when the CLI builds the settings, flows/cli/stages.py).
PRESETS: dict[str, dict[str, dict]] = {
    "quick": {"label": {"contexts_per_sentence": 8, "candidates_per_sentence": 16}, "train": {"steps": 200}},
    "full": {"train": {"steps": 400}},
}
