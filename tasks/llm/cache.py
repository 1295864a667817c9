"""Persistent, content-addressed LLM response cache (SQLite, WAL).

Key = sha256 of the canonical JSON of (model, messages, sampling params): the same request is never paid twice,
across runs and processes. Each row stores a sha256 of its payload; a row whose payload does not match is treated as
missing (and overwritten), never returned as valid. Only successful responses are stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def request_key(model: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    canonical = json.dumps({"model": model, "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, payload TEXT NOT NULL, checksum TEXT NOT NULL)"
        )
        self.corrupt_entries = 0

    @staticmethod
    def _checksum(payload: str) -> str:
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT payload, checksum FROM responses WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        payload, checksum = row
        try:
            if self._checksum(payload) == checksum:
                return json.loads(payload)
        except json.JSONDecodeError:
            pass
        with self._lock:  # callers on several threads: the count must not lose an increment
            self.corrupt_entries += 1
        return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        payload = json.dumps(value, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, payload, checksum) VALUES (?, ?, ?)",
                (key, payload, self._checksum(payload)),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
