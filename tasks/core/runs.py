"""Run-scoped outputs: every run writes a version of its own, never over another run's.

A flow given `run` (the CLI and the deployments give `auto`) writes into `<output_dir>/<run>/<stage>/`, `auto` being
`<UTC date-time>-<flow run name>`. While it runs it holds the folder's lock (`.lock`, an flock the kernel releases
if the process dies), so a second run into the same folder fails at its start instead of mixing outputs. When the
run finishes, `<output_dir>/latest` is pointed at it (a symlink replaced atomically); a run that fails or is killed
leaves `latest` where it was. `.run.json` says when a run started and how it ended. The lock file lives in
`$STSGEN_HOME/locks/` (keyed by the folder's path), so a run refused for bad input writes nothing under output_dir.

An unchanged stage is reused across runs by its content key, not by sharing a folder: each committed stage folder
is recorded in `<output_dir>/.stage-index/<stage>/<key>.json`, and a later run whose stage key matches gets the
committed files hard-linked (copied where links are impossible) into its own folder. Earlier runs stay until
`stsgen runs prune` removes them (hard links keep a reused file alive in the runs that still hold it).

`run=None` keeps the folder `output_dir` itself (the Python API's default, and how `sts-pipeline` passes its run
folder to its stages): it is still locked for the duration of the flow.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import json
import os
import shutil
import threading
import time
import typing
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from tasks.core.errors import ConfigError
from tasks.core.home import DATASETS_DIR, LATEST, OUTPUTS_DIR, TRAINED_DIR, latest_output, stsgen_home  # noqa: F401
from tasks.core.store import MANIFEST, committed, read_manifest, sha256_bytes, write_json

RUN_FILE = ".run.json"
INDEX = ".stage-index"

_held: set[str] = set()  # folders whose lock this process holds (a pipeline's stage subflows run inside them)
_versioned: set[str] = set()  # run folders (not plain output_dirs) this process writes: their stages are indexed
_held_lock = threading.Lock()  # flows on several threads of one process check and join under it


class RunFolderBusy(ConfigError):
    """Another process holds the run folder."""


def new_run_name() -> str:
    """`<UTC YYYYmmdd-HHMMSS>-<flow run name>` (the Prefect flow run's name when there is one, else the pid)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    try:
        from prefect.runtime import flow_run

        name = flow_run.name
    except Exception:  # outside a flow run
        name = None
    return f"{stamp}-{name or os.getpid()}"


def point_latest(root: Path, name: str) -> None:
    """`<root>/latest` → `name`, replaced atomically: readers see the old target or the new one."""
    tmp = root / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(name, target_is_directory=True)
    os.replace(tmp, root / LATEST)


@contextlib.contextmanager
def open_run(output_dir: str | Path, run: str | None) -> Iterator[Path]:
    """The folder a flow writes its stage folders into, locked while the flow runs (see the module doc)."""
    root = Path(output_dir)
    if run is not None and (not run or "/" in run or run in (LATEST, ".", "..") or run.startswith(".")):
        raise ConfigError(f"run = {run!r} is not a usable run name: give 'auto' or a plain folder name "
                          f"(not '{LATEST}', no '/').")
    folder = root if run is None else root / (new_run_name() if run == "auto" else run)
    key = str(folder.resolve())
    with _held_lock:
        joined = key in _held
    if joined:  # this process already runs in it (a pipeline's stage subflow): its owner locks and finishes it
        yield folder
        return
    handle = lock_file(folder)
    with _held_lock:
        _held.add(key)
    if run is not None:
        _versioned.add(key)
    record = {"name": folder.name, "started": time.time(), "pid": os.getpid()}
    try:
        yield folder
    except BaseException as exc:
        if run is not None and folder.is_dir():  # a run refused before it wrote anything leaves no folder
            write_json(folder / RUN_FILE, record | {"status": "failed", "ended": time.time(),
                                                     "error": type(exc).__name__})
        raise
    else:
        if run is not None:
            folder.mkdir(parents=True, exist_ok=True)
            write_json(folder / RUN_FILE, record | {"status": "finished", "ended": time.time()})
            point_latest(root, folder.name)
    finally:
        with _held_lock:
            _held.discard(key)
            _versioned.discard(key)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _lock_path(folder: Path) -> Path:
    return stsgen_home() / "locks" / f"{sha256_bytes(str(folder.resolve()).encode())[:24]}.lock"


def lock_file(folder: Path):
    """An open lock file held exclusively for `folder`, or RunFolderBusy naming the holder."""
    path = _lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise RunFolderBusy(f"{folder} is in use by another run ({holder}): wait for it to finish, or give another "
                            "run name (--run NAME, or 'auto' for a new folder).") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}, since {datetime.now(timezone.utc).isoformat(timespec='seconds')}, {folder}")
    handle.flush()
    return handle


def is_locked(folder: Path) -> bool:
    try:
        handle = lock_file(folder)
    except RunFolderBusy:
        return True
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()
    return False


def run_scoped(fn):
    """Decorator for a flow function with `output_dir` and `run` parameters (put it under `@flow`): the body runs
    with `output_dir` = the run folder, locked (see `open_run`)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        with open_run(bound.arguments["output_dir"], bound.arguments["run"]) as folder:
            bound.arguments["output_dir"], bound.arguments["run"] = str(folder), None
            return fn(*bound.args, **bound.kwargs)

    # Prefect validates the parameters from the wrapper's annotations, which it would resolve in this module's
    # namespace: hand it the flow module's resolved ones.
    wrapper.__annotations__ = typing.get_type_hints(fn)
    wrapper.__signature__ = inspect.signature(fn, eval_str=True)
    return wrapper


def _is_run_folder(folder: Path) -> bool:
    return str(folder.resolve()) in _versioned or (folder / RUN_FILE).is_file()


def _run_root(stage_folder: Path) -> Path | None:
    """The output_dir of a versioned run's stage folder (`<output_dir>/<run>/<stage>`), else None."""
    run = stage_folder.parent
    return run.parent if _is_run_folder(run) else None


def run_version(folder: str | Path) -> str | None:
    """The run name (the data's version) of a run folder, or None for a plain output_dir."""
    folder = Path(folder)
    return folder.resolve().name if _is_run_folder(folder) else None


def _index_entry(root: Path, stage: str, key: str) -> Path:
    return root / INDEX / stage / f"{key[:32]}.json"


def register_stage(stage_folder: Path, key: str) -> None:
    """Record a committed stage folder of a versioned run under its content key (the stage outline calls it once
    the manifest is written; a plain output_dir is not indexed)."""
    root = _run_root(stage_folder)
    if root is not None:
        write_json(_index_entry(root, stage_folder.name, key),
                    {"key": key, "folder": str(stage_folder.relative_to(root))})


def reuse_from_other_run(stage_folder: Path, key: str) -> bool:
    """Fill `stage_folder` with another run's committed outputs of the same key (hard links): True when done."""
    root = _run_root(stage_folder)
    entry = _index_entry(root, stage_folder.name, key) if root is not None else None
    if entry is None or not entry.is_file():
        return False
    try:
        source = root / json.loads(entry.read_text())["folder"]
    except (ValueError, KeyError):
        return False
    if source.resolve() == stage_folder.resolve() or not committed(source, key):
        return False
    names = [*read_manifest(source)["outputs"], MANIFEST]  # the manifest last: it commits the folder
    for name in names:
        target = stage_folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        try:
            os.link(source / name, target)
        except OSError:
            shutil.copy2(source / name, target)
    return committed(stage_folder, key)


def list_runs(output_dir: str | Path) -> list[dict]:
    """The versioned runs under `output_dir`, oldest first: name, status, start, stages, whether `latest`."""
    root = Path(output_dir)
    latest = os.readlink(root / LATEST) if (root / LATEST).is_symlink() else None
    runs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")) \
            if root.is_dir() else []:
        stages = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        run_file = folder / RUN_FILE
        if not run_file.is_file() and not stages:  # not a run folder
            continue
        try:
            info = json.loads(run_file.read_text()) if run_file.is_file() else {}
        except ValueError:
            info = {}
        status = info.get("status") or ("running" if is_locked(folder) else "interrupted")
        runs.append({"name": folder.name, "status": status, "started": info.get("started", folder.stat().st_mtime),
                     "stages": [s for s in stages if (folder / s / "manifest.json").is_file()],
                     "latest": folder.name == latest, "path": str(folder)})
    return sorted(runs, key=lambda r: r["started"])


def prune_runs(output_dir: str | Path, keep: int) -> list[str]:
    """Remove all but the newest `keep` finished runs; never `latest`, a run in progress, or a locked folder."""
    if keep < 0:
        raise ConfigError(f"keep = {keep}: give the number of finished runs to keep (0 or more).")
    done = [r for r in list_runs(output_dir) if r["status"] != "running" and not r["latest"]]
    removed = []
    for run in done[: max(len(done) - keep, 0)]:
        folder = Path(run["path"])
        try:
            handle = lock_file(folder)
        except RunFolderBusy:
            continue  # a run started writing into it after all
        try:
            shutil.rmtree(folder)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        removed.append(run["name"])
    return removed
