"""A blind reading of triples before and after a change, on the same sources (issue 34's targets).

`prepare` draws a seeded sample of the sources both runs completed (and adds every source whose triple changed),
writes each source's triple of either run as
rows to read — one row per distinct triple (where both runs wrote the same triple, one row stands for both) — in a
shuffled order, and keeps which run wrote which row in a separate key file the reader does not open. `score` joins the
reader's verdicts with the key: per run, the share of positives at STS ≥ 4 and keeping every fact, of good
intermediates and of good negatives (data/annotations/README.md's criteria), with Wilson 95 % intervals; `fresh` rows
(`--fresh N`) are a sample of the whole after run, for targets stated on a run.

    .venv/bin/python -m benchmarks.blind_reading prepare --before RUN_A --after RUN_B --k 30 \\
        --out data/annotations/blind_reading_34.csv --key data/annotations/blind_reading_34.key.csv
    .venv/bin/python -m benchmarks.blind_reading score data/annotations/blind_reading_34.csv \\
        data/annotations/blind_reading_34.key.csv
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from scipy.stats import binomtest

SLOTS = ("anchor", "positive", "intermediate", "negative")
VERDICTS = ("positive_sts4", "positive_every_fact", "intermediate_verdict", "negative_verdict")


def triples(run: Path) -> pd.DataFrame:
    folder = run / "generate-sts-triples" if (run / "generate-sts-triples").is_dir() else run
    return pq.read_table(folder / "triples.parquet").to_pandas().set_index("source_id")[list(SLOTS)]


def prepare(before: Path, after: Path, k: int, seed: int, fresh: int = 0,
            every_changed: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows to read, the key: item → the runs that wrote it). `fresh`: that many more of the after run's triples,
    drawn from all of its sources (key `fresh`: the targets' sample of the whole run). `every_changed=False`: only the
    k sampled sources (a change that touches most triples would otherwise put every source in the reading)."""
    a, b = triples(before), triples(after)
    common = sorted(set(a.index) & set(b.index))
    chosen = pd.Series(common).sample(n=min(k, len(common)), random_state=seed).tolist()
    # Every source whose triple changed is read too: where the runs differ is what the change did.
    if every_changed:
        chosen += [sid for sid in common if sid not in chosen and tuple(a.loc[sid]) != tuple(b.loc[sid])]
    rows, key = [], []
    for sid in chosen:
        before_t, after_t = tuple(a.loc[sid]), tuple(b.loc[sid])
        items = [(before_t, "before+after")] if before_t == after_t else [(before_t, "before"), (after_t, "after")]
        for text, runs in items:
            rows.append(dict(zip(SLOTS, text)))
            key.append({"source_id": sid, "runs": runs})
    others = pd.Series(sorted(set(b.index) - set(chosen)))
    for sid in others.sample(n=min(fresh, len(others)), random_state=seed).tolist():
        rows.append(dict(zip(SLOTS, tuple(b.loc[sid]))))
        key.append({"source_id": sid, "runs": "fresh"})
    frame = pd.DataFrame(rows)
    frame.insert(0, "item", range(len(frame)))
    order = frame.sample(frac=1.0, random_state=seed + 1).index
    frame, key_frame = frame.loc[order].reset_index(drop=True), pd.DataFrame(key).loc[order].reset_index(drop=True)
    frame["item"] = key_frame["item"] = range(len(frame))
    for column in VERDICTS:
        frame[column] = ""
    frame["note"] = ""
    return frame, key_frame


def score(reading: pd.DataFrame, key: pd.DataFrame) -> pd.DataFrame:
    joined = reading.merge(key, on="item")
    out = []
    for run in ("before", "after", "fresh"):
        part = joined[joined["runs"].str.split("+").map(lambda runs, r=run: r in runs)]
        row = {"run": run, "triples": len(part)}
        for column in VERDICTS:
            good = int(part[column].str.strip().str.lower().eq("good").sum())
            low, high = binomtest(good, len(part)).proportion_ci(method="wilson") if len(part) else (math.nan,) * 2
            row[column] = f"{good}/{len(part)} ({good / max(len(part), 1):.0%}, CI {low:.0%}–{high:.0%})"
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--before", type=Path, required=True)
    p.add_argument("--after", type=Path, required=True)
    p.add_argument("--k", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", type=int, default=0, help="more of the after run's triples, from all its sources")
    p.add_argument("--sample-only", action="store_true",
                   help="read only the k sampled sources, not also every source whose triple changed")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--key", type=Path, required=True)
    s = sub.add_parser("score")
    s.add_argument("reading", type=Path)
    s.add_argument("key", type=Path)
    args = ap.parse_args()
    if args.command == "prepare":
        rows, key = prepare(args.before, args.after, args.k, args.seed, args.fresh, not args.sample_only)
        rows.to_csv(args.out, index=False)
        key.to_csv(args.key, index=False)
        print(f"{len(rows)} rows to read ({int(key['runs'].eq('before+after').sum())} written alike by both runs) "
              f"→ {args.out}; key → {args.key}")
    else:
        table = score(pd.read_csv(args.reading, keep_default_na=False), pd.read_csv(args.key))
        print("| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns))
        for row in table.itertuples(index=False):
            print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    main()
