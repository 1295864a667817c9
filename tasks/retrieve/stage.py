"""Stage 2, `retrieve-contexts`: context sets C_s for every sentence (Sun et al. 2022, §3.3), in the stage outline
(tasks.core.stage).

corpus documents → sentences → context windows (c<, c>) → screening index (TF-IDF bigrams or BM25)
                                               └→ coherence model (a frozen encoder's head, or a BiLSTM; fit on
                                                  the corpus once, then reused)
query sentences → shards → screen top-K → rank by coherence → greedy diverse selection → contexts.parquet, and the
sentences without any context in rejected.parquet. `prepare_retrieval` builds (or reuses) the index and the model;
`retrieve_all` runs the shards and writes the outputs; `publish_retrieval` creates the artifacts.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.contracts import TRIPLE_SLOTS, StageIO, TrainedCoherence, load_query_sentences
from tasks.core.artifacts import Progress, publish_links, publish_markdown, publish_table
from tasks.core.config import CorpusSettings, LLMSettings
from tasks.core.device import device_info, resolve_device
from tasks.core.runners import map_shards, runner_kind
from tasks.core.shards import finished_shard
from tasks.core.stage import StageFolder, run_logger, stage_key
from tasks.core.store import fingerprint, read_manifest, sha256_path
from tasks.llm.client import model_identity
from tasks.llm.cost import llm_cost, prices_of
from tasks.llm.endpoint import check_endpoint
from tasks.retrieve.generated_contexts import (
    PARSER_VERSION,
    ContextSourceSettings,
    generate_contexts,
    interleave,
    writer_template,
)
from tasks.retrieve.prepared_corpus import PreparedCorpus, prepare_corpus
from tasks.retrieve.retrieval import CONTEXTS_SCHEMA, SelectionSettings, retrieve_shard
from tasks.retrieve.settings import RetrieveSettings

STAGE = "retrieve-contexts"
RETRIEVE_THREADS = 2  # shards at once on a thread pool: screening and ranking release the GIL in numpy / torch
# A sentence without any context, and with written contexts every rejected answer (its reason and raw text).
REJECTED_SCHEMA = pa.schema([("sentence_id", pa.string()), ("sentence", pa.string()), ("reason", pa.string()),
                             ("detail", pa.string())])
# Any sentences file works (pairs, text); from the pipeline it is stage 1's triples.
IO = StageIO(reads={"generate-sts-triples/triples.parquet": TRIPLE_SLOTS},
             writes={"contexts.parquet": tuple(CONTEXTS_SCHEMA.names), "rejected.parquet": tuple(REJECTED_SCHEMA.names)})


@task(name="prepare-corpus", cache_policy=NO_CACHE)
def prepare_corpus_task(settings: RetrieveSettings, default: CorpusSettings | None = None) -> PreparedCorpus:
    """The corpus's sentence table, context windows, screening index and coherence model: built once per corpus
    content (and the settings that shape them), then reused (tasks/retrieve/prepared_corpus.py)."""
    prepared = prepare_corpus(settings, default)
    publish_coherence(prepared.trained)
    return prepared


def publish_coherence(trained: TrainedCoherence) -> None:
    held = trained.metrics["heldout"]
    publish_markdown(
        "coherence-model",
        f"# Coherence model ({'frozen ' + trained.encoder if trained.encoder else 'BiLSTM'}, held-out documents)\n\n"
        "| metric | value |\n|---|---|\n"
        f"| accuracy | {held['accuracy']:.3f} |\n| ROC AUC | {held['roc_auc']:.3f} |\n"
        f"| ROC AUC vs same-document negatives | {held['roc_auc_same_document']:.3f} |\n"
        f"| ROC AUC vs random negatives | {held['roc_auc_random']:.3f} |\n| held-out examples | {held['examples']} |\n"
        f"| training examples | {trained.metrics['train_examples']} |\n| reused | {trained.reused} |\n"
        f"| model folder | `{trained.folder}` |\n",
        "Coherence model quality",
    )


def publish_prepared(report: dict) -> None:
    """The prepare-corpus flow's artifacts: the per-source table and a summary of the index and coherence model."""
    publish_table("corpus-sources", report["sources"], "Corpus: documents, sentences and usable sentences per source")
    publish_markdown("corpus-prepared", "\n".join([
        f"# Corpus prepared — {report['sentences']} sentences, {report['unique_usable']} unique usable", "",
        f"- contexts: {report['contexts']}; screening index: {report['index_terms']} terms, built in "
        f"{report['index_build_s']} s, peak memory {report['index_peak_memory_mb']} MB "
        f"({'reused' if report['index_reused'] else 'built now'})",
        f"- coherence model: {report['coherence_train_examples']} training examples, held-out ROC AUC "
        f"{report['coherence_roc_auc']:.3f} (same-document {report['coherence_roc_auc_same_document']:.3f}, random "
        f"{report['coherence_roc_auc_random']:.3f}) ({'reused' if report['coherence_reused'] else 'trained now'})",
        "- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in report["timings"].items()),
    ]), "Prepared corpus")
    run_logger().info("corpus prepared: %d sentences, index %s, coherence model %s", report["sentences"],
                      report["index"], report["coherence_model"])


@dataclass
class RetrievalJob:
    """Stage 2's inputs, ready: the query sentences, the corpus's contexts, its screening index and coherence model."""

    sentences_path: Path
    queries: pd.DataFrame  # sentence_id, sentence
    corpus_sentences: pd.DataFrame
    contexts: pd.DataFrame
    corpus_inputs: list[dict]
    corpus_stats: dict
    corpus_key: str
    index_dir: Path
    trained: TrainedCoherence
    settings: RetrieveSettings
    timings: dict[str, float]
    llm: LLMSettings | None  # the endpoint that writes contexts (source generated / both)
    device: Any = None  # the coherence model's torch device (settings.coherence.device, resolved)

    @property
    def selection(self) -> SelectionSettings:
        return self.settings.selection

    @property
    def source(self) -> ContextSourceSettings:
        return self.settings.source

    @property
    def window_k(self) -> int:
        return self.settings.window_k

    @functools.cached_property
    def inputs(self) -> list[dict]:
        query = {"path": str(self.sentences_path), "sha256": sha256_path(self.sentences_path), "role": "sentences"}
        return [query, *self.corpus_inputs]

    def key(self) -> str:
        # A writer is identified by its model and checksum, not its URL (as the label stage's rater).
        writer = {"source": self.source, **model_identity(self.llm), "prompt": writer_template().sha256,
                  "parser": PARSER_VERSION} if self.source.generates else None
        return stage_key(STAGE, queries=self.inputs[0]["sha256"], corpus=self.corpus_key, model=self.trained.key,
                         selection=self.selection, k=self.window_k, **({"writer": writer} if writer else {}))


def prepare_retrieval(sentences: str, settings: RetrieveSettings, llm: LLMSettings | None = None) -> RetrievalJob:
    """Read the query sentences, split the corpora into contexts, build (or reuse) the screening index and train (or
    reuse) the coherence model: what the stage key is computed from."""
    t0 = time.perf_counter()
    device = resolve_device(settings.coherence.device)  # an unavailable GPU fails here, before any work
    llm = (llm or LLMSettings()) if settings.source.generates else None
    if llm is not None:
        check_endpoint(llm)  # before any work: unreachable endpoint, unknown model, bad key
    queries = load_query_sentences(Path(sentences))
    prepared = prepare_corpus_task(settings)
    if len(prepared.contexts) < settings.selection.screen_k:
        run_logger().warning("The corpus has %d contexts, fewer than screen_k=%d: every context is a candidate.",
                             len(prepared.contexts), settings.selection.screen_k)
    timings = {**prepared.timings, "prepare_s": round(time.perf_counter() - t0, 3)}
    return RetrievalJob(Path(sentences), queries, prepared.sentences, prepared.contexts, prepared.inputs,
                        prepared.stats, prepared.corpus_key, prepared.index_dir, prepared.trained, settings, timings,
                        llm, device)


def retrieve_all(job: RetrievalJob, out: StageFolder) -> dict:
    """Shards of query sentences on the chosen runner (each keyed by the stage key and its sentences: a re-run skips
    the shards already written), merged into contexts.parquet; returns the manifest's body."""
    shard_dir = out.work_dir("shards", out.key)
    texts = job.queries["sentence"].tolist() if job.source.source != "generated" else []
    shard_size, execution = job.settings.shard_size, job.settings.execution
    shards = [texts[i : i + shard_size] for i in range(0, len(texts), shard_size)]
    progress = Progress("retrieve", len(shards) + job.source.generates,
                        f"{len(job.queries)} sentences, {len(shards)} retrieval shards"
                        + (", contexts written by the LLM" if job.source.generates else ""))
    t0 = time.perf_counter()
    shard_paths = map_shards(retrieve_shard, [{
        "sentences": shard, "index_dir": str(job.index_dir), "coherence_dir": str(job.trained.folder),
        "settings": job.selection, "out_path": str(shard_dir / f"{fingerprint(shard)[:16]}.parquet"),
        "device": str(job.device)} for shard in shards], execution, RETRIEVE_THREADS, progress)
    timings = {**job.timings, "retrieve_s": round(time.perf_counter() - t0, 3)}

    table = pa.concat_tables([pq.read_table(p, schema=CONTEXTS_SCHEMA) for p in shard_paths]) if shard_paths \
        else CONTEXTS_SCHEMA.empty_table()
    written, generation = pd.DataFrame(columns=["sentence_id", "sentence", "reason", "detail"]), None
    if job.source.generates:
        t1 = time.perf_counter()
        generated, written, generation = generate_contexts(job.queries, job.source, job.llm)
        progress.advance(1)
        timings["generate_contexts_s"] = round(time.perf_counter() - t1, 3)
        frame = generated if job.source.source == "generated" else interleave(table.to_pandas(), generated)
        table = pa.Table.from_pandas(frame[CONTEXTS_SCHEMA.names], schema=CONTEXTS_SCHEMA, preserve_index=False)
    per_sentence = table.group_by("sentence_id").aggregate([("context_id", "count")]).to_pandas()
    counts_by_id = dict(zip(per_sentence["sentence_id"], per_sentence["context_id_count"]))
    missing = job.queries[~job.queries["sentence_id"].isin(counts_by_id)]
    unmatched = missing.assign(reason="no_screening_match" if job.source.source == "retrieved" else "no_context",
                               detail="no corpus context shares a term with the sentence"
                               if job.source.source == "retrieved" else "no retrieved or written context was accepted")
    rejected = pa.Table.from_pandas(pd.concat([unmatched, written], ignore_index=True)[REJECTED_SCHEMA.names],
                                    schema=REJECTED_SCHEMA, preserve_index=False)
    out.write_parquet("contexts.parquet", table)
    out.preview = table.slice(0, 10).select(["sentence", "left", "right", "screen_score", "coherence_score",
                                             "rank"]).to_pylist()
    out.write_parquet("rejected.parquet", rejected)
    sizes = list(counts_by_id.values())
    counts = {"sentences": len(job.queries), "with_contexts": len(counts_by_id), "without_contexts": len(missing),
              "contexts_rows": table.num_rows, "corpus_contexts": len(job.contexts),
              "mean_contexts_per_sentence": float(sum(sizes) / len(sizes)) if sizes else 0.0,
              "below_target": int(sum(s < job.selection.contexts_per_sentence for s in sizes)),
              "corpus_sentences": len(job.corpus_sentences), "corpus": job.corpus_stats,
              "generated_contexts": int(pc.sum(pc.less(table["context_id"], 0)).as_py() or 0),
              # screened windows that held their own query sentence (or a copy): never a context of it
              "self_windows_excluded": sum((finished_shard(p) or {}).get("self_windows_excluded", 0)
                                           for p in shard_paths),
              "rejected_by_reason": dict(Counter(rejected["reason"].to_pylist()))}
    trained = job.trained
    return {
        "inputs": job.inputs,
        "parameters": {**job.settings.model_dump(mode="json"), "device": device_info(job.device),
                       "workers": runner_kind(execution.workers, execution.dask_address)},
        "coherence_model": {"key": trained.key, "folder": str(trained.folder), "metrics": trained.metrics,
                            "sha256": read_manifest(trained.folder)["outputs"]["model.pt"]["sha256"],
                            "reused": trained.reused, "encoder_precision": trained.encoder_precision},
        "index": str(job.index_dir), "counts": counts, "timings": timings,
        # Tokens only when the LLM writes contexts (source generated / both); priced per sentence given contexts.
        "cost": llm_cost(generation or {}, len(counts_by_id), "sentence",
                         prices_of(job.llm) if job.llm else (None, None)),
        "context_writer": None if generation is None else {
            **model_identity(job.llm), "prompt": writer_template().name,
            "prompt_sha256": writer_template().sha256, **generation},
    }


def publish_retrieval(out: StageFolder, manifest: dict) -> None:
    counts, timings = manifest["counts"], manifest["timings"]
    selection, held = manifest["parameters"]["selection"], manifest["coherence_model"]["metrics"]["heldout"]
    publish_markdown("retrieve-summary", "\n".join([
        f"# retrieve-contexts — {counts['with_contexts']}/{counts['sentences']} sentences with contexts", "",
        f"- corpus: {counts['corpus_sentences']} sentences, {counts['corpus_contexts']} contexts; screener {selection['screener']}, "
        f"top-{selection['screen_k']}, |C_s| ≤ {selection['contexts_per_sentence']}",
        f"- windows holding their own sentence, excluded: {counts['self_windows_excluded']}; generated contexts: "
        f"{counts['generated_contexts']}",
        f"- mean |C_s| = {counts['mean_contexts_per_sentence']:.1f}; {counts['below_target']} below target; "
        f"{counts['without_contexts']} without any (in rejected.parquet)",
        f"- coherence model: held-out acc {held['accuracy']:.3f}, AUC {held['roc_auc']:.3f} "
        f"({'reused' if manifest['coherence_model']['reused'] else 'trained'})",
        "- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()),
    ]), "Stage 2 summary")
    publish_table("retrieve-samples", out.preview, "Sample contexts")
    publish_links("retrieve", out.committed,
                  "Stage 2 outputs")
    run_logger().info(f"{counts['with_contexts']}/{counts['sentences']} sentences with contexts → {out.folder}")
