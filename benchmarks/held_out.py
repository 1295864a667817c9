"""The held-out STS sets the benchmarks confirm on (never choose on): SICK trial and the STS12 train pairs, read in
place from ../shared/data (these machines only; nothing of it goes into git). A module of its own, light on imports,
so a harness that only evaluates (benchmarks/data_value.py, on a GPU machine too) does not load the labeler."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.core.sts_data import read_sick

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SICK_TRIAL = SHARED_DATA / "sick2014" / "SICK_trial.txt"


def held_out_pairs(name: str) -> pd.DataFrame:
    """Every pair (s1, s2, gold) of SICK trial (`sick-trial`) or the STS12 train files (`sts12-train`), read in place
    from ../shared/data: the held-out domains labelers and trained models are confirmed on."""
    data = SHARED_DATA
    if name == "sick-trial":
        frame = read_sick(SICK_TRIAL)
    else:
        frame = pd.concat([pd.read_csv(f, sep="\t", header=None, names=["gold", "s1", "s2"], quoting=3)
                           for f in sorted((data / "sts12-train").glob("*.tsv"))], ignore_index=True)
    return frame.dropna(subset=["s1", "s2", "gold"]).assign(relation="pair")
