"""Flow `retrieve-contexts`: stage 2, context sets C_s for every sentence (seed 003, §3.3).

corpus documents → sentences → context windows (c<, c>) → screening index (TF-IDF bigrams or BM25)
                                               └→ coherence model (BiLSTM, trained on the corpus or reused)
query sentences (every sentence of every triple, or any sentence file) → shards → screen top-K → rank by coherence
→ greedy diverse selection → `<output_dir>/retrieve-contexts/contexts.parquet` + manifest.json.
Shards run on a thread pool (default), a process pool, or a Dask cluster (`dask_address`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.contracts import load_query_sentences
from tasks.core.artifacts import Progress, publish_links, publish_markdown, publish_table
from tasks.core.config import CorpusSettings, stsgen_home
from tasks.core.corpus import load_corpus
from tasks.core.device import device_info, resolve_device
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runners import runner_kind, task_runner
from tasks.core.runs import run_scoped
from tasks.core.store import fingerprint, outputs_current, read_manifest, sha256_path, write_manifest, write_parquet
from tasks.retrieve.coherence import CoherenceSettings, train_or_load
from tasks.retrieve.contexts import context_windows
from tasks.retrieve.retrieval import (
    CONTEXTS_SCHEMA,
    INDEX_FORMAT,
    SelectionSettings,
    build_or_load_index,
    retrieve_shard,
)

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed

STAGE = "retrieve-contexts"


def load_corpora(corpora: list[CorpusSettings]) -> tuple[pd.DataFrame, list[dict], dict]:
    """All sources as one sentence table; doc ids are prefixed with the source so they never collide."""
    frames, inputs, stats = [], [], {}
    for settings in corpora:
        corpus = load_corpus(settings)
        label = "default" if settings.source == "default" else Path(settings.source).name
        frames.append(corpus.sentences.assign(doc_id=label + "/" + corpus.sentences["doc_id"]))
        inputs += corpus.inputs
        stats[label] = corpus.stats
    return pd.concat(frames, ignore_index=True)[["doc_id", "position", "text"]], inputs, stats


@task(name="prepare-corpus-index", cache_policy=NO_CACHE)
def prepare_index(corpora: list[CorpusSettings], window_k: int, chunk_size: int, selection: SelectionSettings
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], dict, str, Path]:
    sentences, inputs, stats = load_corpora(corpora)
    contexts = context_windows(sentences, window_k, chunk_size)
    corpus_key = fingerprint({"inputs": [i["sha256"] for i in inputs], "corpora": [c.model_dump() for c in corpora],
                              "k": window_k, "chunk_size": chunk_size})
    index_key = fingerprint({"corpus": corpus_key, "screener": selection.screener, "format": INDEX_FORMAT,
                             "ngram": [selection.ngram_min, selection.ngram_max]})
    index_dir = build_or_load_index(contexts, stsgen_home() / "index" / index_key[:32], selection)
    return sentences, contexts, inputs, stats, corpus_key, index_dir


@task(name="train-coherence-model", cache_policy=NO_CACHE)
def coherence_task(contexts: pd.DataFrame, sentences: pd.DataFrame, corpus_key: str, settings: CoherenceSettings,
                   window_k: int):
    trained = train_or_load(contexts, sentences, corpus_key, settings, window_k)
    held = trained.metrics["heldout"]
    publish_markdown(
        "coherence-model",
        "# Coherence model (BiLSTM, held-out documents)\n\n| metric | value |\n|---|---|\n"
        f"| accuracy | {held['accuracy']:.3f} |\n| ROC AUC | {held['roc_auc']:.3f} |\n"
        f"| ROC AUC vs same-document negatives | {held['roc_auc_same_document']:.3f} |\n"
        f"| ROC AUC vs random negatives | {held['roc_auc_random']:.3f} |\n| held-out examples | {held['examples']} |\n"
        f"| training examples | {trained.metrics['train_examples']} |\n| reused | {trained.reused} |\n"
        f"| model folder | `{trained.folder}` |\n",
        "Coherence model quality",
    )
    return trained


@flow(name=STAGE, log_prints=True)
@run_scoped
def retrieve_contexts(
    sentences: str,
    corpora: list[CorpusSettings] | None = None,
    window_k: int = 1,
    chunk_size: int = 0,
    selection: SelectionSettings | None = None,
    coherence: CoherenceSettings | None = None,
    shard_size: int = 256,
    workers: Literal["threads", "processes", "dask"] = "threads",
    max_workers: int = 2,
    dask_address: str | None = None,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, str]:
    """Context sets for every sentence of `sentences` (a triples.parquet, a Parquet with a `sentence`/`text`
    column, or a text file with one sentence per line). Returns output paths."""
    logger = get_run_logger()
    corpora = corpora or [CorpusSettings()]
    selection = selection or SelectionSettings()
    coherence = coherence or CoherenceSettings()
    device = resolve_device(coherence.device)  # an unavailable GPU fails here, before any work
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    queries = load_query_sentences(Path(sentences))
    sentences_, contexts, inputs, corpus_stats, corpus_key, index_dir = prepare_index(corpora, window_k, chunk_size,
                                                                                     selection)
    if len(contexts) < selection.screen_k:
        logger.warning("The corpus has %d contexts, fewer than screen_k=%d: every context is a candidate.",
                       len(contexts), selection.screen_k)
    timings["index_s"] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    trained = coherence_task(contexts, sentences_, corpus_key, coherence, window_k)
    timings["coherence_s"] = round(time.perf_counter() - t1, 3)

    query_hash = sha256_path(Path(sentences))
    inputs = [{"path": str(sentences), "sha256": query_hash, "role": "sentences"}, *inputs]
    key = fingerprint({"stage": STAGE, "queries": query_hash, "corpus": corpus_key, "model": trained.key,
                       "selection": selection.model_dump(), "k": window_k})
    folder = Path(output_dir) / STAGE
    paths = {"contexts": str(folder / "contexts.parquet"), "rejected": str(folder / "rejected.parquet"),
             "manifest": str(folder / "manifest.json")}
    if outputs_current(folder, key):
        logger.info("Inputs and parameters unchanged: reusing %s", folder)
        return paths

    # Shards are keyed by the stage key and their sentences: a re-run skips the shards already written.
    shard_dir = folder / ".shards" / key[:16]
    texts = queries["sentence"].tolist()
    shards = [texts[i : i + shard_size] for i in range(0, len(texts), shard_size)]
    progress = Progress("retrieve", len(shards), f"{len(texts)} sentences in {len(shards)} shards")
    t2 = time.perf_counter()
    shard_paths = []
    with task_runner(workers, dask_address, max_workers) as runner:
        futures = [runner.submit(retrieve_shard, parameters={
            "sentences": shard, "index_dir": str(index_dir), "coherence_dir": str(trained.folder),
            "settings": selection, "out_path": str(shard_dir / f"{fingerprint(shard)[:16]}.parquet"),
            "device": str(device)})
            for shard in shards]
        for future in futures:
            shard_paths.append(future.result())
            progress.advance(1)
    timings["retrieve_s"] = round(time.perf_counter() - t2, 3)

    table = pa.concat_tables([pq.read_table(p, schema=CONTEXTS_SCHEMA) for p in shard_paths]) if shard_paths \
        else CONTEXTS_SCHEMA.empty_table()
    per_sentence = table.group_by("sentence_id").aggregate([("context_id", "count")]).to_pandas()
    counts_by_id = dict(zip(per_sentence["sentence_id"], per_sentence["context_id_count"]))
    missing = queries[~queries["sentence_id"].isin(counts_by_id)]
    rejected = pa.Table.from_pandas(missing.assign(reason="no_screening_match",
                                                   detail="no corpus context shares a term with the sentence"),
                                    preserve_index=False)
    folder.mkdir(parents=True, exist_ok=True)
    digests = {"contexts.parquet": write_parquet(folder / "contexts.parquet", table),
               "rejected.parquet": write_parquet(folder / "rejected.parquet", rejected)}
    sizes = list(counts_by_id.values())
    counts = {"sentences": len(queries), "with_contexts": len(counts_by_id), "without_contexts": len(missing),
              "contexts_rows": table.num_rows, "corpus_contexts": len(contexts),
              "mean_contexts_per_sentence": float(sum(sizes) / len(sizes)) if sizes else 0.0,
              "below_target": int(sum(s < selection.contexts_per_sentence for s in sizes)), "corpus": corpus_stats}
    timings["total_s"] = round(time.perf_counter() - t0, 3)
    write_manifest(folder, {
        "stage": STAGE, "cache_key": key, "inputs": inputs,
        "parameters": {"window_k": window_k, "chunk_size": chunk_size, "selection": selection.model_dump(),
                       "coherence": coherence.model_dump(), "device": device_info(device), "shard_size": shard_size,
                       "workers": runner_kind(workers, dask_address)},
        "coherence_model": {"key": trained.key, "folder": str(trained.folder), "metrics": trained.metrics,
                            "sha256": read_manifest(trained.folder)["outputs"]["model.pt"]["sha256"]},
        "index": str(index_dir), "counts": counts, "timings": timings,
    }, digests)
    publish_markdown("retrieve-summary", "\n".join([
        f"# retrieve-contexts — {counts['with_contexts']}/{counts['sentences']} sentences with contexts", "",
        f"- corpus: {len(sentences_)} sentences, {len(contexts)} contexts; screener {selection.screener}, "
        f"top-{selection.screen_k}, |C_s| ≤ {selection.contexts_per_sentence}",
        f"- mean |C_s| = {counts['mean_contexts_per_sentence']:.1f}; {counts['below_target']} below target; "
        f"{counts['without_contexts']} without any (in rejected.parquet)",
        f"- coherence model: held-out acc {trained.metrics['heldout']['accuracy']:.3f}, "
        f"AUC {trained.metrics['heldout']['roc_auc']:.3f} ({'reused' if trained.reused else 'trained'})",
        "- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()),
    ]), "Stage 2 summary")
    sample = table.slice(0, 10).select(["sentence", "left", "right", "screen_score", "coherence_score", "rank"])
    publish_table("retrieve-samples", sample.to_pylist(), "Sample contexts")
    publish_links("retrieve", {name: folder / name for name in (*digests, "manifest.json")}, "Stage 2 outputs")
    print(f"{counts['with_contexts']}/{counts['sentences']} sentences with contexts → {folder}")
    return paths
