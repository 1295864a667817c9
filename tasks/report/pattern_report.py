"""Pattern complexity of a run's triples (NGCSE, appendix, Fig. 7): how far the generated relations are, in word
edits and in the backbone's embedding space, from the human STS-B pairs they are meant to simulate.

Per relation (a, s⁺), (a, sᵐ), (a, s⁻): the Match Error Rate of the two sentences (word-level edit operations over
all aligned words, jiwer, after lower-casing and removing punctuation) and the backbone's cosine, next to STS-B dev
pairs of the matching band — score > 4 for s⁺, 1–4 for sᵐ (the paper gives no band for it), < 1 for s⁻ — and one
distance per relation and measure: the 1-D Wasserstein distance between the generated and the STS-B distribution.
"""

from __future__ import annotations

from pathlib import Path

import jiwer
import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

from models.embedding_metrics import cosine_scores

RELATIONS = {"positive": (4.0, 5.01), "intermediate": (1.0, 4.0), "negative": (-0.01, 1.0)}  # STS-B score bands
_NORMALIZE = jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(),
                            jiwer.Strip(), jiwer.ReduceToListOfListOfWords()])


def match_error_rates(first: list[str], second: list[str]) -> np.ndarray:
    """MER of each pair (0 = same words in order, 1 = nothing in common)."""
    return np.array([jiwer.mer(a, b, reference_transform=_NORMALIZE, hypothesis_transform=_NORMALIZE)
                     if a.strip() and b.strip() else 1.0 for a, b in zip(first, second)], dtype=np.float64)


def relation_pairs(triples: pd.DataFrame, stsb: pd.DataFrame) -> dict[str, dict[str, tuple[list[str], list[str]]]]:
    """{relation: {"generated": (anchors, others), "stsb": (s1, s2)}} for the relations present in the triples."""
    out = {}
    for relation, (low, high) in RELATIONS.items():
        rows = triples[triples[relation].notna()] if relation in triples else triples.iloc[:0]
        if rows.empty:
            continue
        band = stsb[(stsb["gold"] > low) & (stsb["gold"] < high)] if relation != "intermediate" else \
            stsb[(stsb["gold"] >= low) & (stsb["gold"] <= high)]
        out[relation] = {"generated": (rows["anchor"].tolist(), rows[relation].tolist()),
                         "stsb": (band["s1"].tolist(), band["s2"].tolist())}
    return out


def pattern_measures(pairs: dict, encode) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """{relation: {"generated"|"stsb": {"mer": …, "cosine": …}}}; `encode(list[str]) → (N, D)` is called once."""
    texts = [t for rel in pairs.values() for side in rel.values() for part in side for t in part]
    vectors = np.asarray(encode(texts)) if texts else np.zeros((0, 1))
    out, at = {}, 0
    for relation, sides in pairs.items():
        out[relation] = {}
        for side, (first, second) in sides.items():
            n = len(first)
            e1, e2 = vectors[at : at + n], vectors[at + n : at + 2 * n]
            at += 2 * n
            out[relation][side] = {"mer": match_error_rates(first, second),
                                   "cosine": cosine_scores(e1, e2) if n else np.zeros(0)}
    return out


def pattern_distances(measures: dict) -> dict[str, dict]:
    """Per relation: pair counts, means and the Wasserstein distance generated ↔ STS-B for MER and cosine."""
    out = {}
    for relation, sides in measures.items():
        gen, ref = sides["generated"], sides["stsb"]
        row = {"pairs": int(len(gen["mer"])), "stsb_pairs": int(len(ref["mer"]))}
        for name in ("mer", "cosine"):
            row[f"{name}_mean"] = float(np.mean(gen[name])) if len(gen[name]) else None
            row[f"stsb_{name}_mean"] = float(np.mean(ref[name])) if len(ref[name]) else None
            row[f"{name}_wasserstein"] = float(wasserstein_distance(gen[name], ref[name])) \
                if len(gen[name]) and len(ref[name]) else None
        out[relation] = row
    return out


def plot_pattern_complexity(measures: dict, path: Path) -> Path:
    """Density histograms: one column per relation, MER on top and cosine below, generated vs STS-B."""
    from tasks.core.plots import plt, save_figure

    relations = list(measures)
    fig, axes = plt.subplots(2, max(len(relations), 1), figsize=(3.4 * max(len(relations), 1), 5.6), dpi=90,
                             squeeze=False)
    for col, relation in enumerate(relations):
        for row, (name, label, bins) in enumerate((("mer", "Match Error Rate", np.linspace(0, 1, 21)),
                                                   ("cosine", "backbone cosine", np.linspace(-0.2, 1, 25)))):
            ax = axes[row][col]
            for side, colour in (("generated", "tab:blue"), ("stsb", "tab:orange")):
                values = measures[relation][side][name]
                if len(values):
                    ax.hist(values, bins=bins, density=True, alpha=0.5, color=colour,
                            label=f"{'generated' if side == 'generated' else 'STS-B dev'} ({len(values)})")
            ax.set(xlabel=label, title=f"(a, {relation})" if row == 0 else None)
            ax.legend(fontsize=7)
    return save_figure(fig, path)
