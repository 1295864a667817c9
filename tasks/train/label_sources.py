"""Which label the pairs' regression trains on (TrainSettings.label_source): stage 3's `label` (its default mix),
the LLM `rating` alone (0–5, read as rating / 5), `context_label` alone (Sun et al. 2022's context-vector label), or
an encoder teacher's cosine (`teacher`: tasks/llm/teacher.py, the AugSBERT recipe). The chosen values replace the
`label` column the regression losses read (tasks/train/trainer.py); everything else about training stays the same,
so the label sources compare row for row (benchmarks/data_value.py --data pairs:SOURCE).

Input: label-pairs' pairs.parquet (or a dataset version's): s1, s2, label and the source's column. Output: the same
rows with `label` set from the source (`teacher_label` added for the teacher).
"""

from __future__ import annotations

from typing import Literal

import pandas as pd

from tasks.core.config import ConfigError

LabelSource = Literal["label", "rating", "context_label", "teacher"]
RATING_MAX = 5.0  # the rating's STS scale (0–5): divided by it onto the cosine scale


def regression_targets(pairs: pd.DataFrame, source: str, teacher: str, device: str = "cpu",
                       pairs_file: str = "pairs") -> tuple[pd.DataFrame, dict | None]:
    """(pairs with `label` from `source`, the teacher's provenance or None). A clear error when the pairs lack the
    source's column; the teacher's labels are computed once per pairs content (cached)."""
    if source == "label" or not len(pairs):
        return pairs, None
    if source == "teacher":
        from tasks.llm.teacher import TEACHER_COLUMN, teacher_labels

        labels, identity = teacher_labels(pairs, teacher, device)
        return pairs.assign(**{TEACHER_COLUMN: labels, "label": labels}), identity
    if source not in pairs:
        raise ConfigError(f"{pairs_file}: label_source '{source}' needs a '{source}' column, which these pairs lack "
                          f"(found: {', '.join(pairs.columns)}); pass a pairs.parquet written by label-pairs with "
                          "its default labeler, or set label_source to 'label' or 'teacher'.")
    values = pd.to_numeric(pairs[source], errors="coerce")
    if values.isna().any():  # label-pairs writes the column for every method, empty where the method skips it
        raise ConfigError(f"{pairs_file}: label_source '{source}' needs a value in every row, and "
                          f"{int(values.isna().sum())} of {len(values)} are empty (label-pairs fills '{source}' only "
                          f"with label.method={'combined or llm_rating' if source == 'rating' else 'combined or context'}"
                          "): label the pairs with such a method, or choose another label_source.")
    return pairs.assign(label=values / RATING_MAX if source == "rating" else values), None
