"""Figures as PNG outputs: matplotlib without a display, written through the one atomic writer."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402

from tasks.core.store import atomic_write_bytes  # noqa: E402

__all__ = ["plt", "save_figure"]


def save_figure(fig, path: Path) -> Path:
    """Lay out, render to PNG, close the figure, and write `path` atomically (readers never see half a PNG)."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue())
    return path
