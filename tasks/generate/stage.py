"""Stage 1, `generate-sts-triples`: LLM pattern simulation (NGCSE), in the stage outline (tasks.core.stage).

For n source sentences sampled from the corpus: s+ from the anchor, then (STS) s^m and s- from s+, each prompt kind
run in batches with the run's fixed in-context examples. `prepare_generation` reads and checks every input before
anything is spent on the LLM; `generate_triples` writes triples.parquet and rejected.parquet into the stage folder
and returns the manifest; `publish_generation` creates the artifacts.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.contracts import REJECTED_SCHEMA, TRIPLES_SCHEMA, StageIO, rejected_table, triples_table, used_source_ids
from tasks.core.artifacts import Progress, publish_links, publish_markdown, publish_table
from tasks.core.config import ConfigError, CorpusSettings, LLMSettings
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.runs import run_version
from tasks.core.stage import StageFolder, run_logger, stage_key
from tasks.core.store import fingerprint, read_manifest, sha256_path
from tasks.corpus.sentences import Corpus, load_corpus
from tasks.generate.anchors import sample_anchors
from tasks.generate.batches import generate_batch, generate_source_batch
from tasks.generate.candidates import CHOICE_VERSION, NEGATIVE_CHOICE, Chooser, pattern_targets
from tasks.generate.combined_verifier import load_verifier_model
from tasks.generate.generation import FAILED_CALL_REASONS, Judge, Plan, Source, kind_counts, next_slot
from tasks.generate.patterns import PatternSource, in_band, load_pattern_source, sample_examples
from tasks.generate.roles import ROLE_TEMPLATE, RoleCheck, role_template
from tasks.generate.settings import GenerateSettings, VerifierSettings
from tasks.generate.validation import prompt_example_sentences
from tasks.generate.verification import load_judge_template, ordering_gaps
from tasks.llm.batch import MAX_BATCH_LINES
from tasks.llm.client import merge_stats
from tasks.llm.cost import cost_line, llm_cost, prices_of
from tasks.llm.endpoint import check_endpoint, endpoint_kind
from tasks.llm.local_models import load_encoder
from tasks.llm.prompting import KINDS_BY_PATTERN, PromptTemplate, generation_bases, load_template

STAGE = "generate-sts-triples"
IO = StageIO(reads={}, writes={"triples.parquet": tuple(TRIPLES_SCHEMA.names),
                               "rejected.parquet": tuple(REJECTED_SCHEMA.names)})  # reads the corpus, no stage

@task(name="check-llm-endpoint", cache_policy=NO_CACHE)
def check_llm_endpoint(llm: LLMSettings) -> list[str]:
    return check_endpoint(llm)


@task(name="load-corpus", cache_policy=NO_CACHE)
def load_corpus_task(settings: CorpusSettings) -> Corpus:
    return load_corpus(settings)


def _summary_markdown(counts: dict, stats: dict, cost: dict, seconds: float, folder: Path) -> str:
    lines = [f"# generate-sts-triples — {counts['triples']} triples from {counts['sources']} source sentences", "",
             "| kind | slots | accepted | acceptance | attempts/accepted |", "|---|---|---|---|---|"]
    for kind, c in counts["per_kind"].items():
        rate = c["accepted"] / c["slots"] if c["slots"] else 0.0
        per = c["attempts"] / c["accepted"] if c["accepted"] else 0.0
        lines.append(f"| {kind} | {c['slots']} | {c['accepted']} | {rate:.1%} | {per:.2f} |")
    rps = stats["requests_sent"] / seconds if seconds else 0.0
    lines += ["", f"- HTTP requests: {stats['requests_sent']} ({rps:.2f}/s over {seconds:.1f} s of generation), "
              f"retries {stats['retries']}, failed calls {stats['failures']}, cache hits {stats['cache_hits']}",
              f"- tokens: {cost_line(cost)}",
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


def chooser_of(cfg: GenerateSettings, patterns: PatternSource) -> Chooser:
    """The run's best-of-N rule: for the STS pattern, intermediates and negatives nearest the pattern source's own
    cosine in their band (computed once, only when there are choices to rank); NLI contradictions the first."""
    choice = cfg.sampling.intermediate_choice
    if cfg.pattern.kind != "sts":  # NLI contradictions stay on topic: no cosine band for them
        return Chooser(NEGATIVE_CHOICE[cfg.pattern.kind], intermediate_choice=choice)
    ceiling = cfg.validation.negative_max_cosine
    if cfg.sampling.candidates < 2:
        if ceiling is not None:  # loaded here, not inside the request loop, where loading would stall paced requests
            load_encoder(Chooser().encoder)
        return Chooser(NEGATIVE_CHOICE["sts"], negative_max_cosine=ceiling, intermediate_choice=choice)
    bands = {k: [(p.sentence1, p.sentence2) for p in patterns.pairs if in_band(p, "sts", k)]
             for k in ("intermediate", "negative")}
    return Chooser(NEGATIVE_CHOICE["sts"], targets=pattern_targets(bands), negative_max_cosine=ceiling,
                   intermediate_choice=choice)


def generate_by_source(sources: list[Source], kinds, plan: Plan, llm: LLMSettings, accepted: dict[str, dict],
                       quarantine: list[dict], progress: Progress) -> dict:
    """Batches of sources, every kind of each chained (tasks.generate.generation.generate_chains); fills `accepted` and
    `quarantine`, returns the LLM stats."""
    stats_total: dict = {}
    step = batch_step(plan.settings.batch_size, llm.max_concurrency)
    for start in range(0, len(sources), step):
        batch = sources[start : start + step]
        gens, rejected, stats = generate_source_batch(batch, kinds, plan, llm, progress.advance)
        for g in gens:
            accepted[g["kind"]][g["source_id"]] = g
        quarantine.extend(rejected)
        stats_total = merge_stats(stats_total, stats)
    return stats_total


def generate_by_kind(sources: list[Source], kinds, plan: Plan, llm: LLMSettings, accepted: dict[str, dict],
                     quarantine: list[dict], progress: Progress) -> dict:
    """Kind after kind, in batches of slots (a single-slot server keeps one few-shot prefix; the Batch API sends one
    batch per kind and attempt round); fills `accepted` and `quarantine`, returns the LLM stats."""
    stats_total: dict = {}
    step = MAX_BATCH_LINES if plan.settings.batch_api else batch_step(plan.settings.batch_size, llm.max_concurrency)
    for kind in kinds:
        slots = []
        for src in sources:
            texts = {k: accepted[k][src.source_id]["text"] for k in kinds if src.source_id in accepted[k]}
            slot, row = next_slot(src, kind, kinds, texts, plan.bases)
            if slot is None:
                quarantine.append(row)
            else:
                slots.append(slot)
        progress.advance(len(sources) - len(slots))
        for start in range(0, len(slots), step):
            batch = slots[start : start + step]
            gens, rejected, stats = generate_batch(batch, kind, plan, llm, progress.advance)
            accepted[kind].update({g["source_id"]: g for g in gens})
            quarantine.extend(rejected)
            stats_total = merge_stats(stats_total, stats)
    return stats_total



@dataclass
class GenerationJob:
    """Stage 1's inputs, read and checked: the settings, prompt templates, judges, few-shot examples and sources."""

    cfg: GenerateSettings
    llm: LLMSettings  # the generator's endpoint
    kinds: tuple[str, ...]
    templates: dict[str, PromptTemplate]
    judges: dict[str, Judge]
    patterns: PatternSource
    examples: dict[str, list]
    corpus: Corpus
    sample: pd.DataFrame
    anchor_counts: dict  # candidates, rejected by reason, sampled per source (tasks/generate/anchors.py)
    prepare_s: float
    avoided: frozenset[str] = frozenset()  # source ids earlier runs of the dataset used (avoid_used_sources)
    shown: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the example sentences each prompt shows
    roles: RoleCheck | None = None  # the positives' role check (verifier.roles)

    @property
    def bases(self) -> dict[str, str]:
        """What each kind is derived from (pattern.intermediate_base)."""
        return generation_bases(self.kinds, self.cfg.pattern.intermediate_base)

    @functools.cached_property
    def inputs(self) -> list[dict]:  # the pattern files are hashed once, for the key and the manifest
        model = self.cfg.verifier.model
        return self.corpus.inputs + self.patterns.inputs() + (
            [{"path": model, "sha256": sha256_path(Path(model)), "role": "verifier-model"}] if model else [])

    @property
    def judge_llm(self) -> LLMSettings | None:
        return (self.cfg.verifier.llm or self.llm) if self.judges else None  # None: judge off (judge_model null)

    def key(self) -> str:
        # `params`: the part's name of the keys written before the stage outline, so their outputs stay reusable.
        avoided = {"avoided": fingerprint(sorted(self.avoided))} if self.avoided else {}
        return stage_key(STAGE, params=self.cfg, llm=self.llm, inputs=[i["sha256"] for i in self.inputs],
                         choice=CHOICE_VERSION,
                         prompts={k: t.sha256 for k, t in self.templates.items()}
                         | {f"judge-{k}": j.template.sha256 for k, j in self.judges.items()}
                         | ({"roles": self.roles.template.sha256} if self.roles else {}), **avoided)


def prepare_generation(cfg: GenerateSettings, llm: LLMSettings, output_dir: str) -> GenerationJob:
    """Every input read and validated before anything is spent on the LLM: bad files fail here, nothing written."""
    t0 = time.perf_counter()
    kinds = KINDS_BY_PATTERN[cfg.pattern.kind]
    templates = {k: load_template(cfg.pattern.kind, k) for k in kinds}
    combined = load_verifier_model(cfg.verifier.model) if cfg.verifier.model else None  # bad file: fails here
    judges = {k: Judge(load_judge_template(k, cfg.verifier.template_dir), cfg.verifier, cfg.seed, combined)
              for k in kinds if k in cfg.verifier.judged_kinds} if cfg.verifier.judge else {}
    roles = role_check_of(cfg)
    patterns = load_pattern_source(cfg.pattern)
    examples = sample_examples(patterns, kinds, cfg.pattern.examples_per_prompt, cfg.seed,
                               cfg.pattern.intermediate_examples)
    # What copied_example compares with; a template that shows no examples fails here, nothing spent or written.
    shown = {k: prompt_example_sentences(templates[k], examples[k]) for k in kinds} \
        if cfg.validation.copied_example else {}
    corpus = load_corpus_task(cfg.corpus)
    if cfg.avoid_used_sources and run_version(output_dir) is None:
        raise ConfigError(f"avoid_used_sources looks for the runs beside this one, but {output_dir} is not a run "
                          "folder: give run='auto' (or a run name) with it, so the earlier runs are its neighbours.")
    avoided = used_source_ids(Path(output_dir)) if cfg.avoid_used_sources else frozenset()
    sample, anchor_counts = sample_anchors(corpus, cfg.n, cfg.seed, cfg.anchors, exclude=avoided)
    return GenerationJob(cfg, llm, kinds, templates, judges, patterns, examples, corpus, sample, anchor_counts,
                         round(time.perf_counter() - t0, 3), avoided, shown, roles)


def role_check_of(cfg: GenerateSettings) -> RoleCheck | None:
    """The positives' role check of a run (None: off)."""
    if not cfg.verifier.roles:
        return None
    if cfg.batch_api:
        raise ConfigError("verifier.roles asks one question per positive as soon as it is generated, which the Batch "
                          "API's rounds do not do: turn verifier.roles off or run without batch_api.")
    return RoleCheck(role_template(), DEFAULT_ENCODER, cfg.verifier.role_min_match,
                     cfg.verifier.attempts, cfg.seed)


def generate_triples(job: GenerationJob, out: StageFolder) -> dict:
    """Generate, verify and write the triples and the quarantine into `out`; returns the manifest's body."""
    cfg, kinds, templates, judges = job.cfg, job.kinds, job.templates, job.judges
    llm = job.llm
    served = check_llm_endpoint(llm)  # only when there is work for it: a reused stage needs no endpoint
    if (judges or job.roles) and cfg.verifier.llm:  # a separate judge endpoint must be reachable before any spending
        try:
            check_llm_endpoint(cfg.verifier.llm)
        except ConfigError as err:
            raise ConfigError(f"verifier.llm (the endpoint of the judge{' and the role check' if job.roles else ''}"
                              f"): {err}") from None
    if job.roles is not None:
        load_encoder(job.roles.encoder)  # before the request loop: loading inside it would stall paced requests
    systems = {k: templates[k].system_message([vars(e) for e in job.examples[k]]) for k in kinds}
    accepted: dict[str, dict[str, dict]] = {k: {} for k in kinds}
    quarantine: list[dict] = list(job.corpus.rejected)
    progress = Progress("generate", cfg.n * len(kinds), f"{cfg.n} sentences × {len(kinds)} kinds")
    t_gen = time.perf_counter()
    request_order = cfg.resolved_request_order(llm)
    sources = [Source(s.source_id, s.text) for s in job.sample.itertuples(index=False)]
    generate = generate_by_source if request_order == "by_source" else generate_by_kind
    chooser = chooser_of(cfg, job.patterns)
    stats = generate(sources, kinds, Plan(templates, systems, judges, chooser, cfg, job.shown, job.roles, job.bases), llm,
                     accepted, quarantine, progress)
    counts_per_kind = kind_counts(kinds, accepted, quarantine)
    generation_s = round(time.perf_counter() - t_gen, 3)

    order = {sid: i for i, sid in enumerate(job.sample["source_id"])}
    quarantine.sort(key=lambda r: (r.get("stage") != "input", order.get(r.get("source_id"), -1),
                                   kinds.index(r["kind"]) if r.get("kind") in kinds else -1, r.get("attempt") or 0))
    judge_llm = job.judge_llm
    triples = triples_table(job.sample, accepted, kinds=kinds, pattern=cfg.pattern.kind, model=llm.model,
                            prompts={k: t.name for k, t in templates.items()},
                            example_ids={k: [e.example_id for e in job.examples[k]] for k in kinds},
                            bases=job.bases,
                            judge_model=judge_llm.model if judge_llm else None)
    if cfg.verifier.ordering_margin is not None and triples.num_rows and cfg.pattern.kind == "sts":
        triples, failed = ordering_check_task(triples, cfg.verifier)
        quarantine.extend(failed)
    counts = _counts(job, triples.num_rows, quarantine, counts_per_kind)
    stats = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in stats.items()}
    for name in ("requests_sent", "retries", "failures", "cache_hits", "prompt_tokens", "completion_tokens",
                 "cached_prompt_tokens", "cached_completion_tokens"):
        stats.setdefault(name, 0)
    out.write_parquet("triples.parquet", triples)
    out.preview = triples.slice(0, 10).select(["anchor", "positive", "intermediate", "negative"]).to_pylist()
    out.write_parquet("rejected.parquet", rejected_table(quarantine))
    return {
        "seed": cfg.seed, "parameters": {**cfg.model_dump(mode="json"), "llm": llm.model_dump(mode="json")},
        "inputs": job.inputs,
        "prompts": {k: {"name": t.name, "version": t.version, "sha256": t.sha256} for k, t in templates.items()},
        "examples": {k: [vars(e) for e in job.examples[k]] for k in kinds},
        "generation_bases": job.bases,
        "best_of_n": {"candidates": cfg.sampling.candidates, "negative_choice": chooser.negative_choice,
                      "encoder": chooser.encoder, "pattern_cosine_targets": dict(chooser.targets)},
        "verifier": {"judge_model": judge_llm.model if judge_llm else None,
                     "judge_prompts": {k: {"name": j.template.name, "sha256": j.template.sha256}
                                       for k, j in judges.items()},
                     "thresholds": {k: cfg.verifier.threshold_for(k) for k in judges},
                     "role_check": {"prompt": ROLE_TEMPLATE, "sha256": job.roles.template.sha256,
                                    "model": (cfg.verifier.llm or llm).model,
                                    "encoder": job.roles.encoder, "min_match": job.roles.min_match}
                     if job.roles else None,
                     "ordering_margin": cfg.verifier.ordering_margin},
        "llm": {"model": llm.model, "served_models": served,
                "model_sha256": llm.model_sha256,
                # Set by whoever started the embedded server (the CLI, the local stack): llama-server or
                # llama-cpp-python; None for an endpoint stsgen did not start.
                "server_engine": llm.server_engine, "request_order": request_order,
                "endpoint_kind": endpoint_kind(llm.base_url)},
        "llm_stats": stats, "cost": llm_cost(stats, triples.num_rows, "triple", prices_of(llm)),
        "counts": counts, "timings": {"prepare_s": job.prepare_s, "generation_s": generation_s},
    }


def _counts(job: GenerationJob, triples: int, quarantine: list[dict], per_kind: dict) -> dict:
    reasons = dict(Counter(row["reason"] for row in quarantine))
    by_kind: dict[str, Counter] = {}
    for row in quarantine:
        if row.get("kind"):
            by_kind.setdefault(row["kind"], Counter())[row["reason"]] += 1
    return {"sources": job.cfg.n, "triples": triples, "incomplete_sources": job.cfg.n - triples,
            "rejected_rows": len(quarantine), "rejected_by_reason": reasons,
            "rejected_by_kind": {k: dict(v) for k, v in by_kind.items()}, "per_kind": per_kind,
            "corpus": job.corpus.stats, "anchors": job.anchor_counts,
            "duplicate_corpus_texts_skipped": job.anchor_counts["duplicate_texts"],
            "pattern_bad_rows": len(job.patterns.bad_rows), "sources_avoided": len(job.avoided)}


def publish_generation(out: StageFolder, manifest: dict) -> None:
    counts = manifest["counts"]
    publish_markdown("generate-summary", _summary_markdown(counts, manifest["llm_stats"], manifest["cost"],
                                                           manifest["timings"]["generation_s"], out.folder),
                     "Stage 1 summary")
    publish_table("generate-samples", out.preview, "Sample triples")
    publish_links("generate", out.committed,
                  "Stage 1 output files")
    run_logger().info(f"{counts['triples']}/{counts['sources']} complete triples, "
                      f"{counts['rejected_rows']} quarantined rows → {out.folder}")
    if counts["rejected_by_reason"].get("llm_error"):
        run_logger().warning("%d LLM calls failed after retries (quarantined as llm_error): a re-run retries "
                                 "only those; every accepted generation is cached.",
                                 counts["rejected_by_reason"]["llm_error"])

def failed_llm_calls(folder: Path) -> int:
    """LLM calls that failed after retries in the committed run (a transient outage, not a verdict on the data): a
    stage with any is not reused as is, so a re-run retries them (the cache answers everything that succeeded)."""
    manifest = read_manifest(folder) or {}
    reasons = manifest.get("counts", {}).get("rejected_by_reason", {})
    return sum(int(reasons.get(reason, 0)) for reason in FAILED_CALL_REASONS)


def reusable(folder: Path) -> bool:
    """A committed stage 1 is reused as is unless some of its LLM calls failed (a re-run retries exactly those)."""
    return not failed_llm_calls(folder)


@task(name="ordering-check", cache_policy=NO_CACHE)
def ordering_check_task(triples, verifier: VerifierSettings):
    """Triples whose negative is not at least `ordering_margin` farther from the anchor than the positive (encoder
    cosine) move to the quarantine as `ordering`; the rest get their gap in `ordering_gap`. Not retried: the check
    needs the whole triple, and a new negative would need a new round of generation."""
    import pyarrow as pa

    from tasks.llm.local_models import load_encoder

    model = load_encoder(verifier.ordering_model)
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

