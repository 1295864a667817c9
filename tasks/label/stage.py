"""Stage 3, `label-pairs`: a similarity label for every pair (label.method), in the stage outline (tasks.core.stage).

triples.parquet (or any pairs Parquet) → scoring units (a triple's sentences, or a pair) →
- context labels (Sun et al. 2022, Eq. 3–4): + contexts.parquet → shards → S(s, c) terms (coherence model + causal
  LM) → similarity of the score rows;
- the LLM rating: one cached chat request per pair through the OpenAI-compatible endpoint;
- or both, mixed → pairs.parquet, rejected.parquet, label_distribution.png.
`prepare_labeling` reads the inputs and checks every model and endpoint before any scoring; `label_all` scores the
shards (resumable: a re-run scores only unfinished shards and re-sends only failed calls) and writes the outputs;
`publish_labels` creates the artifacts.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasks.contracts import (
    CONTEXT_COLUMNS,
    PAIRS_SCHEMA,
    REJECTED_PAIRS_SCHEMA,
    TRIPLE_SLOTS,
    StageIO,
    read_contexts,
    read_triples,
)
from tasks.core.artifacts import Progress, publish_image, publish_links, publish_markdown, publish_table
from tasks.core.config import ConfigError, LLMSettings
from tasks.core.device import device_info, resolve_device, resolve_lm_dtype
from tasks.core.runners import map_shards, runner_kind
from tasks.core.stage import StageFolder, run_logger, stage_key
from tasks.core.store import fingerprint, local_path, read_manifest, sha256_path, verify_outputs
from tasks.label.label_quality import (
    fit_calibration,
    gold_agreement,
    hierarchy_rate,
    label_columns_quality,
    labeler_description,
    per_relation_summary,
    plot_label_distribution,
)
from tasks.label.labeling import (
    LabelSettings,
    apply_ratings,
    label_shard,
    reference_sentences,
    unit_pair_rows,
    uses_contexts,
    uses_lm,
    uses_rating,
)
from tasks.label.llm_rating import rate_pairs_task
from tasks.label.pair_units import SHARD_SCHEMA, Unit, context_sets, finish_rows, pair_units, read_pairs, triple_units
from tasks.label.scorer import lm_public, load_scorer, resolve_lm
from tasks.label.settings import ranker_note
from tasks.llm.client import model_identity
from tasks.llm.cost import llm_cost, prices_of
from tasks.llm.endpoint import check_endpoint
from tasks.llm.teacher import teacher_identity

STAGE = "label-pairs"
LABEL_THREADS = 1  # shards at once on a thread pool: the LM already uses every core, more would only contend
CODE_VERSION = "label-v1"  # bump when the scoring changes what a label means
IO = StageIO(reads={"generate-sts-triples/triples.parquet": ("source_id", *TRIPLE_SLOTS), "retrieve-contexts/contexts.parquet": CONTEXT_COLUMNS},
             writes={"pairs.parquet": tuple(PAIRS_SCHEMA.names), "rejected.parquet": tuple(REJECTED_PAIRS_SCHEMA.names)})


def _coherence_dir(contexts: Path, given: str | None) -> tuple[str | None, str | None]:
    """The stage-2 coherence model: given explicitly, or the one recorded in the manifest beside contexts.parquet."""
    folder = given
    if folder is None:
        manifest = read_manifest(contexts.parent) or {}
        folder = manifest.get("coherence_model", {}).get("folder")
        folder = folder and local_path(folder)
    if folder is None:
        raise ConfigError(f"No coherence model: {contexts.parent}/manifest.json names none. Pass coherence_dir, or "
                          "set label.lambda_disc to 0 to label with the LM terms only.")
    manifest = read_manifest(Path(folder))
    if not manifest or not verify_outputs(Path(folder), manifest):
        raise ConfigError(f"Coherence model at {folder} is missing or fails its checksum; re-run retrieve-contexts.")
    return folder, manifest["outputs"]["model.pt"]["sha256"]


def _rater(llm: LLMSettings | None) -> dict | None:
    """What identifies the rating model (the endpoint's URL does not change what it answers)."""
    return None if llm is None else model_identity(llm)


def _rate(table: pa.Table, settings: LabelSettings, llm: LLMSettings, progress: Progress
          ) -> tuple[pa.Table, list[dict], dict]:
    ratings, stats = rate_pairs_task(list(zip(table["s1"].to_pylist(), table["s2"].to_pylist())), llm,
                                     settings.rating, on_rated=progress.advance)
    rated, rejected = apply_ratings(table, ratings, settings)
    return rated, rejected, {**_rater(llm), **stats, "from_logprobs": sum(r.from_logprobs for r in ratings),
                             "failed": len(rejected)}


@dataclass
class LabelJob:
    """Stage 3's inputs, read and checked: the scoring units, their source files, the models and the rater."""

    settings: LabelSettings
    units: list[Unit]
    bad_rows: list[dict]
    inputs: list[dict]
    coherence: tuple[str | None, str | None]  # the coherence model's folder and sha256
    llm: LLMSettings | None  # the rating endpoint
    lm_path: Path | None
    lm_sha: str | None
    lm_device: object | None  # an in-process LM's torch device
    calibrator: object | None
    calibration_info: dict | None
    prepare_s: float
    teacher: dict | None = None  # the teacher's identity (name, sha256, licence) when label.teacher_weight > 0

    @property
    def served(self) -> bool:
        return uses_lm(self.settings) and self.settings.lm_endpoint is not None

    def score_key(self) -> str:
        """What the scores depend on: everything but the calibration (applied after the shards are merged)."""
        return stage_key(STAGE, code=CODE_VERSION, inputs=[i["sha256"] for i in self.inputs], settings=self.settings,
                         coherence=self.coherence[1], lm=self.lm_sha, rater=_rater(self.llm),
                         **({"teacher": self.teacher["sha256"]} if self.teacher else {}))  # absent: earlier keys hold

    def key(self) -> str:
        return fingerprint({"scores": self.score_key(),
                            "calibration": self.calibration_info and self.calibration_info["sha256"]})


def prepare_labeling(contexts: str | None, triples: str | None, pairs: str | None, settings: LabelSettings,
                     coherence_dir: str | None, llm: LLMSettings | None) -> LabelJob:
    """Read the units and check every model and endpoint the labeler uses, before any scoring."""
    t0 = time.perf_counter()
    if (triples is None) == (pairs is None):
        raise ConfigError("Give exactly one of triples= (a triples.parquet) or pairs= (a pairs Parquet).")
    served = uses_lm(settings) and settings.lm_endpoint is not None
    # An in-process LM's device: no GPU fails here, before any work. A served LM runs where it is served.
    lm_device = resolve_device(settings.device) if uses_lm(settings) and not served and \
        settings.scorer == "transformers" else None  # llama.cpp scores on the CPU
    # 'auto' becomes the dtype used here, before any key is taken: shards of a float32 and a bf16 machine differ.
    settings = settings.model_copy(update={"dtype": resolve_lm_dtype(settings.dtype, lm_device)})
    if settings.uses_teacher:  # the teacher encodes on label.device too: the same early failure
        resolve_device(settings.device)
    source = Path(triples or pairs)
    contexts_path = Path(contexts) if contexts and uses_contexts(settings) else None
    if uses_contexts(settings) and contexts_path is None:
        raise ConfigError(f"label.method = {settings.method} scores contexts: pass contexts= (a contexts.parquet from "
                          "retrieve-contexts), or use label.method = llm_rating.")
    sets = context_sets(read_contexts(contexts_path), settings.candidates()) if contexts_path else {}
    bad_rows: list[dict] = []
    if triples:
        units, bad_rows = triple_units(read_triples(source, IO.reads["generate-sts-triples/triples.parquet"]), sets, settings.cross_pairs_per_triple, settings.seed)
    else:
        frame, bad_rows = read_pairs(source)
        units = pair_units(frame, sets)
    coherence = _coherence_dir(contexts_path, coherence_dir) if settings.lambda_disc and uses_contexts(settings) \
        else (None, None)
    if coherence[0] is not None and (note := ranker_note(settings, read_manifest(Path(coherence[0])))):
        run_logger().warning(note)
    llm = (llm or LLMSettings()) if uses_rating(settings) else None
    if llm is not None:
        check_endpoint(llm)  # fail before any scoring: unreachable endpoint, unknown model, bad key
    lm_path, lm_sha = resolve_lm(settings) if uses_lm(settings) else (None, None)
    if lm_path is not None:
        if served:
            check_endpoint(settings.lm_endpoint)
        try:  # fail before any shard (a served LM is probed for prompt log-probs); the workers reuse this load
            load_scorer(settings, str(lm_path), lm_sha)
        except ConfigError:
            raise
        except (OSError, ValueError, ImportError) as exc:
            raise ConfigError(f"label.lm = {settings.lm}: cannot be loaded as a causal LM ({exc}); give a causal "
                              "LM's transformers folder or .gguf file (GGUF needs the gguf package).") from None
    # The teacher is looked for (and hashed) before any scoring: a missing one is one error naming the fetch.
    teacher = teacher_identity(settings.teacher) if settings.uses_teacher else None
    calibration = settings.calibration
    calibrator, calibration_info = fit_calibration(Path(calibration)) if calibration else (None, None)
    inputs = [{"path": str(source), "sha256": sha256_path(source), "role": "triples" if triples else "pairs"}] + (
        [{"path": str(contexts_path), "sha256": sha256_path(contexts_path), "role": "contexts"}] if contexts_path
        else [])
    return LabelJob(settings, units, bad_rows, inputs, coherence, llm, lm_path, lm_sha, lm_device, calibrator,
                    calibration_info, round(time.perf_counter() - t0, 3), teacher)


def label_all(job: LabelJob, out: StageFolder) -> dict:
    """Score the units in shards, rate and calibrate, write pairs.parquet, rejected.parquet and the label plot;
    returns the manifest's body."""
    settings, units = job.settings, job.units
    shard_size, execution = settings.shard_size, settings.execution
    timings = {"prepare_s": job.prepare_s}
    reference = reference_sentences(units, settings.reference_sentences, settings.seed)
    # Shards are keyed by what they score — their units' sentences and contexts, the reference sentences, settings
    # and models — not by input file hashes: a re-run skips the shards already written, also when an input file was
    # rebuilt with the same content (e.g. triples regenerated from the LLM cache).
    scorer_key = stage_key(STAGE, code=CODE_VERSION, reference=reference, settings=settings.score_fields(),
                           coherence=job.coherence[1], lm=job.lm_sha)
    shard_dir = out.work_dir("shards", scorer_key)
    shards = [units[i : i + shard_size] for i in range(0, len(units), shard_size)] if uses_contexts(settings) else []
    n_pairs = sum(len(u.pairs) for u in units)
    # Work in pairs (every pair, before scoring quarantines any): a shard counts the pairs it scores, and each pair
    # counts once more when rated. Scoring a pair's contexts and rating it cost about the same (rate_s ≈ label_s in
    # the growth chunks' manifests), so the ETA holds from the first shard; a shard counted as 1 beside hundreds of
    # ratings made it read hours for a stage of minutes.
    shard_pairs = [sum(len(u.pairs) for u in shard) for shard in shards]
    progress = Progress("label", sum(shard_pairs) + (n_pairs if uses_rating(settings) else 0),
                        f"{len(units)} units, {n_pairs} pairs"
                        + (f": context-scored in {len(shards)} shards" if shards else "")
                        + (", then rated" if uses_rating(settings) and shards else
                           ": rated" if uses_rating(settings) else ""))
    t1 = time.perf_counter()
    results = map_shards(label_shard, [{
        "units": shard, "settings": settings, "reference": reference, "coherence_dir": job.coherence[0],
        "lm_path": job.lm_path and str(job.lm_path), "lm_sha256": job.lm_sha,
        "out_path": str(shard_dir / f"{fingerprint([asdict(u) for u in shard])[:16]}.parquet")}
        for shard in shards], execution, LABEL_THREADS, progress, shard_pairs)
    timings["label_s"] = round(time.perf_counter() - t1, 3)

    merged = pa.concat_tables([pq.read_table(r["path"], schema=SHARD_SCHEMA) for r in results]) if results \
        else SHARD_SCHEMA.empty_table()
    labeled = merged.filter(pc.is_null(merged["reason"])).select(PAIRS_SCHEMA.names)
    rating_rows, rating_info = [], None
    if uses_rating(settings):
        t2 = time.perf_counter()
        labeled, rating_rows, rating_info = _rate(labeled if uses_contexts(settings) else
                                                  finish_rows(unit_pair_rows(units), PAIRS_SCHEMA), settings, job.llm,
                                                  progress)
        progress.advance(progress.total)  # pairs quarantined by scoring were counted but not rated
        timings["rate_s"] = round(time.perf_counter() - t2, 3)
    if job.calibrator is not None and labeled.num_rows:
        calibrated = job.calibrator.predict(labeled["label"].to_numpy())
        labeled = labeled.set_column(labeled.schema.get_field_index("label_calibrated"), "label_calibrated",
                                     pa.array(calibrated, pa.float64()))
    quarantined = pa.concat_tables([finish_rows(job.bad_rows + rating_rows, REJECTED_PAIRS_SCHEMA), merged.filter(
        pc.invert(pc.is_null(merged["reason"]))).select(REJECTED_PAIRS_SCHEMA.names)])

    frame = labeled.to_pandas()
    hierarchy, gold, relations = hierarchy_rate(frame), gold_agreement(frame), per_relation_summary(frame)
    out.add(plot_label_distribution(frame, out.folder / "label_distribution.png"))
    out.write_parquet("pairs.parquet", labeled)
    out.preview = labeled.slice(0, 12).select(["relation", "s1", "s2", "label", "n_contexts"]).to_pylist()
    out.write_parquet("rejected.parquet", quarantined)
    fresh = [r["counts"] for r in results if not r["reused"]]
    counts = {"units": len(units), "pairs": labeled.num_rows, "rejected": quarantined.num_rows,
              "rejected_by_reason": dict(Counter(quarantined["reason"].to_pylist())),
              "shards": len(shards), "shards_reused": len(results) - len(fresh),
              "sentence_context_scores": sum(r["counts"]["sentence_context_scores"] for r in results),
              "sentence_context_scores_this_run": sum(c["sentence_context_scores"] for c in fresh),
              "pairs_by_relation": {r["relation"]: r["pairs"] for r in relations}}
    served = job.served
    return {
        "code_version": CODE_VERSION, "seed": settings.seed, "inputs": job.inputs,
        # The scoring endpoint by kind and model: its URL may embed credentials.
        "parameters": {"label": settings.model_dump(exclude={"lm_endpoint"})
                       | {"lm_endpoint": lm_public(settings) if served else None}, "shard_size": shard_size,
                       "workers": runner_kind(execution.workers, execution.dask_address)},
        "lambdas": settings.weights(),
        "coherence_model": {"folder": job.coherence[0], "sha256": job.coherence[1]},
        "lm": {"source": lm_public(settings), "path": job.lm_path and str(job.lm_path), "sha256": job.lm_sha,
               "dtype": settings.dtype, "device": job.lm_device and device_info(job.lm_device),
               "served": {"model": settings.lm_endpoint.model, "tokenizer": str(job.lm_path),
                          "prompt_form": load_scorer(settings, str(job.lm_path), job.lm_sha).prompt_form}
               if served else None},
        "labeler": labeler_description(settings), "rating": rating_info, "teacher": job.teacher,
        "cost": llm_cost(rating_info or {}, labeled.num_rows, "pair", prices_of(job.llm) if job.llm else (None, None)),
        "quality": {"hierarchy": hierarchy, "gold": gold, "columns": label_columns_quality(frame)},
        "calibration": job.calibration_info, "hierarchy": hierarchy, "relations": relations, "counts": counts,
        "timings": timings,
    }


def _share(hierarchy: dict, rate: str, count: str, unit: str = "") -> str:
    return "n/a" if hierarchy[rate] is None else f"{hierarchy[rate]:.1%} of {hierarchy[count]}{unit}"


def publish_labels(out: StageFolder, manifest: dict) -> None:
    hierarchy, gold, counts = manifest["hierarchy"], manifest["quality"]["gold"], manifest["counts"]
    rating_info, relations, timings = manifest["rating"], manifest["relations"], manifest["timings"]
    rate = _share(hierarchy, "rate", "triples", " triples")
    pos_neg = _share(hierarchy, "pos_over_neg_rate", "pos_over_neg_triples", " triples")
    publish_markdown("label-summary", "\n".join([
        f"# label-pairs — {counts['pairs']} labeled pairs, {counts['rejected']} quarantined", "",
        f"- hierarchy rate label(a,s+) > label(a,sm) > label(a,s-): **{rate}**; label(a,s+) > label(a,s-): "
        f"**{pos_neg}**",
        "- label–gold Spearman ×100: " + ("n/a (no gold scores)" if gold is None else
                                          f"**{gold['spearman']:.1f}** on {gold['pairs']} pairs with gold"),
        "", "| column | hierarchy a+ > am > a- | a+ > a- | gold Spearman ×100 |", "|---|---|---|---|",
        *(f"| {name} | {_share(q['hierarchy'], 'rate', 'triples')} | "
          f"{_share(q['hierarchy'], 'pos_over_neg_rate', 'pos_over_neg_triples')} | "
          f"{'n/a' if q['gold'] is None else q['gold']['spearman']} |"
          for name, q in manifest["quality"].get("columns", {}).items()), "",
        "- labeler: " + ", ".join(f"{k} = {v}" for k, v in manifest["labeler"].items()),
        *([f"- LLM ratings: {rating_info['requests_sent']} requests, {rating_info['cache_hits']} cached, "
           f"{rating_info['failed']} failed (quarantined)"] if rating_info else []),
        f"- (sentence, context) scores: {counts['sentence_context_scores_this_run']} this run, "
        f"{counts['shards_reused']}/{counts['shards']} shards reused",
        "- quarantined by reason: " + (", ".join(f"{k} {v}" for k, v in counts["rejected_by_reason"].items())
                                       or "none"),
        "- timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), "",
        "| relation | pairs | mean | q25 | median | q75 |", "|---|---|---|---|---|---|",
        *(f"| {r['relation']} | {r['pairs']} | {r['mean']:.3f} | {r['q25']:.3f} | {r['median']:.3f} | "
          f"{r['q75']:.3f} |" for r in relations),
    ]), "Stage 3 summary")
    publish_image("label-distribution", out.folder / "label_distribution.png", "Label distribution per relation")
    publish_table("label-samples", out.preview, "Sample labeled pairs")
    publish_links("label", out.committed, "Stage 3 outputs")
    run_logger().info(f"{counts['pairs']} labeled pairs, {counts['rejected']} quarantined; hierarchy rate {rate} → {out.folder}")
