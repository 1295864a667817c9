"""A dataset version from finished runs: union → evaluation sentences out → duplicates out → a content-addressed
folder `<output_dir>/ds-<key>/` written whole or not at all.

The key is a fingerprint (like a Hugging Face datasets fingerprint) of everything the version's content depends on:
the runs' committed tables (sha256), the evaluation sets, the settings and this code's version. The same runs and
settings give the same version, byte for byte (a second build finds it and writes nothing). The version is built in
a hidden `.partial-…` folder under a lock and renamed into place when complete, so a killed build leaves no version;
`<output_dir>/latest` then points at it.

Version folder: triples.parquet (every run's accepted triples that survived, a `run` column first), pairs.parquet
(stage-3 pairs of those triples, when the runs labeled any), removed.parquet (every removed row: its run, id, the
column that matched, the reason, the kept or evaluation row it matched, the score), hf/triples and hf/pairs
(sentence-transformers columns, `datasets.load_from_disk`), README.md (the card), manifest.json.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.contracts import PAIRS_SCHEMA, TRIPLE_SLOTS, TRIPLES_SCHEMA, StageIO
from tasks.core.artifacts import publish_links, publish_markdown, publish_table
from tasks.core.config import ConfigError, key_fields
from tasks.core.decontamination import EvalSentences, cosine_matches, ngram_containment
from tasks.core.hf_dataset import EXPORTS, corpus_source_lines, hub_metadata, save_st_copy
from tasks.core.runs import RunFolderBusy, lock_file, point_latest
from tasks.core.store import fingerprint, read_manifest, sha256_path, verify_outputs, write_manifest, write_parquet
from tasks.dataset.dedup import dedup_anchors
from tasks.dataset.embeddings import encode_cached
from tasks.dataset.eval_sets import load_eval_sentences
from tasks.dataset.settings import DatasetSettings
from tasks.dataset.sources import RunInput, finished_runs, read_runs
from tasks.llm.local_models import encoder_identity

STAGE = "build-dataset"
CODE_VERSION = "dataset-v1"
REMOVED_SCHEMA = pa.schema([
    ("table", pa.string()),  # triples | pairs
    ("run", pa.string()), ("row_id", pa.string()),  # source_id of a triple, pair_id of a pair
    ("column", pa.string()),  # the sentence that matched (anchor, positive, …)
    ("text", pa.string()), ("reason", pa.string()),
    ("matched_id", pa.string()),  # the kept row (<run>/<source_id>) or the evaluation sentence (<set>:<row>:<col>)
    ("matched_text", pa.string()), ("score", pa.float64()),
])
IO = StageIO(
    reads={"generate-sts-triples/triples.parquet": ("source_id", *TRIPLE_SLOTS),
           "label-pairs/pairs.parquet": ("pair_id", "triple_id", "other_triple_id", "s1", "s2", "label")},
    writes={"triples.parquet": ("run", *TRIPLES_SCHEMA.names), "pairs.parquet": ("run", *PAIRS_SCHEMA.names),
            "removed.parquet": tuple(REMOVED_SCHEMA.names)})


@dataclass
class BuildJob:
    """The build's inputs, read and checked before anything is written."""

    runs: list[RunInput]
    skipped: list[dict]
    settings: DatasetSettings
    evals: EvalSentences
    prepare_s: float

    @functools.cached_property
    def key(self) -> str:
        return fingerprint({"code": CODE_VERSION, "settings": key_fields(self.settings),
                            "encoder": encoder_identity(self.settings.encoder)[1] if self.settings.uses_encoder
                            else None, "eval_sets": self.evals.sources,
                            "runs": [{k: v for k, v in r.describe().items() if k.endswith("sha256") or k == "run"}
                                     for r in self.runs]})

    @property
    def version(self) -> str:
        return f"ds-{self.key[:16]}"


def prepare_build(runs_dir: str | Path, runs: list[str] | None, settings: DatasetSettings) -> BuildJob:
    """Every run and evaluation set read and checked: a run that is not finished, mixed patterns, an unreadable
    evaluation file fail here with one message, before the output folder is touched. `runs`: run folders to use;
    None: every finished run under `runs_dir` (the others are listed in the card as skipped); an empty list is
    refused, not taken as every run."""
    t0 = time.perf_counter()
    if runs is not None:
        folders, skipped = [Path(r) if Path(r).is_dir() or os.sep in r else Path(runs_dir) / r for r in runs], []
    else:
        folders, skipped = finished_runs(Path(runs_dir))
    inputs = read_runs(folders, settings.allow_mixed)
    evals = load_eval_sentences(settings.eval_sets)
    return BuildJob(inputs, skipped, settings, evals, round(time.perf_counter() - t0, 3))


@dataclass
class Selection:
    triples: pa.Table
    pairs: pa.Table | None
    removed: pa.Table
    counts: dict
    timings: dict = field(default_factory=dict)


def union_triples(runs: list[RunInput]) -> pa.Table:
    """Every run's triples, oldest run first, a `run` column in front, in the columns IO declares: a run written by
    older code may lack a column added since (nulls) or carry one dropped since (left out)."""
    tables = [r.triples.add_column(0, "run", pa.array([r.name] * r.triples.num_rows, pa.string())) for r in runs]
    union = pa.concat_tables(tables, promote_options="permissive")
    for name, kind in zip(TRIPLES_SCHEMA.names, TRIPLES_SCHEMA.types):
        if name not in union.column_names:
            union = union.append_column(pa.field(name, kind), pa.nulls(union.num_rows, kind))
    return union.select(list(IO.writes["triples.parquet"]))


def select_triples(triples: pa.Table, settings: DatasetSettings, evals: EvalSentences) -> tuple[np.ndarray, list[dict], dict]:
    """(kept mask, removed rows, timings and counts): sentences of the evaluation sets (any slot by n-grams, anchors
    also by embedding), then exact, near-duplicate and paraphrase anchors (the first kept)."""
    frame = triples.select(["run", "source_id", *TRIPLE_SLOTS]).to_pandas()
    alive = np.ones(len(frame), dtype=bool)
    removed: list[dict] = []
    ids = (frame["run"] + "/" + frame["source_id"]).tolist()
    info: dict = {}

    def drop(found: dict[int, tuple[int, float]], reason: str, column: str, matched_ids, matched_texts) -> None:
        for j, (i, score) in sorted(found.items()):
            alive[j] = False
            removed.append({"table": "triples", "run": frame["run"].iat[j], "row_id": frame["source_id"].iat[j],
                            "column": column, "text": frame[column].iat[j], "reason": reason,
                            "matched_id": matched_ids[i], "matched_text": matched_texts[i], "score": score})

    anchors = frame["anchor"].tolist()
    t = time.perf_counter()
    vectors, encoded = encode_cached(anchors + evals.texts, settings.encoder) if settings.uses_encoder else (None, 0)
    info["embed_s"], info["sentences_encoded"] = round(time.perf_counter() - t, 3), encoded

    # Evaluation sentences first, so a duplicate is never removed for a kept row that is then found contaminated.
    # Every slot's text in one sparse product; a triple goes with its first matching slot.
    t = time.perf_counter()
    stacked = frame[list(TRIPLE_SLOTS)].melt(ignore_index=False, var_name="column", value_name="text").dropna()
    best, share = ngram_containment(stacked["text"].tolist(), evals, settings.eval_ngram)
    hits = stacked.assign(best=best, share=share)
    hits = hits[hits["share"] >= settings.eval_containment]
    for row, hit in hits[~hits.index.duplicated()].iterrows():  # the flagged rows only
        drop({row: (int(hit["best"]), round(float(hit["share"]), 4))}, "eval_overlap", hit["column"], evals.ids,
             evals.texts)
    if settings.eval_cosine is not None and len(evals.texts):
        best, cosine = cosine_matches(vectors[:len(anchors)], vectors[len(anchors):])
        flagged = np.nonzero((cosine >= settings.eval_cosine) & alive)[0]
        drop({int(j): (int(best[j]), round(float(cosine[j]), 4)) for j in flagged}, "eval_paraphrase", "anchor",
             evals.ids, evals.texts)
    info["eval_s"] = round(time.perf_counter() - t, 3)

    # Duplicates among the rest, the earliest kept.
    t = time.perf_counter()
    for reason, found in dedup_anchors(anchors, vectors, settings, alive, info).items():
        drop(found, reason, "anchor", ids, anchors)
    info["dedup_s"] = round(time.perf_counter() - t, 3)
    return alive, removed, info


def select_pairs(runs: list[RunInput], removed_triples: set[str]) -> tuple[pa.Table | None, list[dict]]:
    """The runs' labeled pairs whose triples were kept (`removed_triples`: `<run>/<source_id>`), and the others as
    removed rows."""
    tables = [r.pairs.add_column(0, "run", pa.array([r.name] * r.pairs.num_rows, pa.string()))
              for r in runs if r.pairs is not None]
    if not tables:
        return None, []
    # Runs labeled before a column existed (teacher_cosine) get it as nulls: the empty table of the one schema first.
    schema = pa.schema([("run", pa.string()), *PAIRS_SCHEMA])
    pairs = pa.concat_tables([schema.empty_table(), *tables], promote_options="permissive").select(schema.names)
    keys = {name: pc.binary_join_element_wise(pairs["run"], pc.fill_null(pairs[name], ""), "/")
            for name in ("triple_id", "other_triple_id")}
    removed_set = pa.array(sorted(removed_triples), pa.string())
    gone = pc.or_(pc.is_in(keys["triple_id"], value_set=removed_set),
                  pc.is_in(keys["other_triple_id"], value_set=removed_set))
    dropped = pairs.filter(gone).select(["run", "pair_id", "s1", "triple_id", "other_triple_id"]).to_pylist()
    def removed_triple(pair: dict) -> str:
        own = f"{pair['run']}/{pair['triple_id']}"
        return own if own in removed_triples else f"{pair['run']}/{pair['other_triple_id']}"

    rows = [{"table": "pairs", "run": p["run"], "row_id": p["pair_id"], "column": "s1", "text": p["s1"],
             "reason": "triple_removed", "matched_id": removed_triple(p), "matched_text": None, "score": None}
            for p in dropped]
    return pairs.filter(pc.invert(gone)), rows


def select(job: BuildJob) -> Selection:
    """The version's tables from the job's runs (pure: reads nothing but the encoder cache, writes only it)."""
    triples = union_triples(job.runs)
    alive, removed, info = select_triples(triples, job.settings, job.evals)
    removed_triples = {f"{r['run']}/{r['row_id']}" for r in removed}
    pairs, removed_pairs = select_pairs(job.runs, removed_triples)
    removed_table = pa.Table.from_pylist(removed + removed_pairs, schema=REMOVED_SCHEMA)
    reasons = Counter((r["table"], r["reason"]) for r in removed + removed_pairs)
    counts = {"runs": len(job.runs), "runs_skipped": len(job.skipped), "triples_in": triples.num_rows,
              "triples": int(alive.sum()), "pairs_in": sum(r.pairs.num_rows for r in job.runs if r.pairs is not None),
              "pairs": 0 if pairs is None else pairs.num_rows, "eval_sentences": len(job.evals.texts),
              "removed_by_reason": {table: {reason: n for (t, reason), n in sorted(reasons.items()) if t == table}
                                    for table in ("triples", "pairs")},
              "sentences_encoded": info.pop("sentences_encoded")}
    return Selection(triples.filter(pa.array(alive)), pairs, removed_table, counts, info)


def _at_least(threshold: float | None) -> str:
    return "(check off)" if threshold is None else f"≥ {threshold}"


def card(job: BuildJob, selection: Selection) -> str:
    """README.md of a version: hub metadata, then every run it came from, its counts and what was removed and why."""
    features = {c: "string" for c in EXPORTS["triples"].columns.values()}
    per_run = Counter(selection.triples["run"].to_pylist())
    counts, s = selection.counts, job.settings
    lines = [
        hub_metadata(selection.triples.num_rows, features), "",
        f"# stsgen dataset {job.version}", "",
        f"{counts['triples']} (anchor, positive, intermediate, negative) triples and {counts['pairs']} labeled pairs "
        f"from {counts['runs']} stsgen runs, deduplicated and decontaminated (`datasets.load_from_disk('hf/triples')`"
        ", or the Parquet files).", "",
        "## Runs", "", "| run | pattern | triples in | kept | pairs in | triples sha256 |", "|---|---|---|---|---|---|",
        *[f"| {r.name} | {r.pattern} | {r.triples.num_rows} | {per_run.get(r.name, 0)} | "
          f"{'-' if r.pairs is None else r.pairs.num_rows} | `{r.triples_sha256[:16]}…` |" for r in job.runs],
        *(["", "Left out (not finished): " + ", ".join(f"{x['run']} ({x['why']})" for x in job.skipped)]
          if job.skipped else []),
        "", "## Removed (every row in removed.parquet, with what it matched)", "",
        "| table | reason | rows |", "|---|---|---|",
        *[f"| {table} | {reason} | {n} |" for table, reasons in counts["removed_by_reason"].items()
          for reason, n in reasons.items()],
        "", "- duplicate_source: the same anchor (normalized) as an earlier row; near_duplicate_anchor: character "
        f"{s.shingle_chars}-gram Jaccard ≥ {s.near_duplicate_jaccard} (MinHash LSH, {s.num_perm} permutations); "
        f"paraphrase_anchor: `{s.encoder}` cosine {_at_least(s.paraphrase_cosine)}. The earliest run's row is kept.",
        f"- eval_overlap: a sentence holds ≥ {s.eval_containment:.0%} of an evaluation sentence's word "
        f"{s.eval_ngram}-grams; eval_paraphrase: an anchor at cosine {_at_least(s.eval_cosine)} to one. Evaluation sets: "
        + ", ".join(f"{e['source'] if e['source'].startswith('stsb-') else Path(e['source']).name} "
                    f"({e['sentences']} sentences)" for e in job.evals.sources) + ".",
        "- triple_removed: a pair of a removed triple.",
        *corpus_source_lines({name: row for r in job.runs for name, row in r.corpus_sources.items()}), "",
        "## Provenance", "", f"- version key `{job.key}` (code {CODE_VERSION}); manifest.json lists every file's "
        "sha256, the settings and each run's committed tables.",
        "- generated by LLM pattern simulation (see each run's stage-1 dataset card for the model and prompts).", "",
    ]
    return "\n".join(lines)


def _clean_partials(root: Path) -> None:
    for stale in root.glob(".partial-*"):  # killed builds (the caller holds the lock: no build is writing them)
        shutil.rmtree(stale, ignore_errors=True)


def build_version(job: BuildJob, output_dir: str | Path) -> tuple[Path, dict, bool]:
    """(version folder, its manifest, reused): the existing version of the job's key, or a new one built in a partial
    folder and renamed into place; `<output_dir>/latest` points at it either way."""
    started = time.perf_counter()
    root = Path(output_dir)
    final = root / job.version
    root.mkdir(parents=True, exist_ok=True)
    try:
        handle = lock_file(root)
    except RunFolderBusy:
        raise ConfigError(f"Another build-dataset is writing into {root}: wait for it to finish (its version is "
                          "found, not rebuilt, when the runs are the same), or give another --output-dir.") from None
    try:
        _clean_partials(root)
        manifest = read_manifest(final)
        if manifest and verify_outputs(final, manifest):
            point_latest(root, final.name)
            return final, manifest, True
        selection = select(job)
        partial = root / f".partial-{job.version}-{os.getpid()}"
        digests = {"triples.parquet": write_parquet(partial / "triples.parquet", selection.triples),
                   "removed.parquet": write_parquet(partial / "removed.parquet", selection.removed)}
        if selection.pairs is not None:
            digests["pairs.parquet"] = write_parquet(partial / "pairs.parquet", selection.pairs)
        # What it wrote is what its IO declares (the check run_stage makes for the other stages), or no version.
        IO.check_written(STAGE, partial, optional=("pairs.parquet",))
        text = card(job, selection)
        for name, table in (("triples", selection.triples), ("pairs", selection.pairs)):
            if table is not None and table.num_rows:
                save_st_copy(table, EXPORTS[name], partial / "hf" / name, partial / f"{name}.parquet")
                (partial / "hf" / name / "README.md").write_text(text)
        (partial / "README.md").write_text(text)
        digests |= {p.relative_to(partial).as_posix(): sha256_path(p) for p in sorted(partial.rglob("*"))
                    if p.is_file() and p.name not in digests}
        timings = {"prepare_s": job.prepare_s, **selection.timings, "total_s": round(time.perf_counter() - started, 3)}
        write_manifest(partial, {"stage": STAGE, "version": job.version, "dataset_key": job.key,
                                 "runs": [r.describe() for r in job.runs], "skipped_runs": job.skipped,
                                 "settings": job.settings.model_dump(mode="json"), "eval_sets": job.evals.sources,
                                 "counts": selection.counts, "timings": timings}, digests)
        if final.exists():  # an earlier version folder that fails its checksums: replaced whole
            shutil.rmtree(final)
        os.rename(partial, final)  # the version appears complete or not at all
        point_latest(root, final.name)
        return final, read_manifest(final), False
    finally:
        with contextlib.suppress(OSError):
            handle.close()


def removed_sample(folder: Path, rows: int = 20) -> list[dict]:
    """The first removed rows of a version, for the UI."""
    import pyarrow.parquet as pq

    return pq.read_table(folder / "removed.parquet").slice(0, rows).to_pylist()


def summary_markdown(folder: Path, manifest: dict, reused: bool) -> str:
    counts = manifest["counts"]
    removed = ", ".join(f"{t}: {r} {n}" for t, reasons in counts["removed_by_reason"].items()
                        for r, n in reasons.items()) or "none"
    return "\n".join([
        f"# build-dataset — {manifest['version']}{' (reused: same runs and settings)' if reused else ''}", "",
        f"- {counts['triples']} / {counts['triples_in']} triples and {counts['pairs']} / {counts['pairs_in']} pairs "
        f"kept from {counts['runs']} runs ({counts['runs_skipped']} left out: not finished)",
        f"- removed: {removed}", f"- evaluation sentences checked: {counts['eval_sentences']}",
        f"- timings: {manifest['timings']}", f"- folder: `{folder}`"])


# Named as every stage's outputs are (the pipeline's run report reads them).
VERSION_FILES = {"triples": "triples.parquet", "pairs": "pairs.parquet", "removed": "removed.parquet",
                 "card": "README.md", "manifest": "manifest.json"}


def publish_build(folder: Path, manifest: dict, reused: bool) -> dict[str, str]:
    """The version's artifacts (summary, the first removed rows, file links); returns its folder and files."""
    publish_markdown("build-dataset-summary", summary_markdown(folder, manifest, reused), "Dataset version")
    publish_table("build-dataset-removed", removed_sample(folder), "First rows removed (removed.parquet has all)")
    paths = {"dataset": folder,
             **{name: folder / file for name, file in VERSION_FILES.items() if (folder / file).is_file()}}
    publish_links("build-dataset", paths, "Dataset files")
    return {name: str(path) for name, path in paths.items()}
