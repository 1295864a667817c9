"""Flow `label-pairs`: stage 3, a similarity label for every pair (label.method).

triples.parquet (or any pairs Parquet) → scoring units (a triple's sentences, or a pair) →
- context labels (seed 003, Eq. 3–4): + contexts.parquet → shards → S(s, c) terms (coherence model + causal LM)
  → similarity of the score rows;
- the LLM rating: one cached chat request per pair through the OpenAI-compatible endpoint;
- or both, mixed → `<output_dir>/label-pairs/pairs.parquet`, rejected.parquet, label_distribution.png, manifest.json.
Shards are resumable and LLM answers cached: a re-run scores only unfinished shards and re-sends only failed calls.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import flow, get_run_logger

from tasks.contracts import PAIRS_SCHEMA, REJECTED_PAIRS_SCHEMA, read_contexts, read_triples
from tasks.core.artifacts import Progress, publish_image, publish_links, publish_markdown, publish_table
from tasks.core.config import ConfigError, LLMSettings
from tasks.core.device import device_info, resolve_device
from tasks.core.env_settings import env
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runners import runner_kind, task_runner
from tasks.core.runs import run_scoped
from tasks.core.store import (
    fingerprint,
    outputs_current,
    read_manifest,
    sha256_path,
    verify_outputs,
    write_manifest,
    write_parquet,
)
from tasks.label.label_quality import (
    fit_calibration,
    gold_agreement,
    hierarchy_rate,
    labeler_description,
    per_relation_summary,
    plot_label_distribution,
)
from tasks.label.labeling import (
    LABEL_ONLY_FIELDS,
    LabelSettings,
    apply_ratings,
    is_endpoint,
    label_shard,
    lm_endpoint,
    lm_public,
    load_scorer,
    reference_sentences,
    resolve_lm,
    unit_pair_rows,
    uses_contexts,
    uses_lm,
    uses_rating,
)
from tasks.label.llm_rating import rate_pairs_task
from tasks.label.pair_units import SHARD_SCHEMA, context_sets, finish_rows, pair_units, read_pairs, triple_units
from tasks.llm.client import check_endpoint

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed

STAGE = "label-pairs"
CODE_VERSION = "label-v1"  # bump when the scoring changes what a label means


def _coherence_dir(contexts: Path, given: str | None) -> tuple[str | None, str | None]:
    """The stage-2 coherence model: given explicitly, or the one recorded in the manifest beside contexts.parquet."""
    folder = given
    if folder is None:
        manifest = read_manifest(contexts.parent) or {}
        folder = manifest.get("coherence_model", {}).get("folder")
    if folder is None:
        raise ConfigError(f"No coherence model: {contexts.parent}/manifest.json names none. Pass coherence_dir, or "
                          "set label.lambda_disc to 0 to label with the LM terms only.")
    manifest = read_manifest(Path(folder))
    if not manifest or not verify_outputs(Path(folder), manifest):
        raise ConfigError(f"Coherence model at {folder} is missing or fails its checksum; re-run retrieve-contexts.")
    return folder, manifest["outputs"]["model.pt"]["sha256"]


def _rater(llm: LLMSettings | None) -> dict | None:
    """What identifies the rating model (the endpoint's URL does not change what it answers)."""
    if llm is None:
        return None
    return {"model": llm.model, "sha256": env().llm.model_sha256}  # STSGEN_LLM_MODEL_SHA256, set with the server


def _rate(table: pa.Table, settings: LabelSettings, llm: LLMSettings) -> tuple[pa.Table, list[dict], dict]:
    ratings, stats = rate_pairs_task(list(zip(table["s1"].to_pylist(), table["s2"].to_pylist())), llm,
                                     settings.rating)
    rated, rejected = apply_ratings(table, ratings, settings)
    return rated, rejected, {**_rater(llm), **stats, "from_logprobs": sum(r.from_logprobs for r in ratings),
                             "failed": len(rejected)}


@flow(name=STAGE, log_prints=True)
@run_scoped
def label_pairs(
    contexts: str | None = None,
    triples: str | None = None,
    pairs: str | None = None,
    label: LabelSettings | None = None,
    coherence_dir: str | None = None,
    calibration: str | None = None,
    llm: LLMSettings | None = None,
    shard_size: int = 8,
    workers: Literal["threads", "processes", "dask"] = "threads",
    max_workers: int = 1,
    dask_address: str | None = None,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, str]:
    """Label sentence pairs (label.method: context-vector labels, the LLM's rating, or both). Input: `contexts` (a
    contexts.parquet from retrieve-contexts; not needed by label.method = 'llm_rating') and either `triples` (a triples.parquet) or `pairs` (a Parquet with
    s1/s2 or sentence1/sentence2, optional relation and gold/score). `calibration`: a labeled pairs.parquet (label
    and gold columns) to fit a monotone map of labels onto 0–5. `llm`: the endpoint that rates pairs when
    label.method is 'llm_rating' or 'combined' (default: LLMSettings(), i.e. STSGEN_LLM_* or the local server).
    Returns output paths."""
    logger = get_run_logger()
    settings = label or LabelSettings()
    if (triples is None) == (pairs is None):
        raise ConfigError("Give exactly one of triples= (a triples.parquet) or pairs= (a pairs Parquet).")
    served = uses_lm(settings) and is_endpoint(settings.lm)
    # An in-process LM's device: no GPU fails here, before any work. A served LM runs where it is served.
    lm_device = resolve_device(settings.device) if uses_lm(settings) and not served else None
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    source = Path(triples or pairs)
    contexts_path = Path(contexts) if contexts and uses_contexts(settings) else None
    if uses_contexts(settings) and contexts_path is None:
        raise ConfigError(f"label.method = {settings.method} scores contexts: pass contexts= (a contexts.parquet from "
                          "retrieve-contexts), or use label.method = llm_rating.")
    sets = context_sets(read_contexts(contexts_path), settings.contexts_per_sentence) if contexts_path else {}
    bad_rows: list[dict] = []
    if triples:
        units, bad_rows = triple_units(read_triples(source), sets, settings.cross_pairs_per_triple, settings.seed)
    else:
        frame, bad_rows = read_pairs(source)
        units = pair_units(frame, sets)
    coherence = _coherence_dir(contexts_path, coherence_dir) if settings.lambda_disc and uses_contexts(settings) \
        else (None, None)
    llm = (llm or LLMSettings()) if uses_rating(settings) else None
    if llm is not None:
        check_endpoint(llm)  # fail before any scoring: unreachable endpoint, unknown model, bad key
    lm_path, lm_sha = resolve_lm(settings) if uses_lm(settings) else (None, None)
    if lm_path is not None:
        if served:
            check_endpoint(lm_endpoint(settings))
        try:  # fail before any shard (a served LM is probed for prompt log-probs); the workers reuse this load
            load_scorer(settings, str(lm_path), lm_sha)
        except ConfigError:
            raise
        except (OSError, ValueError, ImportError) as exc:
            raise ConfigError(f"label.lm = {settings.lm}: cannot be loaded as a causal LM ({exc}); give a causal "
                              "LM's transformers folder or .gguf file (GGUF needs the gguf package).") from None
    # A served LM is identified by its model and tokenizer (lm_sha), not its URL: another URL serving the same model
    # reuses the scores, and the URL (it may embed credentials) goes into no key or manifest.
    url_field = {"lm"} if served else set()
    calibrator, calibration_info = fit_calibration(Path(calibration)) if calibration else (None, None)
    inputs = [{"path": str(source), "sha256": sha256_path(source), "role": "triples" if triples else "pairs"}] + (
        [{"path": str(contexts_path), "sha256": sha256_path(contexts_path), "role": "contexts"}] if contexts_path
        else [])
    # The scores depend on everything but the calibration (applied after the shards are merged): shards are
    # keyed without it, so adding a calibration re-scores nothing.
    score_key = fingerprint({"stage": STAGE, "code": CODE_VERSION, "inputs": [i["sha256"] for i in inputs],
                             "settings": settings.model_dump(exclude={"max_batch_tokens", "threads", "device",
                                                                      *url_field}),
                             "coherence": coherence[1], "lm": lm_sha, "rater": _rater(llm)})
    key = fingerprint({"scores": score_key, "calibration": calibration_info and calibration_info["sha256"]})
    folder = Path(output_dir) / STAGE
    paths = {name: str(folder / f"{name}.parquet") for name in ("pairs", "rejected")}
    paths["manifest"] = str(folder / "manifest.json")
    if outputs_current(folder, key):
        logger.info("Inputs and parameters unchanged (key %s…): reusing %s", key[:12], folder)
        return paths
    timings["prepare_s"] = round(time.perf_counter() - t0, 3)

    reference = reference_sentences(units, settings.reference_sentences, settings.seed)
    # Shards are keyed by what they score — their units' sentences and contexts, the reference sentences, settings
    # and models — not by input file hashes: a re-run skips the shards already written, also when an input file was
    # rebuilt with the same content (e.g. triples regenerated from the LLM cache).
    scorer_key = fingerprint({"stage": STAGE, "code": CODE_VERSION, "reference": reference,
                              "settings": settings.model_dump(exclude=LABEL_ONLY_FIELDS | url_field),
                              "coherence": coherence[1], "lm": lm_sha})
    shard_dir = folder / ".shards" / scorer_key[:16]
    shards = [units[i : i + shard_size] for i in range(0, len(units), shard_size)] if uses_contexts(settings) else []
    progress = Progress("label", len(shards), f"{len(units)} units ({sum(len(u.pairs) for u in units)} pairs) "
                                              f"in {len(shards)} shards")
    t1 = time.perf_counter()
    results = []
    with task_runner(workers, dask_address, max_workers) as runner:
        futures = [runner.submit(label_shard, parameters={
            "units": shard, "settings": settings, "reference": reference, "coherence_dir": coherence[0],
            "lm_path": lm_path and str(lm_path), "lm_sha256": lm_sha,
            "out_path": str(shard_dir / f"{fingerprint([asdict(u) for u in shard])[:16]}.parquet")})
            for shard in shards]
        for future in futures:
            results.append(future.result())
            progress.advance(1)
    timings["label_s"] = round(time.perf_counter() - t1, 3)

    merged = pa.concat_tables([pq.read_table(r["path"], schema=SHARD_SCHEMA) for r in results]) if results \
        else SHARD_SCHEMA.empty_table()
    labeled = merged.filter(pc.is_null(merged["reason"])).select(PAIRS_SCHEMA.names)
    rating_rows, rating_info = [], None
    if uses_rating(settings):
        t2 = time.perf_counter()
        labeled, rating_rows, rating_info = _rate(labeled if uses_contexts(settings) else
                                                  finish_rows(unit_pair_rows(units), PAIRS_SCHEMA), settings, llm)
        timings["rate_s"] = round(time.perf_counter() - t2, 3)
    if calibrator is not None and labeled.num_rows:
        calibrated = calibrator.predict(labeled["label"].to_numpy())
        labeled = labeled.set_column(labeled.schema.get_field_index("label_calibrated"), "label_calibrated",
                                     pa.array(calibrated, pa.float64()))
    quarantined = pa.concat_tables([finish_rows(bad_rows + rating_rows, REJECTED_PAIRS_SCHEMA), merged.filter(
        pc.invert(pc.is_null(merged["reason"]))).select(REJECTED_PAIRS_SCHEMA.names)])

    frame = labeled.to_pandas()
    hierarchy = hierarchy_rate(frame)
    gold = gold_agreement(frame)
    labeler = labeler_description(settings)
    relations = per_relation_summary(frame)
    folder.mkdir(parents=True, exist_ok=True)
    plot = plot_label_distribution(frame, folder / "label_distribution.png")
    digests = {"pairs.parquet": write_parquet(folder / "pairs.parquet", labeled),
               "rejected.parquet": write_parquet(folder / "rejected.parquet", quarantined),
               "label_distribution.png": sha256_path(plot)}
    fresh = [r["counts"] for r in results if not r["reused"]]
    counts = {"units": len(units), "pairs": labeled.num_rows, "rejected": quarantined.num_rows,
              "rejected_by_reason": dict(Counter(quarantined["reason"].to_pylist())),
              "shards": len(shards), "shards_reused": len(results) - len(fresh),
              "sentence_context_scores": sum(r["counts"]["sentence_context_scores"] for r in results),
              "sentence_context_scores_this_run": sum(c["sentence_context_scores"] for c in fresh),
              "pairs_by_relation": {r["relation"]: r["pairs"] for r in relations}}
    timings["total_s"] = round(time.perf_counter() - t0, 3)
    write_manifest(folder, {
        "stage": STAGE, "cache_key": key, "code_version": CODE_VERSION, "seed": settings.seed, "inputs": inputs,
        "parameters": {"label": settings.model_dump() | {"lm": lm_public(settings)}, "shard_size": shard_size,
                       "workers": runner_kind(workers, dask_address)},
        "lambdas": settings.weights(),
        "coherence_model": {"folder": coherence[0], "sha256": coherence[1]},
        "lm": {"source": lm_public(settings), "path": lm_path and str(lm_path), "sha256": lm_sha, "dtype": settings.dtype,
               "device": lm_device and device_info(lm_device),
               "served": {"model": lm_endpoint(settings).model, "tokenizer": str(lm_path),
                          "prompt_form": load_scorer(settings, str(lm_path), lm_sha).prompt_form} if served else None},
        "labeler": labeler, "rating": rating_info, "quality": {"hierarchy": hierarchy, "gold": gold},
        "calibration": calibration_info, "hierarchy": hierarchy, "relations": relations, "counts": counts,
        "timings": timings,
    }, digests)

    rate = "n/a" if hierarchy["rate"] is None else f"{hierarchy['rate']:.1%} of {hierarchy['triples']} triples"
    pos_neg = "n/a" if hierarchy["pos_over_neg_rate"] is None else \
        f"{hierarchy['pos_over_neg_rate']:.1%} of {hierarchy['pos_over_neg_triples']} triples"
    publish_markdown("label-summary", "\n".join([
        f"# label-pairs — {labeled.num_rows} labeled pairs, {quarantined.num_rows} quarantined", "",
        f"- hierarchy rate label(a,s+) > label(a,sm) > label(a,s-): **{rate}**; label(a,s+) > label(a,s-): "
        f"**{pos_neg}**",
        "- label–gold Spearman ×100: " + ("n/a (no gold scores)" if gold is None else
                                          f"**{gold['spearman']:.1f}** on {gold['pairs']} pairs with gold"),
        "- labeler: " + ", ".join(f"{k} = {v}" for k, v in labeler.items()),
        *([f"- LLM ratings: {rating_info['requests_sent']} requests, {rating_info['cache_hits']} cached, "
           f"{rating_info['failed']} failed (quarantined)"] if rating_info else []),
        f"- (sentence, context) scores: {counts['sentence_context_scores_this_run']} this run, "
        f"{counts['shards_reused']}/{len(shards)} shards reused",
        "- quarantined by reason: " + (", ".join(f"{k} {v}" for k, v in counts["rejected_by_reason"].items())
                                       or "none"),
        "- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), "",
        "| relation | pairs | mean | q25 | median | q75 |", "|---|---|---|---|---|---|",
        *(f"| {r['relation']} | {r['pairs']} | {r['mean']:.3f} | {r['q25']:.3f} | {r['median']:.3f} | "
          f"{r['q75']:.3f} |" for r in relations),
    ]), "Stage 3 summary")
    publish_image("label-distribution", plot, "Label distribution per relation")
    publish_table("label-samples", labeled.slice(0, 12).select(["relation", "s1", "s2", "label", "n_contexts"])
                  .to_pylist(), "Sample labeled pairs")
    publish_links("label", {name: folder / name for name in (*digests, "manifest.json")}, "Stage 3 outputs")
    print(f"{labeled.num_rows} labeled pairs, {quarantined.num_rows} quarantined; hierarchy rate {rate} → {folder}")
    return paths
