"""The STS evaluation protocol, for any encoder given as `encode(sentences) -> (N, D) array`: Spearman ×100 of
cosine vs gold on each set — STS-B dev / test, SemEval STS12–16 folders in SentEval's "all" setting (one Spearman
over all subsets concatenated; per-subset values reported beside it), SICK-R."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from models.embedding_metrics import sts_spearman
from tasks.core.sts_data import read_sts_source

Encode = Callable[[list[str]], np.ndarray]


def evaluate_frame(encode: Encode, frame: pd.DataFrame) -> dict:
    e1, e2 = encode(frame["s1"].tolist()), encode(frame["s2"].tolist())
    out = {"pairs": len(frame), "spearman": round(sts_spearman(e1, e2, frame["gold"].to_numpy()), 2)}
    subsets = frame["subset"].unique() if "subset" in frame else []
    if len(subsets) > 1:
        out["subsets"] = {str(s): round(sts_spearman(e1[m], e2[m], frame["gold"].to_numpy()[m]), 2)
                          for s in subsets for m in [(frame["subset"] == s).to_numpy()]}
    return out


def evaluate_sources(encode: Encode, sources: list[str]) -> dict[str, dict]:
    """{source: {"pairs", "spearman"[, "subsets"]}} for `stsb-dev`, `stsb-test` and any paths given; a source named
    twice is evaluated once."""
    return {source: evaluate_frame(encode, read_sts_source(source)) for source in dict.fromkeys(sources)}
