"""Named sizes for `stsgen run` / `stsgen pipeline` (`--preset`): fields of `sts-pipeline`'s stage settings
(each stage's settings class keeps every other default; a flag given on the command line wins over the preset).

- `quick` (the main job's default): context labels from each sentence's 8 best-fitting of 16 candidate contexts (the
  label stage's defaults, 24 of 32, cost ~2× as much: docs/labeling.md); the surrogate (all-MiniLM-L6-v2) trained
  200 optimizer steps (100 batches of triples with InfoNCE + HT, 100 of labeled pairs with the regression,
  round-robin), evaluated on 500 STS-B dev pairs at steps 100 and 200 (~4 min); everything else at the settings'
  defaults. Wall time per stage: docs/benchmarks.md.
- both train the coherence model with its settings' defaults, the model `./stsgen corpus prepare` (flow
  prepare-corpus) builds once per corpus: a run after it reuses it.
- `full`: the settings' defaults (context labels from 24 of 32
  candidates; STS-B dev in full during training), with the regression loss on and 400 optimizer steps (200 of each
  dataset).
"""

from __future__ import annotations

# Per stage: the settings fields the preset sets (validated when the CLI builds the settings, flows/cli/stages.py).
PRESETS: dict[str, dict[str, dict]] = {
    "quick": {"label": {"contexts_per_sentence": 8, "candidates_per_sentence": 16},
              "train": {"steps": 200, "eval_every": 100, "dev_pairs": 500, "losses": {"regression": 1.0}}},
    "full": {"train": {"steps": 400, "eval_every": 100, "losses": {"regression": 1.0}}},
}
