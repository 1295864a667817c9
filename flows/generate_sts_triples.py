"""Flow `generate-sts-triples`: stage 1, LLM pattern simulation (seed 004).

For n source sentences sampled from the corpus: s+ from the anchor, then (STS) s^m and s- from s+, each prompt kind
run in batches with the run's fixed in-context examples. Writes `<output_dir>/generate-sts-triples/`:
triples.parquet, rejected.parquet, manifest.json (committed last). Unchanged inputs + parameters → skipped.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.contracts import rejected_table, triples_table
from tasks.core.artifacts import Progress, publish_links, publish_markdown, publish_table
from tasks.core.config import (
    CorpusSettings,
    GenerateConfig,
    LLMSettings,
    PatternSettings,
    SamplingSettings,
    ValidationSettings,
    VerifierSettings,
)
from tasks.core.corpus import Corpus, load_corpus, sample_sources
from tasks.core.env_settings import env
from tasks.core.prefect_ephemeral import ephemeral_server_dies_with_parent
from tasks.core.runs import run_scoped
from tasks.core.store import fingerprint, outputs_current, read_manifest, write_manifest, write_parquet
from tasks.generate.generation import (
    FAILED_CALL_REASONS,
    Judge,
    Source,
    generate_batch,
    generate_source_batch,
    kind_counts,
    next_slot,
)
from tasks.generate.patterns import load_pattern_source, sample_examples
from tasks.generate.verification import load_judge_template, ordering_gaps
from tasks.llm.batch import MAX_BATCH_LINES
from tasks.llm.client import check_endpoint, endpoint_kind, merge_stats
from tasks.llm.prompting import BASE_OF_KIND, KINDS_BY_PATTERN, load_template

ephemeral_server_dies_with_parent()  # no orphaned Prefect API server if this process is killed

STAGE = "generate-sts-triples"
# LLM settings that change how requests are sent, not what they return: not part of the cache key.
_TRANSPORT = {"max_concurrency", "requests_per_minute", "tokens_per_minute", "timeout_s", "max_retries",
              "backoff_base_s", "backoff_max_s", "verify_model", "cache_path", "api_key_env", "base_url",
              "batch_api", "batch_poll_s", "prefect_limit", "request_order"}


def stage_key(cfg: GenerateConfig, input_hashes: list[str], prompt_hashes: dict[str, str]) -> str:
    params = cfg.model_dump(exclude={"output_dir": True, "batch_size": True, "llm": _TRANSPORT,
                                     "verifier": {"llm": _TRANSPORT}})
    return fingerprint({"stage": STAGE, "params": params, "inputs": input_hashes, "prompts": prompt_hashes})


@task(name="check-llm-endpoint", cache_policy=NO_CACHE)
def check_llm_endpoint(llm: LLMSettings) -> list[str]:
    return check_endpoint(llm)


@task(name="load-corpus", cache_policy=NO_CACHE)
def load_corpus_task(settings: CorpusSettings) -> Corpus:
    return load_corpus(settings)


def _summary_markdown(counts: dict, stats: dict, seconds: float, folder: Path) -> str:
    lines = [f"# generate-sts-triples — {counts['triples']} triples from {counts['sources']} source sentences", "",
             "| kind | slots | accepted | acceptance | attempts/accepted |", "|---|---|---|---|---|"]
    for kind, c in counts["per_kind"].items():
        rate = c["accepted"] / c["slots"] if c["slots"] else 0.0
        per = c["attempts"] / c["accepted"] if c["accepted"] else 0.0
        lines.append(f"| {kind} | {c['slots']} | {c['accepted']} | {rate:.1%} | {per:.2f} |")
    rps = stats["requests_sent"] / seconds if seconds else 0.0
    lines += ["", f"- HTTP requests: {stats['requests_sent']} ({rps:.2f}/s over {seconds:.1f} s of generation), "
              f"retries {stats['retries']}, failed calls {stats['failures']}, cache hits {stats['cache_hits']}",
              f"- tokens: {stats['prompt_tokens']} prompt + {stats['completion_tokens']} completion",
              *([f"- Batch API: {stats['batches_created']} batches created ({stats.get('batches_reattached', 0)} "
                 f"re-attached), {stats.get('batch_lines', 0)} requests, {stats.get('batch_lines_failed', 0)} failed"]
                if stats.get("batches_created") or stats.get("batches_reattached") else []),
              f"- quarantined rows: {counts['rejected_rows']} — by reason: "
              + (", ".join(f"{k} {v}" for k, v in sorted(counts["rejected_by_reason"].items())) or "none"),
              f"- outputs: `{folder}`"]
    return "\n".join(lines)


def batch_step(batch_size: int, max_concurrency: int) -> int:
    """Slots per batch task. A batch ends when its slowest slot (up to max_attempts generations and judge calls, one
    after another) ends, and at most one batch runs at a time: with fewer slots than 4× the requests allowed in
    flight, the endpoint would idle while a batch drains (a GPU server's 64–256 in flight never reached)."""
    return max(batch_size, 4 * max_concurrency)


def generate_by_source(sources: list[Source], kinds, cfg: GenerateConfig, templates, systems, judges,
                       accepted: dict[str, dict], quarantine: list[dict], progress: Progress) -> dict:
    """Batches of sources, every kind of each chained (tasks.generate.generation.generate_chains); fills `accepted` and
    `quarantine`, returns the LLM stats."""
    stats_total: dict = {}
    step = batch_step(cfg.batch_size, cfg.llm.max_concurrency)
    for start in range(0, len(sources), step):
        batch = sources[start : start + step]
        gens, rejected, stats = generate_source_batch(batch, kinds, templates, systems, cfg.llm, cfg.sampling,
                                                      cfg.validation, cfg.max_attempts, cfg.seed, judges)
        for g in gens:
            accepted[g["kind"]][g["source_id"]] = g
        quarantine.extend(rejected)
        stats_total = merge_stats(stats_total, stats)
        progress.advance(len(batch) * len(kinds))
    return stats_total


def generate_by_kind(sources: list[Source], kinds, cfg: GenerateConfig, templates, systems, judges,
                     accepted: dict[str, dict], quarantine: list[dict], progress: Progress) -> dict:
    """Kind after kind, in batches of slots (a single-slot server keeps one few-shot prefix; the Batch API sends one
    batch per kind and attempt round); fills `accepted` and `quarantine`, returns the LLM stats."""
    stats_total: dict = {}
    step = MAX_BATCH_LINES if cfg.llm.batch_api else batch_step(cfg.batch_size, cfg.llm.max_concurrency)
    for kind in kinds:
        slots = []
        for src in sources:
            texts = {k: accepted[k][src.source_id]["text"] for k in kinds if src.source_id in accepted[k]}
            slot, row = next_slot(src, kind, kinds, texts)
            if slot is None:
                quarantine.append(row)
            else:
                slots.append(slot)
        progress.advance(len(sources) - len(slots))
        for start in range(0, len(slots), step):
            batch = slots[start : start + step]
            gens, rejected, stats = generate_batch(batch, templates[kind], systems[kind], cfg.llm, cfg.sampling,
                                                   cfg.validation, cfg.max_attempts, cfg.seed, judges.get(kind))
            accepted[kind].update({g["source_id"]: g for g in gens})
            quarantine.extend(rejected)
            stats_total = merge_stats(stats_total, stats)
            progress.advance(len(batch))
    return stats_total


@flow(name=STAGE, log_prints=True)
@run_scoped
def generate_sts_triples(
    n: int = 20,
    pattern: Literal["sts", "nli"] = "sts",
    corpus: str = "default",
    pattern_source: str = "default",
    seed: int = 13,
    llm: LLMSettings | None = None,
    sampling: SamplingSettings | None = None,
    validation: ValidationSettings | None = None,
    verifier: VerifierSettings | None = None,
    max_attempts: int = 3,
    batch_size: int = 32,
    output_dir: str = "data/outputs",
    run: str | None = None,
) -> dict[str, str]:
    """Generate STS triples; returns the output file paths.

    `corpus`: 'default' or a path (file, folder, zip); `pattern_source`: 'default' (STS12 train rows of STS-B) or a
    SemEval TSV / SICK file. LLM endpoint and model come from `llm` (or STSGEN_LLM_BASE_URL / STSGEN_LLM_MODEL)."""
    logger = get_run_logger()
    cfg = GenerateConfig(
        n=n, seed=seed, corpus=CorpusSettings(source=corpus),
        pattern=PatternSettings(kind=pattern, source=pattern_source),
        llm=llm or LLMSettings(), sampling=sampling or SamplingSettings(), validation=validation or ValidationSettings(),
        verifier=verifier or VerifierSettings(), max_attempts=max_attempts, batch_size=batch_size, output_dir=output_dir,
    )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    # Validate every input before spending anything on the LLM: bad files and endpoints fail here, nothing written.
    kinds = KINDS_BY_PATTERN[cfg.pattern.kind]
    templates = {k: load_template(cfg.pattern.kind, k) for k in kinds}
    judges = {k: Judge(load_judge_template(k, cfg.verifier.template_dir), cfg.verifier) for k in kinds} \
        if cfg.verifier.judge else {}
    judge_llm = (cfg.verifier.llm or cfg.llm) if judges else None
    patterns = load_pattern_source(cfg.pattern)
    examples = sample_examples(patterns, kinds, cfg.pattern.examples_per_prompt, cfg.seed)
    corpus_data = load_corpus_task(cfg.corpus)
    sample, duplicate_texts = sample_sources(corpus_data, cfg.n, cfg.seed)
    timings["prepare_s"] = round(time.perf_counter() - t0, 3)

    inputs = corpus_data.inputs + patterns.inputs()
    key = stage_key(cfg, [i["sha256"] for i in inputs], {k: t.sha256 for k, t in templates.items()}
                    | {f"judge-{k}": j.template.sha256 for k, j in judges.items()})
    folder = Path(cfg.output_dir) / STAGE
    paths = {"triples": str(folder / "triples.parquet"), "rejected": str(folder / "rejected.parquet"),
             "manifest": str(folder / "manifest.json")}
    if outputs_current(folder, key) and not failed_llm_calls(folder):
        logger.info("Inputs and parameters unchanged (key %s…): reusing %s", key[:12], folder)
        return paths
    served = check_llm_endpoint(cfg.llm)  # only when there is work for it: a reused stage needs no endpoint
    if judges and cfg.verifier.llm:
        check_llm_endpoint(cfg.verifier.llm)  # a separate judge endpoint must be reachable before any spending

    systems = {k: templates[k].system_message([vars(e) for e in examples[k]]) for k in kinds}
    example_ids = {k: [e.example_id for e in examples[k]] for k in kinds}
    accepted: dict[str, dict[str, dict]] = {k: {} for k in kinds}
    quarantine: list[dict] = list(corpus_data.rejected)
    progress = Progress("generate", cfg.n * len(kinds), f"{cfg.n} sentences × {len(kinds)} kinds")
    t_gen = time.perf_counter()
    request_order = cfg.llm.resolved_request_order()
    sources = [Source(s.source_id, s.text) for s in sample.itertuples(index=False)]
    run = generate_by_source if request_order == "by_source" else generate_by_kind
    stats_total = run(sources, kinds, cfg, templates, systems, judges, accepted, quarantine, progress)
    counts_per_kind = kind_counts(kinds, accepted, quarantine)
    timings["generation_s"] = round(time.perf_counter() - t_gen, 3)

    order = {sid: i for i, sid in enumerate(sample["source_id"])}
    quarantine.sort(key=lambda r: (r.get("stage") != "input", order.get(r.get("source_id"), -1),
                                   kinds.index(r["kind"]) if r.get("kind") in kinds else -1, r.get("attempt") or 0))
    triples = triples_table(sample, accepted, kinds=kinds, pattern=cfg.pattern.kind, model=cfg.llm.model,
                            prompts={k: t.name for k, t in templates.items()}, example_ids=example_ids,
                            bases={k: BASE_OF_KIND[k] for k in kinds},
                            judge_model=judge_llm.model if judge_llm else None)
    if cfg.verifier.ordering_margin is not None and triples.num_rows and cfg.pattern.kind == "sts":
        triples, failed = ordering_check_task(triples, cfg.verifier)
        quarantine.extend(failed)
    reasons = dict(Counter(row["reason"] for row in quarantine))
    by_kind: dict[str, dict[str, int]] = {}
    for row in quarantine:
        if row.get("kind"):
            by_kind.setdefault(row["kind"], Counter())[row["reason"]] += 1
    counts = {"sources": cfg.n, "triples": triples.num_rows, "incomplete_sources": cfg.n - triples.num_rows,
              "rejected_rows": len(quarantine), "rejected_by_reason": reasons,
              "rejected_by_kind": {k: dict(v) for k, v in by_kind.items()}, "per_kind": counts_per_kind,
              "corpus": corpus_data.stats, "duplicate_corpus_texts_skipped": duplicate_texts,
              "pattern_bad_rows": len(patterns.bad_rows)}
    stats_total = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in stats_total.items()}
    for name in ("requests_sent", "retries", "failures", "cache_hits", "prompt_tokens", "completion_tokens"):
        stats_total.setdefault(name, 0)

    # Parquet first, manifest last: a folder without a matching manifest is never taken as done.
    folder.mkdir(parents=True, exist_ok=True)
    digests = {"triples.parquet": write_parquet(folder / "triples.parquet", triples),
               "rejected.parquet": write_parquet(folder / "rejected.parquet", rejected_table(quarantine))}
    timings["total_s"] = round(time.perf_counter() - t0, 3)
    write_manifest(folder, {
        "stage": STAGE, "cache_key": key, "seed": cfg.seed,
        "parameters": cfg.model_dump(mode="json"),
        "inputs": inputs,
        "prompts": {k: {"name": t.name, "version": t.version, "sha256": t.sha256} for k, t in templates.items()},
        "examples": {k: [vars(e) for e in examples[k]] for k in kinds},
        "generation_bases": {k: BASE_OF_KIND[k] for k in kinds},
        "verifier": {"judge_model": judge_llm.model if judge_llm else None,
                     "judge_prompts": {k: {"name": j.template.name, "sha256": j.template.sha256}
                                       for k, j in judges.items()},
                     "threshold": cfg.verifier.threshold if judges else None,
                     "ordering_margin": cfg.verifier.ordering_margin},
        "llm": {"model": cfg.llm.model, "served_models": served,
                "model_sha256": env().llm.model_sha256,
                # Set by whoever started the embedded server (the CLI, the local stack): llama-server or
                # llama-cpp-python; None for an endpoint stsgen did not start.
                "server_engine": env().llm.server_engine, "request_order": request_order,
                "endpoint_kind": endpoint_kind(cfg.llm.base_url)},
        "llm_stats": stats_total, "counts": counts, "timings": timings,
    }, digests)

    publish_markdown("generate-summary", _summary_markdown(counts, stats_total, timings["generation_s"], folder),
                     "Stage 1 summary")
    sample_rows = triples.slice(0, 10).select(["anchor", "positive", "intermediate", "negative"]).to_pylist()
    publish_table("generate-samples", sample_rows, "Sample triples")
    publish_links("generate", {name: folder / name for name in (*digests, "manifest.json")},
                  "Stage 1 output files")
    print(f"{triples.num_rows}/{cfg.n} complete triples, {len(quarantine)} quarantined rows → {folder}")
    if reasons.get("llm_error"):
        logger.warning("%d LLM calls failed after retries (quarantined as llm_error): a re-run retries only those; "
                       "every accepted generation is cached.", reasons["llm_error"])
    return paths


def failed_llm_calls(folder: Path) -> int:
    """LLM calls that failed after retries in the committed run (a transient outage, not a verdict on the data): a
    stage with any is not reused as is, so a re-run retries them (the cache answers everything that succeeded)."""
    manifest = read_manifest(folder) or {}
    reasons = manifest.get("counts", {}).get("rejected_by_reason", {})
    return sum(int(reasons.get(reason, 0)) for reason in FAILED_CALL_REASONS)


@task(name="ordering-check", cache_policy=NO_CACHE)
def ordering_check_task(triples, verifier: VerifierSettings):
    """Triples whose negative is not at least `ordering_margin` farther from the anchor than the positive (encoder
    cosine) move to the quarantine as `ordering`; the rest get their gap in `ordering_gap`. Not retried: the check
    needs the whole triple, and a new negative would need a new round of generation."""
    import pyarrow as pa
    from sentence_transformers import SentenceTransformer

    from tasks.train.backbones import encoder_folder

    model = SentenceTransformer(str(encoder_folder(verifier.ordering_model)))  # CUDA if present
    col = {name: triples.column(name).to_pylist() for name in ("source_id", "anchor", "positive", "negative")}
    gaps = ordering_gaps(col["anchor"], col["positive"], col["negative"],
                         lambda s: model.encode(s, batch_size=64, convert_to_numpy=True))
    keep = gaps >= verifier.ordering_margin
    failed = [{"stage": "verification", "source_id": sid, "kind": "negative", "anchor": a, "base_text": p,
               "text": n, "reason": "ordering",
               "detail": f"cos(a,s+) − cos(a,s−) = {g:.3f} < margin {verifier.ordering_margin}"}
              for sid, a, p, n, g, k in zip(col["source_id"], col["anchor"], col["positive"], col["negative"], gaps,
                                            keep) if not k]
    triples = triples.set_column(triples.schema.get_field_index("ordering_gap"), "ordering_gap",
                                 pa.array(gaps.astype(float)))
    return triples.filter(pa.array(keep)), failed

