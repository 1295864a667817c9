"""Stage 3 diagnostics: hierarchy rate, label distribution plot, and the optional monotone calibration onto 0–5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from sklearn.isotonic import IsotonicRegression

from tasks.core.config import ConfigError
from tasks.core.plots import plt, save_figure
from tasks.core.store import read_input_table, sha256_path

RELATION_ORDER = ("anchor-positive", "anchor-intermediate", "anchor-negative", "positive-intermediate",
                  "positive-negative", "intermediate-negative", "cross")


# The pairs table's label columns: the LLM's 0–5 rating, the context-vector label, the two cosines the rating is mixed
# with, and the label training reads.
LABEL_COLUMNS = ("rating", "context_label", "tfidf_cosine", "teacher_cosine", "label")


ANCHOR_RELATIONS = ["anchor-positive", "anchor-intermediate", "anchor-negative"]


def anchor_pairs_wide(pairs: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per triple, one column per anchor relation present, the values of `column`."""
    return pairs[pairs["triple_id"].notna() & pairs["relation"].str.startswith("anchor-")].pivot_table(
        index="triple_id", columns="relation", values=column, aggfunc="first")


def hierarchy_holds(pairs: pd.DataFrame, column: str = "label") -> pd.Series:
    """Per STS triple with all three anchor pairs: does `column` order label(a, s+) > label(a, sm) > label(a, s-)."""
    full = anchor_pairs_wide(pairs, column).reindex(columns=ANCHOR_RELATIONS).dropna()
    cols = ANCHOR_RELATIONS
    return (full[cols[0]] > full[cols[1]]) & (full[cols[1]] > full[cols[2]])


def hierarchy_rate(pairs: pd.DataFrame, column: str = "label") -> dict:
    """Share of triples with label(a, s+) > label(a, sm) > label(a, s-) (STS triples), and of label(a, s+) >
    label(a, s-) (every triple with both), by the values of `column`."""
    wide = anchor_pairs_wide(pairs, column)
    out = {"triples": 0, "rate": None, "pos_over_neg_triples": 0, "pos_over_neg_rate": None}
    cols = ANCHOR_RELATIONS
    if set(cols) <= set(wide.columns):
        ok = hierarchy_holds(pairs, column)
        out.update(triples=len(ok), rate=float(ok.mean()) if len(ok) else None)
    if {cols[0], cols[2]} <= set(wide.columns):
        both = wide[[cols[0], cols[2]]].dropna()
        out.update(pos_over_neg_triples=len(both),
                   pos_over_neg_rate=float((both[cols[0]] > both[cols[2]]).mean()) if len(both) else None)
    return out


def gold_agreement(pairs: pd.DataFrame, column: str = "label") -> dict | None:
    """Spearman ×100 of `column` against the pairs' gold scores (pairs files with gold, e.g. STS-B dev); None
    without at least 10 gold-scored pairs."""
    if "gold" not in pairs or column not in pairs:
        return None
    both = pairs[[column, "gold"]].dropna()
    if len(both) < 10:
        return None
    return {"pairs": len(both), "spearman": round(100 * float(spearmanr(both[column], both["gold"]).statistic), 2)}


def label_columns_quality(pairs: pd.DataFrame) -> dict[str, dict]:
    """Per label column that the pairs carry (some values not null): its hierarchy rates and, with gold, its
    Spearman — what each of rating, context label and final label is worth on this run."""
    return {c: {"hierarchy": hierarchy_rate(pairs, c), "gold": gold_agreement(pairs, c)}
            for c in LABEL_COLUMNS if c in pairs and pairs[c].notna().any()}


def labeler_description(settings) -> dict:
    """The labeler's configuration as the summary and manifest show it (what produced the labels)."""
    from tasks.label.scorer import lm_public

    out = {"method": settings.method}
    if settings.method != "llm_rating":
        out |= {"similarity": settings.similarity, "lambdas": settings.weights(), "lm": lm_public(settings),
                "scorer": settings.scorer, "dtype": settings.dtype, "lm_prompt": settings.lm_prompt,
                "start_token": settings.start_token, "contexts_per_sentence": settings.contexts_per_sentence,
                "context_selection": settings.context_selection}
    if settings.method != "context":
        out |= {"rating_prompt": settings.rating.prompt, "top_logprobs": settings.rating.top_logprobs}
    if settings.method == "combined":
        out |= {"rating_weight": settings.rating_weight, "tfidf_weight": settings.tfidf_weight,
                "context_weight": round(settings.context_weight, 6)}
        if settings.uses_teacher:
            # a folder's name, never its local path (manifests travel with published datasets)
            out |= {"teacher_weight": settings.teacher_weight, "teacher": Path(settings.teacher).name}
    return out


def per_relation_summary(pairs: pd.DataFrame) -> list[dict]:
    rows = []
    for relation, g in pairs.groupby("relation", sort=False):
        q = g["label"].quantile([0.25, 0.5, 0.75]).to_numpy()
        rows.append({"relation": relation, "pairs": len(g), "mean": round(float(g["label"].mean()), 4),
                     "q25": round(float(q[0]), 4), "median": round(float(q[1]), 4), "q75": round(float(q[2]), 4)})
    rank = {r: i for i, r in enumerate(RELATION_ORDER)}
    return sorted(rows, key=lambda r: rank.get(r["relation"], len(rank)))


def plot_label_distribution(pairs: pd.DataFrame, path: Path) -> Path:
    """Box plot of labels per relation (PNG)."""
    summary = per_relation_summary(pairs)
    relations = [r["relation"] for r in summary]
    fig, ax = plt.subplots(figsize=(8, 4), dpi=90)
    if relations:
        ax.boxplot([pairs.loc[pairs["relation"] == r, "label"].to_numpy() for r in relations],
                   tick_labels=[f"{r.replace('-', '-' + chr(10))}\n(n={len(pairs[pairs['relation'] == r])})"
                                for r in relations], showmeans=True)
    ax.set_ylabel("label (label.method; docs/results.md)")
    ax.set_title("Label distribution per relation")
    ax.tick_params(axis="x", labelsize=7)
    return save_figure(fig, path)


def fit_calibration(path: Path) -> tuple[IsotonicRegression, dict]:
    """Isotonic (monotone) map label → 0–5 fitted on a labeled dev set: a pairs.parquet from label-pairs run on
    pairs that carry a gold score (columns label and gold)."""
    frame = read_input_table(path, "Calibration file", "pass a pairs.parquet from label-pairs run on pairs with "
                             "gold scores", ("label", "gold")).to_pandas()
    frame = frame.dropna(subset=["label", "gold"])
    if len(frame) < 10:
        raise ConfigError(f"Calibration file {path} has {len(frame)} rows with both label and gold; need at least 10.")
    iso = IsotonicRegression(y_min=0.0, y_max=5.0, out_of_bounds="clip", increasing=True)
    iso.fit(frame["label"].to_numpy(), frame["gold"].to_numpy())
    info = {"path": str(path), "sha256": sha256_path(path), "pairs": len(frame), "method": "isotonic",
            "x_thresholds": np.round(iso.X_thresholds_, 6).tolist(),
            "y_thresholds": np.round(iso.y_thresholds_, 6).tolist()}
    return iso, info
