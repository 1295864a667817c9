"""A corpus prepared for stage 2 once: its sentence table, context windows, screening index and coherence model, each
keyed by the corpus's content hash (and the settings that shape it) under $STSGEN_HOME, reused by every later run.

`prepare_corpus` is what both the `prepare-corpus` flow (run it on a schedule, or once after setup) and stage 2's
`prepare_retrieval` call: whichever runs first builds, the other finds everything built. The index folder's manifest
is the corpus manifest: the inputs with their sha256, documents / sentences / usable per source with its licence,
and how long the index took to build and how much memory it peaked at.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tasks.contracts import TrainedCoherence
from tasks.core.config import CorpusSettings
from tasks.core.home import stsgen_home
from tasks.core.store import fingerprint, read_manifest
from tasks.corpus.registry import named_sources
from tasks.corpus.sentences import load_corpus
from tasks.retrieve.coherence import train_or_load
from tasks.retrieve.contexts import context_windows
from tasks.retrieve.retrieval import INDEX_FORMAT, build_or_load_index
from tasks.retrieve.settings import RetrieveSettings


@dataclass
class PreparedCorpus:
    sentences: pd.DataFrame  # source, doc_id, position, text (every corpus, doc ids prefixed by its label)
    contexts: pd.DataFrame
    inputs: list[dict]
    stats: dict  # per corpus label: load_corpus's stats (its `sources` table included)
    corpus_key: str
    index_dir: Path
    index_reused: bool
    trained: TrainedCoherence
    timings: dict[str, float]

    @property
    def index_manifest(self) -> dict:
        return read_manifest(self.index_dir) or {}


def corpus_label(settings: CorpusSettings) -> str:
    """A named source keeps its name ("default", "bbc+news2017"); a path is labeled by its file or folder name."""
    return settings.source if named_sources(settings.source) else Path(settings.source).name


def load_corpora(corpora: list[CorpusSettings]) -> tuple[pd.DataFrame, list[dict], dict]:
    """All sources as one sentence table; doc ids are prefixed with the corpus's label so they never collide."""
    frames, inputs, stats = [], [], {}
    for settings in corpora:
        corpus = load_corpus(settings)
        label = corpus_label(settings)
        frames.append(corpus.sentences.assign(doc_id=label + "/" + corpus.sentences["doc_id"]))
        inputs += corpus.inputs
        stats[label] = corpus.stats
    columns = ["source", "doc_id", "position", "text"]
    return pd.concat(frames, ignore_index=True)[columns], inputs, stats


def prepare_corpus(settings: RetrieveSettings, default: CorpusSettings | None = None) -> PreparedCorpus:
    """Load the corpora (settings.corpora, else `default`, else the default corpus), cut the context windows, and
    build or reuse the screening index and the coherence model."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    corpora = settings.corpora_or(default or CorpusSettings())
    sentences, inputs, stats = load_corpora(corpora)
    contexts = context_windows(sentences, settings.window_k, settings.chunk_size)
    timings["load_s"] = round(time.perf_counter() - t0, 3)
    # The sentence table's content is in the key, not only the input files': a reader's or the splitter's change
    # (same archives, other sentences) must not reuse an index whose rows no longer match the contexts.
    content = hashlib.sha256(pd.util.hash_pandas_object(sentences, index=False).to_numpy().tobytes()).hexdigest()
    corpus_key = fingerprint({"inputs": [i["sha256"] for i in inputs], "corpora": [c.model_dump() for c in corpora],
                              "sentences": content, "k": settings.window_k, "chunk_size": settings.chunk_size})
    selection = settings.selection
    index_key = fingerprint({"corpus": corpus_key, "screener": selection.screener, "format": INDEX_FORMAT,
                             "ngram": [selection.ngram_min, selection.ngram_max], "min_df": selection.min_df})
    t1 = time.perf_counter()
    index_dir = stsgen_home() / "index" / index_key[:32]
    index_reused = build_or_load_index(contexts, index_dir, selection,
                                       corpus={"inputs": inputs, "corpora": stats, "corpus_key": corpus_key})
    timings["index_s"] = round(time.perf_counter() - t1, 3)
    t2 = time.perf_counter()
    trained = train_or_load(contexts, sentences, corpus_key, settings.coherence, settings.window_k)
    timings["coherence_s"] = round(time.perf_counter() - t2, 3)
    return PreparedCorpus(sentences, contexts, inputs, stats, corpus_key, index_dir, index_reused, trained, timings)


def source_rows(stats: dict) -> list[dict]:
    """One row per source of every corpus: the per-source table of the corpus manifest and the dataset cards."""
    rows = []
    for label, corpus in stats.items():
        for name, entry in (corpus.get("sources") or {}).items():
            rows.append({"corpus": label, "source": name, "documents": entry["documents"],
                         "sentences": entry["sentences"], "usable": entry["usable"],
                         "unique_usable": entry["unique_usable"], "licence": entry.get("licence", "the user's"),
                         "package": entry.get("package", "a local file")})
    return rows


def summary(prepared: PreparedCorpus) -> dict:
    """What the prepare-corpus flow returns and reports: where everything is, sizes, quality, time and memory."""
    index, held = prepared.index_manifest, prepared.trained.metrics["heldout"]
    return {"corpus_key": prepared.corpus_key, "index": str(prepared.index_dir),
            "coherence_model": str(prepared.trained.folder), "index_reused": prepared.index_reused,
            "coherence_reused": prepared.trained.reused, "sentences": len(prepared.sentences),
            "contexts": len(prepared.contexts),
            "unique_usable": sum(c.get("unique_usable", 0) for c in prepared.stats.values()),
            "index_terms": index.get("terms"), "index_build_s": index.get("build_s"),
            "index_peak_memory_mb": index.get("peak_memory_mb"),
            "coherence_train_examples": prepared.trained.metrics["train_examples"],
            "coherence_roc_auc": held["roc_auc"], "coherence_roc_auc_same_document": held["roc_auc_same_document"],
            "coherence_roc_auc_random": held["roc_auc_random"], "timings": prepared.timings,
            "sources": source_rows(prepared.stats)}
