"""The runs a dataset is built from: found under an output directory (every finished run, oldest first) or named,
each read and checked before anything is written — a run without a committed stage 1, or runs of different patterns
mixed without `allow_mixed`, stop the build with one message naming the run and the fix."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.core.config import ConfigError
from tasks.core.runs import RUN_FILE, list_runs, run_version
from tasks.core.store import MANIFEST, read_manifest, sha256_path, verify_outputs

GENERATE, LABEL = "generate-sts-triples", "label-pairs"


@dataclass
class RunInput:
    """One run's accepted triples (and labeled pairs, when stage 3 ran) with what identifies them."""

    name: str
    folder: Path
    pattern: str
    triples: pa.Table
    pairs: pa.Table | None
    triples_sha256: str
    pairs_sha256: str | None
    generate_manifest_sha256: str
    corpus_sources: dict = field(default_factory=dict)  # stage 1's per-source table of its corpus (the card's)
    labeler: dict | None = None  # how stage 3 computed the pairs' `label` (its manifest's `labeler`)

    def describe(self) -> dict:
        return {"run": self.name, "pattern": self.pattern, "triples": self.triples.num_rows,
                "pairs": None if self.pairs is None else self.pairs.num_rows, "triples_sha256": self.triples_sha256,
                "pairs_sha256": self.pairs_sha256, "generate_manifest_sha256": self.generate_manifest_sha256,
                "labeler": self.labeler}


def pattern_of(manifest: dict) -> str:
    """The pattern kind (sts / nli) a stage-1 manifest records; "?" for one written before it was recorded."""
    return (manifest.get("parameters") or {}).get("pattern", {}).get("kind", "?")


def finished_runs(runs_dir: Path) -> tuple[list[Path], list[dict]]:
    """The runs under `runs_dir` that finished with a committed stage 1, oldest first, and the others with why they
    were left out (in progress, failed, interrupted, no stage 1): a scheduled build takes what is done."""
    if not runs_dir.is_dir():
        raise ConfigError(f"{runs_dir} is not a folder of runs: pass the --output-dir the runs wrote to, or name the "
                          "runs with --run.")
    found, skipped = [], []
    for run in list_runs(runs_dir):
        if run["status"] != "finished":
            skipped.append({"run": run["name"], "why": run["status"]})
        elif GENERATE not in run["stages"]:
            skipped.append({"run": run["name"], "why": f"no finished {GENERATE}"})
        else:
            found.append(Path(run["path"]))
    return found, skipped


def accumulated_runs(run_folder: Path, pattern: str) -> tuple[list[Path], list[dict]]:
    """The runs a pipeline run trains on: every earlier finished run of the same pattern beside it (the same
    output_dir), oldest first, then the run itself (still running, its stages 1–3 committed); and the runs left out
    with why. A plain (unversioned) output_dir has no earlier runs: the run alone."""
    if run_version(run_folder) is None:
        return [run_folder], []
    earlier, skipped = finished_runs(run_folder.parent)
    skipped = [s for s in skipped if s["run"] != run_folder.name]  # the run itself is running: it is added below
    found = []
    for folder in earlier:
        if folder.resolve() == run_folder.resolve():
            continue
        kind = pattern_of(read_manifest(folder / GENERATE) or {})
        if kind != pattern:
            skipped.append({"run": folder.name, "why": f"pattern {kind}, not {pattern}"})
        else:
            found.append(folder)
    return [*found, run_folder], skipped


def _committed_table(stage_folder: Path, name: str) -> tuple[pa.Table, str, str, dict] | None:
    """(table, its sha256, the manifest's sha256, the manifest) of a committed stage output, or None when the stage
    never ran. The table's sha256 is the manifest's, just verified."""
    manifest = read_manifest(stage_folder)
    if manifest is None:
        return None
    if name not in manifest.get("outputs", {}) or not verify_outputs(stage_folder, manifest):
        raise ConfigError(f"{stage_folder}: its files no longer match manifest.json (changed or removed since the run "
                          "committed them): re-run that run, or leave it out.")
    return (pq.read_table(stage_folder / name), manifest["outputs"][name]["sha256"],
            sha256_path(stage_folder / MANIFEST), manifest)


def read_run(folder: Path) -> RunInput:
    """A run folder's stage-1 triples and stage-3 pairs, checked; ConfigError naming the folder otherwise."""
    if (folder / MANIFEST).is_file() and folder.name in (GENERATE, LABEL):
        raise ConfigError(f"{folder} is a stage folder: pass its run folder {folder.parent}.")
    stage1 = _committed_table(folder / GENERATE, "triples.parquet")
    if stage1 is None:
        raise ConfigError(f"{folder}: no finished {GENERATE} (no {GENERATE}/manifest.json) — the run is still going, "
                          "was interrupted, or is not a run folder: let it finish (re-run it to resume), or leave it "
                          "out of the build.")
    triples, triples_sha, manifest_sha, manifest = stage1
    pattern = pattern_of(manifest)
    stage3 = _committed_table(folder / LABEL, "pairs.parquet")
    sources = ((manifest.get("counts") or {}).get("corpus") or {}).get("sources") or {}
    return RunInput(folder.resolve().name, folder, pattern, triples, stage3[0] if stage3 else None, triples_sha,
                    stage3[1] if stage3 else None, manifest_sha, sources, stage3[3].get("labeler") if stage3 else None)


def labeler_note(runs: list) -> str | None:
    """A warning when the runs' pairs were labeled with different settings (e.g. before and after a change of the
    default mix): one `label` column would then hold targets of different scales and orders. None when they agree."""
    kinds: dict[str, list[str]] = {}
    for r in runs:
        if r.pairs is not None:
            kinds.setdefault(json.dumps(r.labeler, sort_keys=True), []).append(r.name)
    if len(kinds) < 2:
        return None
    groups = "; ".join(f"{', '.join(names)}: {json.loads(k) or 'not recorded'}" for k, names in kinds.items())
    return (f"the runs' pairs were labeled with {len(kinds)} different labelers, so the version's `label` mixes "
            f"their targets ({groups}); re-label the older runs with `./stsgen label` at today's settings, or build "
            "from runs of one labeler")


def _started(folder: Path) -> float:
    """When a run started (its .run.json), so "keep the first" means the earliest run whatever order they are named
    in; a folder without one goes after the runs that have it (then by name: the order never depends on mtimes)."""
    try:
        return float(json.loads((folder / RUN_FILE).read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return float("inf")


def read_runs(folders: list[Path], allow_mixed: bool) -> list[RunInput]:
    """Every run read and checked (all before any work); one pattern unless `allow_mixed`."""
    if not folders:
        raise ConfigError("No finished run to build a dataset from: run generate-sts-triples (or the pipeline) first.")
    names = [f.resolve().name for f in folders]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"Run {', '.join(repeated)} is named twice: give each run once.")
    runs = sorted((read_run(f) for f in folders), key=lambda r: (_started(r.folder), r.name))  # oldest first
    patterns: dict[str, list[str]] = {}
    for r in runs:
        patterns.setdefault(r.pattern, []).append(r.name)
    if len(patterns) > 1 and not allow_mixed:
        listed = "; ".join(f"{p}: {', '.join(names)}" for p, names in sorted(patterns.items()))
        raise ConfigError(f"The runs were made with different patterns ({listed}): an STS dataset and an NLI dataset "
                          "train different things. Build them apart, or pass --allow-mixed to build one from both.")
    return runs
