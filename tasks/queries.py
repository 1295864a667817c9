"""Query sentences for stage 2: every sentence of every triple, or any Parquet / text file of sentences."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from tasks.config import ConfigError
from tasks.corpus import sentence_id

TRIPLE_COLUMNS = ("anchor", "positive", "intermediate", "negative")
PAIR_COLUMNS = (("s1", "s2"), ("sentence1", "sentence2"))


def load_query_sentences(path: Path) -> pd.DataFrame:
    """→ sentence_id, sentence (distinct, in first-seen order) from triples, pairs (s1/s2 or sentence1/sentence2),
    a sentence/text column, or lines of text."""
    if not path.exists():
        raise ConfigError(f"Sentence file {path} does not exist; pass a triples.parquet or a sentence file.")
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise ConfigError(f"{path} is not readable Parquet ({type(exc).__name__}).") from None
        cols = [c for c in TRIPLE_COLUMNS if c in table.column_names]
        cols = cols or next(([a, b] for a, b in PAIR_COLUMNS if {a, b} <= set(table.column_names)), [])
        if not cols:
            cols = [c for c in ("sentence", "text") if c in table.column_names][:1]
        if not cols:
            raise ConfigError(f"{path} has none of the columns {', '.join(TRIPLE_COLUMNS)}, s1/s2, "
                              f"sentence1/sentence2, sentence, text (found: {', '.join(table.column_names)}).")
        texts = [t for c in cols for t in table.column(c).to_pylist()]
    else:
        try:
            texts = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start}); convert it or pass Parquet.") from None
    texts = list(dict.fromkeys(t.strip() for t in texts if isinstance(t, str) and t.strip()))
    if not texts:
        raise ConfigError(f"{path} holds no sentences.")
    return pd.DataFrame({"sentence_id": [sentence_id(t) for t in texts], "sentence": texts})
