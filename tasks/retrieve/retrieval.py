"""Stage 2 work: corpus index on disk, and the per-shard screen → rank → select step.

The unit of CPU work is a shard of query sentences. A shard task receives only paths and plain values, loads the
index and the coherence model from disk once per worker process (lru_cache), and writes its result to a shard
Parquet file — so the same code runs on a thread pool, a process pool or a Dask cluster, and an interrupted run
redoes only the shards it had not finished.
"""

from __future__ import annotations

import functools
import re
import resource
import time
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.contracts import load_trained_cached, sentence_id
from tasks.core.config import ConfigError
from tasks.core.device import scaled_batch
from tasks.core.shards import commit_shard, finished_shard
from tasks.core.store import (
    read_manifest,
    sha256_path,
    verify_outputs,
    write_manifest,
    write_parquet,
)
from tasks.retrieve.contexts import select_diverse
from tasks.retrieve.screening import build_index, top_k
from tasks.retrieve.settings import SelectionSettings

CONTEXTS_SCHEMA = pa.schema([
    ("sentence_id", pa.string()), ("sentence", pa.string()), ("context_id", pa.int64()), ("chunk_id", pa.string()),
    ("doc_id", pa.string()), ("position", pa.int32()), ("left", pa.string()), ("right", pa.string()),
    ("screen_score", pa.float32()), ("coherence_score", pa.float32()), ("rank_score", pa.float32()),
    ("rank", pa.int32()),
])


def combine_scores(coherence: np.ndarray, screen: np.ndarray, screen_weight: float) -> np.ndarray:
    """Per-sentence standardized coherence plus weighted standardized screening score."""
    def z(x: np.ndarray) -> np.ndarray:
        std = x.std()
        return (x - x.mean()) / std if std > 0 else np.zeros_like(x)

    return z(coherence.astype(np.float64)) + screen_weight * z(screen.astype(np.float64))


def build_or_load_index(contexts: pd.DataFrame, folder: Path, settings: SelectionSettings,
                        corpus: dict | None = None) -> bool:
    """Fit the screener over the contexts' text around the gap and save it with the contexts table; `corpus` (the
    inputs and per-source counts) goes into the folder's manifest, with the build time and peak memory. Returns
    whether a verified index was already there (nothing rebuilt)."""
    manifest = read_manifest(folder)
    if manifest and verify_outputs(folder, manifest):
        return True
    if contexts.empty:
        raise ConfigError("The corpus yields no contexts (documents need at least 3 sentences); use a larger corpus.")
    started = time.perf_counter()
    texts = (contexts["left"] + " " + contexts["right"]).tolist()
    index = build_index(texts, settings.screener, (settings.ngram_min, settings.ngram_max), min_df=settings.min_df)
    fit_s = time.perf_counter() - started
    folder.mkdir(parents=True, exist_ok=True)
    joblib.dump(index, folder / "index.joblib")
    digests = {"index.joblib": sha256_path(folder / "index.joblib"),
               "contexts.parquet": write_parquet(folder / "contexts.parquet",
                                                 pa.Table.from_pandas(contexts, preserve_index=False))}
    write_manifest(folder, {"screener": settings.screener, "contexts": len(contexts),
                            "terms": index.matrix.shape[1], "non_zeros": int(index.matrix.nnz),
                            "fit_s": round(fit_s, 2), "build_s": round(time.perf_counter() - started, 2),
                            # the building process's peak resident memory (Linux: kilobytes), loading included
                            "peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                            **(corpus or {})}, digests)
    return False


# The index is a joblib pickle, which names its class's module: a move of that class (tasks.screening →
# tasks.retrieve.screening) makes older pickles unreadable, so the format is part of the index's cache key.
INDEX_FORMAT = "screening-index-v2"


@functools.lru_cache(maxsize=4)
def _load_index(folder: str, digest: str):
    # `digest` is part of the cache key: a rebuilt index at the same path is reloaded.
    contexts = pq.read_table(Path(folder) / "contexts.parquet").to_pandas()
    windows = normalized(contexts["left"] + " " + contexts["centre"] + " " + contexts["right"]).to_numpy()
    return joblib.load(Path(folder) / "index.joblib"), contexts, windows


def normalized(texts: pd.Series) -> pd.Series:
    """Lower case, one space between words: an exact copy matches whatever its case and spacing."""
    # Not decontamination's `normalized`: the punctuation stays, since self_window_mask matches at sentence ends.
    return texts.str.lower().str.split().str.join(" ")


def self_window_mask(sentences: list[str], windows: np.ndarray, cand_idx: np.ndarray) -> np.ndarray:
    """(n_sentences, n_candidates) bool: candidate context c of sentence i has i (or a copy) as one of its window's
    sentences — matched at sentence boundaries, so a sentence that is only the tail of a longer one ("the orchestra
    played." in "… when the orchestra played.") is not a copy. Only the screened candidates are checked, never the
    whole corpus."""
    queries = normalized(pd.Series(sentences, dtype=object)).tolist()
    mask = np.zeros(cand_idx.shape, dtype=bool)
    for i, query in enumerate(queries):
        whole = re.compile(r"(?:^|(?<=[.!?\"')\]] ))" + re.escape(query) + r"(?= |$)")
        valid = np.flatnonzero(cand_idx[i] >= 0)
        mask[i, valid] = [whole.search(w) is not None for w in windows[cand_idx[i, valid]]]
    return mask


class CandidateScorer:
    """Coherence logits of screened candidates. One batched forward pass encodes the sentences and the distinct
    c< / c> texts of all their candidates; each sentence's ranking is then two matrix-vector products. Texts, not
    windows, are encoded once: screening pulls both neighbours of a matching sentence (window j−1's c> and window
    j+1's c< are sentence j), so the distinct texts are ~70 % of the windows' c< and c> (the main job's 108
    sentences: 88,750 of 127,874) — what a frozen encoder's ranking costs."""

    def __init__(self, trained, contexts: pd.DataFrame, sentences: list[str], cand_idx: np.ndarray,
                 max_len: int = 64, device: str = "cpu"):
        self.model = trained.model.to(device)  # rank_logits itself runs in numpy on the encodings
        self.needed = np.unique(cand_idx[cand_idx >= 0])
        batch = scaled_batch(256, torch.device(device))
        encode = lambda texts: trained.encode(texts, max_len, batch, device)  # noqa: E731
        self.sentences = encode(sentences)
        sides = np.concatenate([contexts["left"].to_numpy()[self.needed], contexts["right"].to_numpy()[self.needed]])
        codes, texts = pd.factorize(sides)
        vectors = encode(texts.tolist())
        self.left, self.right = vectors[codes[: len(self.needed)]], vectors[codes[len(self.needed):]]
        self.distinct_texts = len(texts)

    @property
    def texts_encoded(self) -> int:
        return len(self.sentences) + self.distinct_texts

    def logits(self, i: int, idx: np.ndarray) -> np.ndarray:
        """Logits of sentence i against candidate context rows idx."""
        at = np.searchsorted(self.needed, idx)
        return self.model.rank_logits(self.sentences[i], self.left[at], self.right[at])


def retrieve_for_sentences(sentences: list[str], index_dir: Path, coherence_dir: Path, settings: SelectionSettings,
                           exclude: list[np.ndarray] | None = None, max_len: int = 64, device: str = "cpu"
                           ) -> tuple[pd.DataFrame, int]:
    """Screen, rank by coherence and select C_s for each sentence; one row per selected context, and how many
    screened candidates were dropped as windows holding their own sentence."""
    index_manifest, model_manifest = read_manifest(index_dir), read_manifest(coherence_dir)
    index, contexts, windows = _load_index(str(index_dir), index_manifest["outputs"]["index.joblib"]["sha256"])
    trained = load_trained_cached(str(coherence_dir), model_manifest["outputs"]["model.pt"]["sha256"])
    cand_idx, cand_score = top_k(index, sentences, settings.screen_k, exclude=exclude)
    own = self_window_mask(sentences, windows, cand_idx) if settings.exclude_self else np.zeros(cand_idx.shape, bool)
    cand_idx = np.where(own, -1, cand_idx)
    scorer = CandidateScorer(trained, contexts, sentences, cand_idx, max_len, device)
    rows = []
    for i, sentence in enumerate(sentences):
        valid = cand_idx[i] >= 0
        idx, screen = cand_idx[i][valid], cand_score[i][valid]
        if len(idx) == 0:
            continue
        logits = scorer.logits(i, idx)
        combined = combine_scores(logits, screen, settings.screen_weight)
        order = np.lexsort((idx, -combined))
        ranked = contexts.iloc[idx[order]].assign(screen_score=screen[order], coherence_score=logits[order],
                                                  rank_score=combined[order])
        chosen = select_diverse(ranked, settings.contexts_per_sentence, settings.max_jaccard, settings.one_per_chunk)
        rows.append(chosen.assign(sentence_id=sentence_id(sentence), sentence=sentence,
                                  rank=np.arange(len(chosen), dtype=np.int32)))
    if not rows:
        return CONTEXTS_SCHEMA.empty_table().to_pandas(), int(own.sum())
    out = pd.concat(rows, ignore_index=True)
    return out[CONTEXTS_SCHEMA.names].astype({"screen_score": "float32", "coherence_score": "float32",
                                              "rank_score": "float32"}), int(own.sum())


@task(name="retrieve-shard", cache_policy=NO_CACHE, retries=1)
def retrieve_shard(sentences: list[str], index_dir: str, coherence_dir: str, settings: SelectionSettings,
                   out_path: str, device: str = "cpu") -> str:
    """One shard of query sentences → a shard Parquet file (skipped when it already exists and verifies)."""
    if finished_shard(out_path) is not None:
        return out_path
    frame, excluded = retrieve_for_sentences(sentences, Path(index_dir), Path(coherence_dir), settings, device=device)
    commit_shard(out_path, pa.Table.from_pandas(frame, schema=CONTEXTS_SCHEMA, preserve_index=False),
                 {"sentences": len(sentences), "self_windows_excluded": excluded})
    return out_path
