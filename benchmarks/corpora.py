"""The benchmark corpus: gensim's default corpus plus the five corpora of ../shared/data/corpora (~207k sentences),
read in place (they exist only on the project's machines and never go into git)."""

from __future__ import annotations

from pathlib import Path

from tasks.core.config import CorpusSettings

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora"
CORPORA = [
    CorpusSettings(),
    CorpusSettings(source=str(SHARED / "abc.zip"), document_split="blank_lines", sentence_per_line=True),
    CorpusSettings(source=str(SHARED / "brown.zip")),
    CorpusSettings(source=str(SHARED / "state_union.zip")),
    CorpusSettings(source=str(SHARED / "inaugural.zip")),
    CorpusSettings(source=str(SHARED / "movie_reviews.zip"), sentence_per_line=True),
]
