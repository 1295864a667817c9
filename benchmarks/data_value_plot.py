"""The learning curves of benchmarks/data_value.py as a plot: STS-B dev (the choice) against anchors, one panel per
backbone, one line per training data, mean ± sd over seeds; 0 anchors is the untrained backbone.

Reads per-seed rows (`data_value.py --table-out`: one or more CSVs per backbone, joined with `+`, e.g. the rows of a
GPU call and of a later CPU run) and an untrained score per backbone:

    .venv/bin/python -m benchmarks.data_value_plot --out docs/data_value_curves.png \
        benchmarks/results/data_value_minilm_cpu.csv=86.72 benchmarks/results/data_value_bellm_h200.csv=64.15
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")  # files only: no display on these machines
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def curves(rows: pd.DataFrame, untrained: float) -> dict[str, pd.DataFrame]:
    """data → (anchors, mean, sd, seeds) with the untrained backbone as the 0-anchor point of every line."""
    out = {}
    for data, g in rows.groupby("data", sort=False):
        stats = g.groupby("anchors")["STS-B dev"].agg(["mean", "std", "count"]).reset_index()
        zero = pd.DataFrame({"anchors": [0], "mean": [untrained], "std": [0.0], "count": [0]})
        out[data] = pd.concat([zero, stats], ignore_index=True).fillna({"std": 0.0})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="+", help="CSV[+CSV…]=untrained STS-B dev, one per backbone")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    fig, axes = plt.subplots(1, len(args.tables), figsize=(5 * len(args.tables), 3.8), squeeze=False)
    for ax, spec in zip(axes[0], args.tables):
        path, untrained = spec.rsplit("=", 1)
        rows = pd.concat([pd.read_csv(p) for p in path.split("+")], ignore_index=True)
        for data, c in curves(rows, float(untrained)).items():
            ax.errorbar(c["anchors"], c["mean"], yerr=c["std"], marker="o", capsize=3, label=data)
            for _, r in c[c["count"] > 0].iterrows():
                ax.annotate(f"n={int(r['count'])}", (r["anchors"], r["mean"]), fontsize=7, xytext=(3, -10),
                            textcoords="offset points")
        ax.set_title(f"{rows['backbone'].iloc[0]}\n{int(rows['steps'].iloc[0])} steps, lr {rows['lr'].iloc[0]:g}",
                     fontsize=9)
        ax.set_xlabel("anchors (0 = untrained backbone)")
        ax.set_ylabel("STS-B dev Spearman ×100 (mean ± sd over seeds)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
