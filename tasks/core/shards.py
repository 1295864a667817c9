"""Shard files with one marker protocol, shared by every sharded stage.

A shard writes `<name>.parquet`, then `<name>.json` holding the Parquet file's sha256 and the shard's counts; a shard
is finished when its marker exists and the file matches it. A torn or missing marker, or a file that does not match,
means the shard is computed again — never read half-written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.store import sha256_path, write_json, write_parquet


def _marker(out: Path) -> Path:
    return Path(out).with_suffix(".json")


def finished_shard(out: str | Path) -> dict[str, Any] | None:
    """The counts of a finished shard at `out`, or None when it must be computed (again)."""
    out, marker = Path(out), _marker(Path(out))
    if not (out.is_file() and marker.is_file()):
        return None
    try:
        done = json.loads(marker.read_text())
    except ValueError:  # a torn marker: the shard is simply redone
        return None
    if not isinstance(done, dict) or done.get("sha256") != sha256_path(out):
        return None
    return done.get("counts", {})


def commit_shard(out: str | Path, table: pa.Table, counts: dict[str, Any] | None = None) -> None:
    """Write the shard's table, then its marker (checksum + counts): the marker last commits the shard."""
    digest = write_parquet(Path(out), table)
    write_json(_marker(Path(out)), {"sha256": digest, "counts": counts or {}})
