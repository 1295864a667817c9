"""One quality table per pipeline run, read from the stages' manifests: what a user checks before using the data or
the model — stage-1 acceptance and verifier rejections, stage-3 label quality, pattern distances to STS-B, and the
surrogate against its backbone."""

from __future__ import annotations

from pathlib import Path

from tasks.core.artifacts import publish_links, publish_markdown, publish_table
from tasks.core.hf_dataset import export_run
from tasks.core.store import read_manifest
from tasks.llm.cost import cost_line


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _context_weight(labeler: dict) -> float:
    """The context label's share of a combined label: the manifest's (rounded) value, else what the others leave."""
    if "context_weight" in labeler:
        return labeler["context_weight"]
    return max(0.0, round(1 - labeler["rating_weight"] - labeler.get("tfidf_weight", 0)
                          - labeler.get("teacher_weight", 0), 6))


def quality_rows(manifests: dict[str, dict]) -> list[dict]:
    """[{"stage", "measure", "value"}] from the manifests of a run's stages (missing stages are skipped)."""
    rows: list[dict] = []

    def add(stage: str, measure: str, value) -> None:
        rows.append({"stage": stage, "measure": measure, "value": value})

    gen = manifests.get("generate-sts-triples")
    if gen:
        counts, stats = gen.get("counts", {}), gen.get("llm_stats", {})
        triples, sources = counts.get("triples", 0), counts.get("sources", 0)
        add("generate", "complete triples / source sentences", f"{triples} / {sources} ({_pct(triples / sources if sources else None)})")
        for kind, c in counts.get("per_kind", {}).items():
            add("generate", f"{kind}: accepted / generations tried",
                f"{c['accepted']} / {c['attempts']} ({_pct(c['accepted'] / c['attempts'] if c['attempts'] else None)})")
        requests = stats.get("requests_sent", 0)
        add("generate", "LLM requests per complete triple (generation + judge)",
            f"{requests / triples:.2f}" if triples else "n/a")
        if gen.get("cost"):
            add("generate", "LLM tokens (cached answers included) and money at the given prices", cost_line(gen["cost"]))
        for kind, reasons in sorted(counts.get("rejected_by_kind", {}).items()):
            verifier = {r: n for r, n in reasons.items() if r.startswith(("judge_", "ordering"))}
            if verifier:
                add("generate", f"{kind}: verifier rejections", ", ".join(f"{r} {n}" for r, n in sorted(verifier.items())))
    label = manifests.get("label-pairs")
    if label:
        quality = label.get("quality", {})
        hierarchy = quality.get("hierarchy") or {}
        add("label", "hierarchy label(a,s+) > label(a,sm) > label(a,s-)",
            f"{_pct(hierarchy.get('rate'))} of {hierarchy.get('triples', 0)} triples")
        add("label", "label(a,s+) > label(a,s-)",
            f"{_pct(hierarchy.get('pos_over_neg_rate'))} of {hierarchy.get('pos_over_neg_triples', 0)} triples")
        gold = quality.get("gold")
        if gold:
            add("label", "label–gold Spearman ×100", f"{gold['spearman']:.1f} on {gold['pairs']} pairs")
        for column, q in quality.get("columns", {}).items():  # each label column on its own
            h, g = q["hierarchy"], q["gold"]
            add("label", f"{column}: hierarchy / a+ > a- / gold Spearman ×100",
                f"{_pct(h.get('rate'))} / {_pct(h.get('pos_over_neg_rate'))} / "
                + ("n/a" if g is None else f"{g['spearman']:.1f}"))
        if (label.get("cost") or {}).get("prompt_tokens"):
            add("label", "LLM rating tokens and money at the given prices", cost_line(label["cost"]))
        labeler = label.get("labeler") or {}
        add("label", "labeler", labeler.get("method", "n/a") + (
            f" ({labeler['rating_weight']}·rating/5 + {labeler.get('tfidf_weight', 0):.2f}·TF-IDF cosine + "
            + (f"{labeler['teacher_weight']:.2f}·teacher cosine + " if labeler.get("teacher_weight") else "")
            + f"{_context_weight(labeler):.2f}·context label)"
            if "rating_weight" in labeler else ""))
    patterns = manifests.get("report-patterns")
    if patterns:
        for relation, d in patterns.get("distances", {}).items():
            add("patterns", f"(a, {relation}) vs STS-B dev: Wasserstein MER / cosine",
                f"{d['mer_wasserstein']:.3f} / {d['cosine_wasserstein']:.3f}"
                if d.get("mer_wasserstein") is not None else "n/a")
    train = manifests.get("train-surrogate")
    if train and train.get("selection"):
        sel = train["selection"]
        for name, after in sel.get("surrogate", {}).items():
            before = sel.get("backbone", {}).get(name)
            if before is not None:
                add("train", f"{name}: backbone → surrogate (Spearman ×100)",
                    f"{before:.2f} → {after:.2f} ({after - before:+.2f})")
        add("train", "shipped model", "backbone (training did not help)" if sel.get("shipped_step") == 0 else
            f"checkpoint of step {sel.get('shipped_step')}")
    return rows


def quality_markdown(rows: list[dict]) -> str:
    return "\n".join(["| stage | measure | value |", "|---|---|---|",
                      *(f"| {r['stage']} | {r['measure']} | {r['value']} |" for r in rows)])


def stage_rows(outputs: dict[str, dict[str, str]], manifests: dict[str, dict], started: float) -> list[dict]:
    """One row per stage of a pipeline run: computed or reused (its manifest older than the run's start), cache key,
    time, counts, manifest path."""
    rows = []
    for stage, paths in outputs.items():
        manifest = manifests[stage]
        rows.append({"stage": stage,
                     "ran": "computed" if Path(paths["manifest"]).stat().st_mtime >= started else "reused",
                     "cache_key": manifest.get("cache_key", "")[:12],
                     "seconds (when computed)": manifest.get("timings", {}).get("total_s"),
                     "counts": {k: v for k, v in manifest.get("counts", {}).items() if isinstance(v, (int, float))},
                     "manifest": paths["manifest"]})
    return rows


def run_manifests(outputs: dict) -> dict[str, dict]:
    """Each stage's manifest ({} when missing), read once, from a pipeline run's outputs ({stage: paths})."""
    return {stage: read_manifest(Path(paths["manifest"]).parent) or {} for stage, paths in outputs.items()
            if isinstance(paths, dict) and "manifest" in paths}


def publish_run_report(outputs: dict[str, dict[str, str]], started: float, output_dir: str) -> None:
    """The pipeline run's artifacts: the stage table, the run's tables as Hugging Face datasets, the quality table."""
    manifests = run_manifests(outputs)
    publish_table("pipeline-stages", stage_rows(outputs, manifests, started),
                  "sts-pipeline stages (cache key, counts, manifest)")
    publish_links("hf-datasets", export_run(Path(output_dir)),
                  "The run's tables as Hugging Face datasets (datasets.load_from_disk, each with a dataset card)")
    publish_markdown("pipeline-quality", "# sts-pipeline — quality of this run\n\n" +
                     quality_markdown(quality_rows(manifests)),
                     "Run quality: acceptance, verifier, labels, patterns, surrogate vs backbone")
