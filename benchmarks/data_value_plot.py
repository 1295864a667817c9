"""The learning curves of benchmarks/data_value.py as a plot: STS-B dev (the choice) against anchors, one panel per
backbone, one line per training data (and budget), mean ± sd over seeds (their count, n, in the legend, and beside a
point with another count); 0 anchors is the untrained backbone, and a line with one trained point is dashed.
`--metrics "STS-B dev,SICK trial"` adds a row of panels for SICK trial (the confirming set), where a choice on dev can
cost it. STS12 train (the generator's pattern pool, the CSVs' `sts12_train_pattern_pool`) is not plotted: a pattern
pool, not a judgement.

Reads per-seed rows (`data_value.py --table-out`: one or more CSVs per backbone, joined with `+`, e.g. the rows of a
GPU call and of a later CPU run). The untrained score is the CSVs' `backbone` row; a CSV written before that row
existed names it after `=`:

    .venv/bin/python -m benchmarks.data_value_plot --out docs/data_value_curves.png \
        benchmarks/results/data_value_minilm_cpu.csv=86.72 benchmarks/results/data_value_bellm_h200.csv=64.15

A score other than STS-B dev takes its untrained value from the `backbone` row only.
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")  # files only: no display on these machines
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.data_value_columns import DEV, FIXED_BUDGET, PAPER_BUDGET, SICK  # noqa: E402
from benchmarks.data_value_report import read_joined  # noqa: E402

PLOT_POOL_NOTE = "STS12 train (the generator's pattern pool) is not plotted: a pattern pool, not a judgement"
METRICS = (DEV, SICK)  # the choosing set and the confirming one


def budget_of(trained: pd.DataFrame) -> pd.Series:
    """Each row's `budget` cell: "fixed", a search's record or the paper setting; all empty in a CSV written before
    the column, when every budget was given (so empty reads as fixed)."""
    return trained.reindex(columns=["budget"])["budget"]


def line_of(trained: pd.DataFrame) -> pd.Series:
    """Each trained row's line, so a line holds one budget: its data alone where all its rows share one, else its
    data and budget — a fixed one by its steps (and lr where those differ: the decoder's triples at 100 steps and at
    200), a searched one as "searched" (its steps are the search's choice per size, not a budget of their own)."""
    budget = budget_of(trained)
    fixed = budget.isna() | (budget == FIXED_BUDGET)
    steps = trained["steps"].astype(int).astype(str) + " steps"
    with_lr = steps + ", lr " + trained["lr"].map("{:g}".format)
    lrs = trained["data"].map(trained[fixed].groupby("data")["lr"].nunique()).fillna(0)
    kind = with_lr.where(fixed, budget.where(budget == PAPER_BUDGET, "searched"))  # one value per budget
    several = kind.groupby(trained["data"]).transform("nunique") > 1
    suffix = with_lr.where(lrs > 1, steps).where(fixed, kind.replace({PAPER_BUDGET: "paper setting"}))
    return trained["data"].where(~several, trained["data"] + ", " + suffix)


def curves(rows: pd.DataFrame, untrained: float, metric: str = DEV) -> dict[str, pd.DataFrame]:
    """line (`line_of`) → (anchors, mean, sd, seeds) of `metric` with the untrained backbone as the 0-anchor point
    of every line."""
    out = {}
    trained = rows[rows["data"] != "backbone"]
    for data, g in trained.groupby(line_of(trained), sort=False):
        stats = g.groupby("anchors")[metric].agg(["mean", "std", "count"]).reset_index()
        zero = pd.DataFrame({"anchors": [0], "mean": [untrained], "std": [0.0], "count": [0]})
        out[data] = pd.concat([zero, stats], ignore_index=True).fillna({"std": 0.0})
    return out


def how_drawn(curve: pd.DataFrame) -> tuple[str, str, pd.DataFrame]:
    """A line's legend note, line style and the points that get an "n=" label of their own: the seeds most of its
    trained points have go into the legend (one label per point overlapped where lines end together); a point with
    other seeds (the decoder's 50 anchors, seed 13 alone) is labeled, one an older CSV did not score (n=0)
    is not. A line with one trained point is dashed: two points (the untrained backbone and that one) are no
    measured curve."""
    scored = curve[(curve["anchors"] > 0) & (curve["count"] > 0)]
    seeds = int(scored["count"].mode().max()) if len(scored) else 0
    return f"n={seeds}", "--" if len(scored) <= 1 else "-", scored[scored["count"] != seeds]


def untrained_of(rows: pd.DataFrame, given: str | None, metric: str = DEV) -> float:
    """The untrained backbone's `metric`: STS-B dev's given after `=`, else the CSVs' `backbone` row."""
    if given is not None and metric == DEV:
        return float(given)
    backbone = rows[rows["data"] == "backbone"]
    if backbone.empty:
        fix = "needs CSV=<untrained STS-B dev>" if metric == DEV else "plots STS-B dev only"
        raise SystemExit(f"{metric}: a CSV without a `backbone` row (written before it existed) {fix}")
    return float(backbone[metric].iloc[0])


def budget_title(rows: pd.DataFrame) -> str:
    """The trained rows' budget: one steps / lr for all; each data's own where every row's was given (`budget`
    "fixed", e.g. the shipped recipe's and the triples-only recipe's, SimCSE's paper setting, or empty in a CSV
    written before budgets were searched); else each row's own, searched on dev."""
    trained = rows[rows["data"] != "backbone"]
    if trained["steps"].nunique() == 1 and trained["lr"].nunique() == 1:
        return f"{int(trained['steps'].iloc[0])} steps, lr {trained['lr'].iloc[0]:g}"
    budget = budget_of(trained)
    if (budget.isna() | budget.isin([FIXED_BUDGET, PAPER_BUDGET])).all():  # empty: a CSV from before searches
        fixed = trained.groupby("data", sort=False)[["steps", "lr"]].agg(lambda v: sorted(set(v)))
        return "\n".join(f"{data}: {'/'.join(str(int(s)) for s in r['steps'])} steps, lr "
                         f"{'/'.join(f'{lr:g}' for lr in r['lr'])}" for data, r in fixed.iterrows())
    return "each row's budget (steps, lr) chosen on STS-B dev"


# 20 colours, not matplotlib's default 10: the decoder's plot draws 14 lines, and two lines sharing a colour are told
# apart only by the legend's order
LINE_COLORS = plt.get_cmap("tab20").colors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="+", help="CSV[+CSV…][=untrained STS-B dev], one per backbone")
    ap.add_argument("--out", required=True)
    ap.add_argument("--metrics", default=DEV, help=f"comma-separated, a row of panels each, of {', '.join(METRICS)}")
    args = ap.parse_args()
    metrics = args.metrics.split(",")
    if unknown := set(metrics) - set(METRICS):
        raise SystemExit(f"--metrics: {', '.join(sorted(unknown))} is none of {', '.join(METRICS)}")
    fig, axes = plt.subplots(len(metrics), len(args.tables), figsize=(5 * len(args.tables), 4.6 * len(metrics)),
                             squeeze=False)
    tables = []  # (rows, given untrained STS-B dev) per backbone, read once for all its panels
    for spec in args.tables:
        path, _, given = spec.partition("=")
        tables.append((read_joined(path), given))
    panels = [(ax, metric, table) for metric, row in zip(metrics, axes) for ax, table in zip(row, tables)]
    for ax, metric, (rows, given) in panels:
        for i, (data, c) in enumerate(curves(rows, untrained_of(rows, given or None, metric), metric).items()):
            note, style, labeled = how_drawn(c)
            ax.errorbar(c["anchors"], c["mean"], yerr=c["std"], marker="o", capsize=3, linestyle=style,
                        color=LINE_COLORS[i % len(LINE_COLORS)], label=f"{data} ({note})")
            for _, r in labeled.iterrows():
                ax.annotate(f"n={int(r['count'])}", (r["anchors"], r["mean"]), fontsize=7, xytext=(3, -10),
                            textcoords="offset points")
        ax.set_title(f"{rows['backbone'].iloc[0]}\n{budget_title(rows)}", fontsize=9)
        ax.set_xlabel("anchors (0 = untrained backbone)")
        ax.set_ylabel(f"{metric} Spearman ×100 (mean ± sd over seeds)")
        ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.22))  # under the axes: off the lines
        ax.grid(alpha=0.3)
    fig.text(0.5, 0.005, PLOT_POOL_NOTE, ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
