"""How well each label column of a run orders its triples: hierarchy a⁺ > aᵐ > a⁻ per column (rating, context label,
TF-IDF cosine, the final label) with Wilson 95 % intervals, each column's difference to the rating (paired bootstrap
over the triples), and the mixes the default was chosen among, recomputed from the stored columns — no LLM, no
scoring: it reads one label-pairs output.

    .venv/bin/python -m benchmarks.label_hierarchy data/outputs/issue34/r200/label-pairs/pairs.parquet
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.label.label_quality import LABEL_COLUMNS, hierarchy_holds  # noqa: E402
from tasks.label.labeling import LabelSettings, context_label_01, final_label  # noqa: E402

# rating / TF-IDF / context weights of the mixes compared on STS-B dev (docs/results.md, issue 32); the default
# label (0.6 / 0.2 / 0.2 since 2026-12-04) is the run's own `label` column
MIXES = {"0.7·rating/5 + 0.3·TF-IDF (the default until 2026-12-04)": (0.7, 0.3, 0.0),
         "0.7·rating/5 + 0.3·context": (0.7, 0.0, 0.3), "0.6·rating/5 + 0.3·TF-IDF + 0.1·context": (0.6, 0.3, 0.1),
         "0.6·rating/5 + 0.4·context": (0.6, 0.0, 0.4), "0.6·rating/5 + 0.2·TF-IDF + 0.2·context": (0.6, 0.2, 0.2)}


def paired_ci(a: pd.Series, b: pd.Series, resamples: int = 5000, seed: int = 0) -> tuple[float, float, float]:
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1).dropna()
    d = both["a"].astype(float).to_numpy() - both["b"].astype(float).to_numpy()
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), (resamples, len(d)))].mean(axis=1)
    return 100 * d.mean(), 100 * np.percentile(boots, 2.5), 100 * np.percentile(boots, 97.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, help="a label-pairs output (pairs.parquet)")
    parser.add_argument("--similarity", default="contrast", help="label.similarity of the run (maps the context "
                        "label onto 0–1 for the mixes)")
    parser.add_argument("--teacher", action="store_true", help="also the teacher's cosine (all-mpnet-base-v2) alone "
                        "and as the rating's partner, 0.5·rating/5 + 0.5·teacher (docs/results.md)")
    args = parser.parse_args()
    pairs = pd.read_parquet(args.pairs)
    if args.teacher:
        from tasks.llm.teacher import teacher_labels

        pairs["teacher_cosine"] = teacher_labels(pairs)[0]
    columns = {c: hierarchy_holds(pairs, c) for c in LABEL_COLUMNS if c in pairs and pairs[c].notna().any()}
    if "context_label" in pairs and pairs["context_label"].notna().any() and "rating" in pairs:
        context01 = context_label_01(pairs["context_label"].to_numpy(), args.similarity)
        for name, (w_rating, w_tfidf, w_context) in MIXES.items():
            mixed = w_rating * pairs["rating"] / 5 + w_tfidf * pairs.get("tfidf_cosine", 0) + w_context * context01
            columns[name] = hierarchy_holds(pairs.assign(mixed=mixed), "mixed")
    if args.teacher:
        columns["teacher_cosine"] = hierarchy_holds(pairs, "teacher_cosine")
        if "rating" in pairs:  # the stage's own mix (final_label) with the opt-in's weights
            mix = LabelSettings(rating_weight=0.5, tfidf_weight=0.0, teacher_weight=0.5)
            mixed = final_label(None, pairs["rating"].to_numpy(), mix, teacher=pairs["teacher_cosine"].to_numpy())
            columns["0.5·rating/5 + 0.5·teacher"] = hierarchy_holds(pairs.assign(mixed=mixed), "mixed")
    print(f"{args.pairs}: {len(pairs)} pairs\n")
    print("| column | hierarchy | 95% CI | − rating [95% paired CI] |\n|---|---|---|---|")
    for name, ok in columns.items():
        low, high = binomtest(int(ok.sum()), len(ok)).proportion_ci(method="wilson")
        versus = ("—" if name == "rating" or "rating" not in columns
                  else "{:+.1f} [{:+.1f}, {:+.1f}]".format(*paired_ci(ok, columns["rating"])))
        print(f"| {name} | {int(ok.sum())}/{len(ok)} = {100 * ok.mean():.1f} % | {100 * low:.1f}–{100 * high:.1f} | "
              f"{versus} |")


if __name__ == "__main__":
    main()
