"""The budget search of benchmarks/data_value.py (`--search-budget`), torch-free: for each learning rate the steps
double while the mean STS-B dev over seeds improves, and the best (steps, lr) on that mean is the row's. The harness
runs it on freshly trained candidates (benchmarks/data_value_selection.py's train_candidate); `python -m
benchmarks.data_value_search` replays it over fixed-budget rows already measured (CSVs run apart, as a GPU-less
machine affords them one budget at a time), so a search run by hand has a command and the same rule.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from benchmarks.data_value_columns import DEV, FIXED_BUDGET
from benchmarks.data_value_report import at_size, is_trained, read_joined


@dataclass
class SeedRun:
    model: object  # the seed's best trained weights on dev
    best_step: int
    best_dev: float
    seconds: float


@dataclass
class Candidate:
    """One budget trained for every seed; `dev` (the mean over seeds of each seed's best trained dev) chooses."""
    steps: int
    lr: float
    batch_size: int
    runs: dict[int, SeedRun] = field(default_factory=dict)

    @property
    def dev(self) -> float:
        return float(np.mean([r.best_dev for r in self.runs.values()])) if self.runs else float("nan")

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs.values())

    def label(self) -> str:
        return f"{self.steps}@{self.lr:g}"


def ladder(start: int, most: int) -> list[int]:
    """start, 2·start, 4·start, … up to `most`."""
    steps = [start]
    while steps[-1] * 2 <= most:
        steps.append(steps[-1] * 2)
    return steps


def search_budget(run: Callable[[int, float], Candidate], steps: list[int], lrs: list[float]
                  ) -> tuple[Candidate, list[Candidate]]:
    """For each lr (smallest first), the steps in order while the candidate's mean dev over seeds improves on the
    previous steps' (the first that does not ends that lr); the chosen candidate is the best on that mean (a tie keeps
    the earlier tried). Only STS-B dev is read: no other set is evaluated on a candidate. → (chosen, every tried,
    in order); the weights of candidates not chosen are dropped as the search goes."""
    best, tried = None, []
    for lr in sorted(lrs):
        previous = float("-inf")
        for n in steps:
            candidate = run(n, lr)
            tried.append(candidate)
            if best is None or candidate.dev > best.dev:
                _without_weights(best)
                best = candidate
            else:
                _without_weights(candidate)
            if not candidate.dev > previous:
                break
            previous = candidate.dev
    return best, tried


def _without_weights(candidate: Candidate | None) -> None:
    """Drop a candidate's trained models (kept: its per-seed steps, dev and seconds, for the record)."""
    for seed, r in (candidate.runs.items() if candidate else ()):
        candidate.runs[seed] = SeedRun(None, r.best_step, r.best_dev, r.seconds)


def search_record(chosen: Candidate, tried: list[Candidate], steps: list[int] | None) -> str:
    """The search as a CSV cell: every candidate's mean dev, the chosen one, and whether it sits at the ladder's top
    (still improving there: the search's cap, not a plateau)."""
    if steps is None:
        return FIXED_BUDGET
    cells = "; ".join(f"{c.label()} dev {c.dev:.2f}" for c in tried)
    capped = " (at the ladder's top: may be under-trained)" if chosen.steps == max(steps) else ""
    return f"searched on STS-B dev: {cells} → {chosen.label()}{capped}"


class NotMeasured(LookupError):
    """The replayed search needs a budget that no CSV given holds."""

    def __init__(self, steps: int, lr: float):
        super().__init__(f"{steps}@{lr:g}")
        self.steps, self.lr = steps, lr


def lr_key(lr: float) -> float:
    """A learning rate as the CSVs round-trip it (3e-05 written, 3e-5 asked)."""
    return float(f"{float(lr):.6g}")


def measured_candidates(table: pd.DataFrame, kind: str) -> dict[tuple[int, float], Candidate]:
    """Each fixed budget (steps, lr) of one data kind's trained rows (one size) as a Candidate of every seed: the
    row's `STS-B dev` is its best trained checkpoint's, the harness's choice. Refused: no such row, several sizes,
    a batch size that changes (the search holds it), budgets over different seeds (their means would not compare)."""
    rows = table[is_trained(table) & (table["data"] == kind)]
    if "budget" in rows:  # a searched row carries its search, not one budget; a CSV older than the column: all fixed
        rows = rows[rows["budget"].fillna(FIXED_BUDGET) == FIXED_BUDGET]
    if rows.empty:
        raise SystemExit(f"no fixed-budget '{kind}' row in these CSVs (they hold: "
                         f"{', '.join(table.loc[is_trained(table), 'data'].unique()) or 'no trained row'})")
    for column, what in (("anchors", "sizes: pick one with --anchors"), ("batch_size", "batch sizes")):
        if rows[column].nunique() > 1:
            raise SystemExit(f"'{kind}' rows of several {what} ({', '.join(map(str, sorted(rows[column].unique())))})")
    candidates = {}
    for (steps, lr), g in rows.groupby(["steps", "lr"]):
        candidate = Candidate(int(steps), lr_key(lr), int(g["batch_size"].iloc[0]))
        candidate.runs = {int(r.seed): SeedRun(None, int(r.best_step), float(r[DEV]), float(r.train_s))
                          for _, r in g.iterrows()}
        candidates[(candidate.steps, candidate.lr)] = candidate
    seeds = {c.label(): sorted(c.runs) for c in candidates.values()}
    if len({tuple(s) for s in seeds.values()}) > 1:
        raise SystemExit(f"'{kind}' budgets trained on different seeds ({seeds}): their mean dev does not compare")
    return candidates


def replay(candidates: dict[tuple[int, float], Candidate], steps: list[int], lrs: list[float]
           ) -> tuple[list[Candidate], Candidate, NotMeasured | None]:
    """search_budget over measured candidates → (every candidate it tried, in order; the best of them on mean dev;
    the budget it would train next where no CSV holds it, else None: the search then is incomplete, and its choice
    only the best so far)."""
    tried: list[Candidate] = []

    def run(n: int, lr: float) -> Candidate:
        if (n, lr_key(lr)) not in candidates:
            raise NotMeasured(n, lr)
        tried.append(candidates[(n, lr_key(lr))])
        return tried[-1]

    try:
        search_budget(run, steps, lrs)
        missing = None
    except NotMeasured as needed:
        missing = needed
    if not tried:
        raise SystemExit(f"the search starts at {missing}, which no CSV holds: nothing to replay")
    return tried, max(tried, key=lambda c: c.dev), missing  # max keeps the first of a tie, as search_budget


def main(argv: list[str]) -> None:
    """`python -m benchmarks.data_value_search CSV[+CSV…] --data KIND [--anchors N] [--steps N]
    [--search-max-steps N] [--search-lrs LR,LR]`: the search's path over the rows measured, and its choice."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data_value_search",
                                     description="replay data_value.py's --search-budget over fixed-budget rows "
                                                 "already measured")
    parser.add_argument("csvs", help="harness CSVs (benchmarks/data_value.py --table-out), joined with +")
    parser.add_argument("--data", required=True, help="the data kind whose budget is searched (simcse, triples, …)")
    parser.add_argument("--anchors", type=int, help="the size, where the CSVs trained several")
    parser.add_argument("--steps", type=int, default=100, help="the ladder's first rung (data_value.py --steps)")
    parser.add_argument("--search-max-steps", type=int, default=1600, help="the ladder's top")
    parser.add_argument("--search-lrs", default="3e-5,1e-4",
                        help="the learning rates (default: anchors_curve.sh bellm's)")
    args = parser.parse_args(argv)
    table = at_size(read_joined(args.csvs), args.anchors, args.csvs)
    steps, lrs = ladder(args.steps, args.search_max_steps), [float(lr) for lr in args.search_lrs.split(",")]
    tried, chosen, missing = replay(measured_candidates(table, args.data), steps, lrs)
    print(f"{args.data}: the budget search (steps {', '.join(map(str, steps))}; lr {', '.join(f'{lr:g}' for lr in lrs)}"
          "), mean STS-B dev over seeds of each seed's best trained checkpoint:")
    for c in tried:
        last = sum(r.best_step == c.steps for r in c.runs.values())
        print(f"  {c.label()}: dev {c.dev:.2f}, best steps {', '.join(str(r.best_step) for r in c.runs.values())}"
              + (f" (the last in {last} of {len(c.runs)} seeds)" if last else ""))
    if missing is not None:
        print(f"incomplete: the search trains {missing} next, which no CSV holds (data_value.py --data {args.data} "
              f"--steps {missing.steps} --lr {missing.lr:g}); best so far {chosen.label()}, dev {chosen.dev:.2f}")
    else:
        print(f"→ {search_record(chosen, tried, steps)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
