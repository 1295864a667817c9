"""Prefect artifacts for the UI (progress, tables, markdown, links), plus in-process progress listeners (the CLI's
progress bar). Artifact keys: lowercase letters, digits and dashes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

ProgressListener = Callable[[str, int, int], None]  # (stage, done, total)
_listeners: list[ProgressListener] = []
_lock = threading.Lock()


def add_progress_listener(listener: ProgressListener) -> None:
    with _lock:
        _listeners.append(listener)


def remove_progress_listener(listener: ProgressListener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


class Progress:
    """A progress artifact (percent) updated as units of work finish."""

    def __init__(self, stage: str, total: int, description: str):
        self.stage, self.total, self.done = stage, max(total, 1), 0
        self._advance_lock = threading.Lock()  # shard callbacks and the rating's worker thread both advance it
        self._id = create_progress_artifact(0.0, key=f"{stage}-progress", description=description)
        self._notify(0)

    def advance(self, units: int) -> None:
        with self._advance_lock:
            self.done = done = min(self.total, self.done + units)
        if self._id is not None:
            # _sync: advanced from inside the event loop of an async batch too, where Prefect would hand back a coroutine
            update_progress_artifact(self._id, progress=100.0 * done / self.total, _sync=True)
        self._notify(done)

    def _notify(self, done: int) -> None:
        notify_progress(self.stage, done, self.total)


def notify_progress(stage: str, done: int, total: int) -> None:
    """Tell every in-process listener (the CLI's progress display) how far `stage` is."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(stage, done, total)


def publish_table(key: str, rows: list[dict], description: str) -> None:
    create_table_artifact(table=rows, key=key, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    create_markdown_artifact(markdown=markdown, key=key, description=description)


def publish_image(key: str, png: Path, description: str) -> None:
    """An image artifact of a PNG file; as a data: URL the plot lives inside Prefect's database, viewable without
    access to the run's files."""
    import base64

    image_url = "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode()
    create_image_artifact(image_url=image_url, key=key, description=description)


def publish_links(prefix: str, files: dict[str, Path], description: str) -> None:
    """One link artifact per file, keyed `<prefix>-<file name>` (e.g. generate-triples-parquet)."""
    for name, path in files.items():
        key = f"{prefix}-" + "".join(ch if ch.isalnum() else "-" for ch in name.lower())
        create_link_artifact(link=Path(path).resolve().as_uri(), link_text=name, key=key, description=description)
