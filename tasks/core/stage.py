"""The stage outline every stage flow follows, written once here so no flow writes it again:

    inputs by content hash + the settings fields that change the result (declared on the settings classes)
    → `stage_key` → reuse check (this run's folder, or an earlier run's by content key: tasks.core.runs)
    → the work (shards: tasks.core.runners.map_shards) → outputs, then manifest.json last (it commits the folder)
    → Prefect artifacts → the output paths.

A stage module supplies `compute(out)`, which writes its files through `out` (a `StageFolder`: every file written
through it is listed in the manifest with its sha256) and returns the manifest's body, and `publish(out, manifest)`,
which creates its artifacts; `run_stage` does the rest, in that order. See docs/architecture.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from prefect import get_run_logger
from prefect.exceptions import MissingContextError

from tasks.core.config import key_fields, key_value  # noqa: F401  (key_fields: re-exported beside stage_key)
from tasks.core.runs import register_stage, reuse_from_other_run
from tasks.core.store import (
    MANIFEST,
    committed,
    fingerprint,
    sha256_path,
    write_json,
    write_manifest,
    write_parquet,
)


def stage_key(stage: str, **parts: Any) -> str:
    """The cache key of a stage's outputs: the stage's name and everything its result depends on — input content
    hashes, model checksums, code version, and settings objects (which enter through `key_fields`)."""
    return fingerprint({"stage": stage, **{name: key_value(value) for name, value in parts.items()}})


@dataclass(frozen=True)
class StageIO:
    """What a stage reads from other stages and what it writes, as distilabel steps declare their columns: each
    stage module's `IO`, the one declaration of its outputs. `reads`: "<stage>/<file>" → the columns it needs;
    `writes`: file → the columns it writes (empty for a non-table output), checked by `run_stage` against what the
    stage committed; `names`: the returned path's name of a file where it is not the file's stem.
    tests/pipeline/test_architecture.py checks that every column a stage reads is one the stage it reads from
    writes."""

    reads: dict[str, tuple[str, ...]]
    writes: dict[str, tuple[str, ...]]
    names: dict[str, str] = field(default_factory=dict)

    @property
    def files(self) -> dict[str, str]:
        """Returned path name → file or folder name in the stage folder."""
        return {self.names.get(file, Path(file).name.split(".")[0]): file for file in self.writes}

    def check_written(self, stage: str, folder: Path, optional: tuple[str, ...] = ()) -> None:
        """The committed tables against `writes`: a column written but not declared (or declared but not written) is
        a stage that broke its contract — an error before its manifest commits anything. `optional`: declared tables
        the stage may leave out (build-dataset's pairs, when no run labeled any)."""
        import pyarrow.parquet as pq

        for file, declared in self.writes.items():
            if not declared or not file.endswith(".parquet") or (file in optional and not (folder / file).exists()):
                continue
            written = pq.read_schema(folder / file).names
            extra = [c for c in written if c not in declared]
            missing = [c for c in declared if c not in written]
            if extra or missing:
                raise RuntimeError(f"{stage} wrote {file} with columns its IO.writes does not declare "
                                   f"({', '.join(extra) or 'none'}) or without declared ones "
                                   f"({', '.join(missing) or 'none'}): declare them in the stage module's IO")


@dataclass
class StageFolder:
    """One stage's folder in a run, and the files it commits under `key`."""

    stage: str
    folder: Path
    key: str
    files: dict[str, str]  # returned path name → file or folder name in the stage folder
    digests: dict[str, str] = field(default_factory=dict)  # committed file (relative name) → sha256
    # Sample rows for the artifacts, kept by `compute` from the tables it wrote: `publish` reads nothing back.
    preview: list[dict] = field(default_factory=list)

    @property
    def committed(self) -> dict[str, Path]:
        """Every file the stage committed (its outputs and the manifest), by name: the artifacts link to them."""
        return {name: self.folder / name for name in (*self.digests, MANIFEST)}

    @property
    def paths(self) -> dict[str, str]:
        return {name: str(self.folder / file) for name, file in self.files.items()} | \
            {"manifest": str(self.folder / MANIFEST)}

    def work_dir(self, kind: str, key: str) -> Path:
        """Scratch space that survives an interrupted run (finished shards, checkpoints), keyed by what it holds."""
        return self.folder / f".{kind}" / key[:16]

    def write_parquet(self, name: str, table: pa.Table) -> Path:
        self.digests[name] = write_parquet(self.folder / name, table)
        return self.folder / name

    def write_json(self, name: str, body: Any) -> Path:
        self.digests[name] = write_json(self.folder / name, body)
        return self.folder / name

    def add(self, path: Path) -> Path:
        """Commit a file written in the folder by other means (a plot), or every file under a folder (a model)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: a stage output that was never written cannot be committed")
        for item in ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())):
            self.digests[item.relative_to(self.folder).as_posix()] = sha256_path(item)
        return path


def outputs_current(folder: Path, key: str) -> bool:
    """True when the stage can be skipped: `folder` holds committed outputs for `key`, or another run under the same
    output_dir does and they were linked into `folder` (tasks.core.runs)."""
    return committed(folder, key) or reuse_from_other_run(Path(folder), key)


def run_stage(stage: str, output_dir: str | Path, key: str, io: StageIO,
              compute: Callable[[StageFolder], dict[str, Any]],
              publish: Callable[[StageFolder, dict[str, Any]], None] | None = None,
              reusable: Callable[[Path], bool] = lambda folder: True, started: float | None = None
              ) -> dict[str, str]:
    """Reuse the stage's committed outputs for `key` (unless `reusable(folder)` says not), or compute them: files
    first, the manifest last (a folder without a matching manifest is never taken as done), then the artifacts.
    `started`: when the stage began preparing (its inputs read and checked), for the manifest's `total_s`.
    Returns the output paths either way."""
    out = StageFolder(stage, Path(output_dir) / stage, key, io.files)
    if outputs_current(out.folder, key) and reusable(out.folder):
        run_logger().info("Inputs and parameters unchanged (key %s…): reusing %s", key[:12], out.folder)
        return out.paths
    started = time.perf_counter() if started is None else started
    body = compute(out)  # its writers create the folder: a stage refused before its first write leaves nothing
    io.check_written(stage, out.folder)  # what it wrote is what its IO declares, or nothing is committed
    body["timings"] = {**body.get("timings", {}), "total_s": round(time.perf_counter() - started, 3)}
    write_manifest(out.folder, {"stage": stage, "cache_key": key, **body}, out.digests)
    register_stage(out.folder, key)  # a versioned run's stage: later runs with the same key reuse it
    if publish is not None:
        publish(out, body)
    return out.paths


def run_logger():
    """The flow or task run's logger (shown in the Prefect UI), or the module's outside a run. Stages log through it
    rather than `print` under Prefect's `log_prints`, which also forwards what libraries print into a redirected
    stdout (dill disassembles functions into a captured stdout while `datasets` fingerprints a table)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)
