"""build-dataset's evaluation sets, in every form it takes: the STS ones (tasks/core/decontamination.py reads those) and
sentence lists — a Parquet with sentence columns or a text file, one sentence per line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.contracts import load_query_sentences
from tasks.core.config import ConfigError
from tasks.core.decontamination import EvalSentences, collect_eval_sentences, sts_eval_frame


def eval_frame(source: str) -> tuple[pd.DataFrame, str]:
    """(frame with s1, s2 — or sentence — columns, label) of one evaluation set."""
    path = Path(source)
    if source in ("stsb-dev", "stsb-test"):
        return sts_eval_frame(source)
    if not path.exists():
        raise ConfigError(f"Evaluation set {source}: no such file or folder (give stsb-dev, stsb-test, a SICK file, a "
                          "SemEval STS folder, a .tsv/.csv in STS-B layout, a Parquet or a text file).")
    if path.is_dir() or path.suffix.lower() in (".tsv", ".csv"):
        return sts_eval_frame(source)
    if path.suffix.lower() != ".parquet":  # a text file: a SICK file by its header, else one sentence per line
        try:
            with path.open(encoding="utf-8") as handle:
                first = handle.readline()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"Evaluation set {path} cannot be read as UTF-8 text ({type(exc).__name__}): convert "
                              "it, or pass Parquet.") from None
        if "sentence_A" in first:
            return sts_eval_frame(source)
    return load_query_sentences(path)[["sentence"]], path.name


def load_eval_sentences(sources: list[str]) -> EvalSentences:
    """Every evaluation set read (a bad one fails here, before the build writes anything), sentences deduplicated."""
    return collect_eval_sentences(sources, eval_frame)
