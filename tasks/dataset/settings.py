"""Settings of `build-dataset`: which runs, how near is a duplicate, how near is contamination."""

from __future__ import annotations

from pydantic import Field

from tasks.core.config import Settings
from tasks.core.decontamination import DEFAULT_EVAL_SETS, EVAL_CONTAINMENT, EVAL_NGRAM
from tasks.core.defaults import DEFAULT_ENCODER


class DatasetSettings(Settings):
    """Thresholds were chosen by reading flagged pairs (benchmarks/dataset_build.py, docs/results.md)."""

    # Near-duplicate text: MinHash (datasketch) over character shingles of the normalized anchor — an estimate of
    # Jaccard similarity that finds candidates without comparing every pair (LSH), verified by the exact Jaccard.
    near_duplicate_jaccard: float = Field(0.7, gt=0, le=1, description="Jaccard of character shingles at or above "
                                          "which two anchors are near-duplicates (the later is removed).")
    shingle_chars: int = Field(5, ge=2, le=20, description="Characters per shingle.")
    num_perm: int = Field(128, ge=16, le=1024, description="MinHash permutations.")
    # Paraphrase-level duplicates: the training backbone's own embedding of the anchor (what the surrogate sees).
    paraphrase_cosine: float | None = Field(0.95, gt=0, le=1, description="Encoder cosine at or above which two "
                                            "anchors are paraphrase duplicates (the later is removed); None: no "
                                            "embedding check between anchors.")
    encoder: str = Field(DEFAULT_ENCODER, description="Sentence encoder of the embedding checks (registered "
                         "name or a local sentence-transformers folder).")
    # Decontamination against evaluation sentences.
    eval_sets: list[str] = Field(list(DEFAULT_EVAL_SETS), description="Evaluation sets whose sentences must not "
                                 "enter the data: stsb-dev / stsb-test, a SICK file, a SemEval STS folder, an STS-B "
                                 "layout .tsv/.csv, a Parquet with sentence columns, or a text file (one per line).")
    eval_ngram: int = Field(EVAL_NGRAM, ge=1, le=13, description="Word n-gram size of the overlap check.")
    eval_containment: float = Field(EVAL_CONTAINMENT, gt=0, le=1, description="Share of an evaluation sentence's word n-grams "
                                    "found in a dataset sentence at or above which it is contaminated.")
    eval_cosine: float | None = Field(0.9, gt=0, le=1, description="Encoder cosine between an anchor and an "
                                      "evaluation sentence at or above which the anchor is contaminated; None: the "
                                      "n-gram check alone.")
    @property
    def uses_encoder(self) -> bool:
        """Whether any check needs the encoder's vectors."""
        return self.paraphrase_cosine is not None or self.eval_cosine is not None

    allow_mixed: bool = Field(False, description="Allow runs made with different patterns (STS and NLI) in one "
                              "dataset.")
