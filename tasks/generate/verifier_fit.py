"""Fitting the combined verifier (`stsgen verifier fit`): per kind, P(bad) of a generation from the signals stage 1
has without another request (`STAGE_SIGNALS`), by scikit-learn's StandardScaler + LogisticRegression (balanced
classes), fit on hand-labeled generations; written as the JSON model file tasks/generate/combined_verifier.py reads.

The input is a table of labeled generations with their signals, one row each — `kind` (positive / intermediate /
negative), `human` (good / bad: the reader's verdict, data/annotations/README.md) and the signal columns (as
data/annotations/verifier_signals.csv, which `python -m benchmarks.verifier signals` computes). Stage 1's judge is
the kind's judge question: for positives the question whether everything the anchor says is also in the positive
(`a_in_b`), for the other kinds their own (`judge`). A missing signal counts as 0.5. Pure functions: the command
reads and writes the files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.core.config import ConfigError
from tasks.generate.combined_verifier import STAGE_SIGNALS

KINDS = ("positive", "intermediate", "negative")
# The signals-table column that holds stage 1's judge P(pass) for each kind.
STAGE_JUDGE = {"positive": "a_in_b", "intermediate": "judge", "negative": "judge"}
MISSING = 0.5


def read_labeled_signals(path: str | Path) -> pd.DataFrame:
    """The labeled rows (human good / bad) of a signals table; refused, naming what is missing, when a column the
    fit needs is absent or no row is labeled."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"verifier fit: {path} does not exist (a table of labeled generations with their signals, "
                          "as data/annotations/verifier_signals.csv).")
    data = pd.read_csv(path)
    needed = {"kind", "human", *STAGE_JUDGE.values(), *STAGE_SIGNALS[1:]}
    missing = sorted(needed - set(data.columns))
    if missing:
        raise ConfigError(f"verifier fit: {path} lacks the column(s) {', '.join(missing)} (it has "
                          f"{', '.join(data.columns)}).")
    data = data[data["human"].isin(["good", "bad"])].reset_index(drop=True)
    if data.empty:
        raise ConfigError(f"verifier fit: {path} has no row with human = good or bad.")
    return data


def stage_features(data: pd.DataFrame, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(features in STAGE_SIGNALS order, bad) of one kind's rows."""
    part = data[data["kind"] == kind]
    columns = [STAGE_JUDGE[kind], *STAGE_SIGNALS[1:]]
    x = part[columns].astype(float).fillna(MISSING).to_numpy()
    return x, (part["human"] == "bad").to_numpy()


def verifier_pipeline(c: float = 1.0):
    """The model the combined verifier stores: standardise, then a class-balanced logistic regression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", C=c, max_iter=1000))


def _both_classes(kind: str, bad: np.ndarray) -> None:
    if bad.all() or not bad.any():
        raise ConfigError(f"verifier fit: the {kind} rows need both verdicts (good and bad); they have "
                          f"{int(bad.sum())} bad of {len(bad)}.")


def fit_verifier(data: pd.DataFrame, threshold: float = 0.5) -> dict:
    """The model file's content (version 1), one part per kind present in `data`, fit on all its rows."""
    kinds = {}
    for kind in KINDS:
        x, bad = stage_features(data, kind)
        if not len(bad):
            continue
        _both_classes(kind, bad)
        scaler, lr = verifier_pipeline().fit(x, bad)
        kinds[kind] = {"mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(), "coef": lr.coef_[0].tolist(),
                       "intercept": float(lr.intercept_[0]), "threshold": threshold, "rows": int(len(bad)),
                       "bad": int(bad.sum())}
    if not kinds:
        raise ConfigError(f"verifier fit: no row of kind {', '.join(KINDS)}.")
    return {"version": 1, "predicts": "P(bad)", "features": list(STAGE_SIGNALS), "kinds": kinds}


def verifier_scores(bad: np.ndarray, rejected: np.ndarray) -> dict:
    """How a verifier does on labeled rows: precision and recall of "bad" among the rejected, and the share of good
    among the accepted (NaN where a share has no rows)."""
    tp = int((bad & rejected).sum())
    accepted = ~rejected
    return {"n": int(len(bad)), "bad": int(bad.sum()), "rejected": int(rejected.sum()),
            "precision": tp / rejected.sum() if rejected.sum() else float("nan"),
            "recall": tp / bad.sum() if bad.sum() else float("nan"),
            "good_among_accepted": float((~bad & accepted).sum() / accepted.sum()) if accepted.sum() else float("nan")}


def cross_validated(x: np.ndarray, bad: np.ndarray, folds: int = 5, threshold: float = 0.5) -> dict | None:
    """Stratified k-fold (shuffled, seed 0) scores of the pipeline on (x, bad); None when a class has fewer than two
    rows (no fold could hold it out). k is lowered to the smaller class's size on small sets."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    k = min(folds, int(bad.sum()), int((~bad).sum()))
    if k < 2:
        return None
    prob = cross_val_predict(verifier_pipeline(), x, bad, cv=StratifiedKFold(n_splits=k, shuffle=True, random_state=0),
                             method="predict_proba")[:, 1]
    return {**verifier_scores(bad, prob >= threshold), "folds": k}


def verifier_report(data: pd.DataFrame, folds: int = 5) -> list[dict]:
    """Per kind: the stage judge alone (P(pass) < 0.5 rejects) and the combined model, cross-validated."""
    rows = []
    for kind in KINDS:
        x, bad = stage_features(data, kind)
        if not len(bad):
            continue
        rows.append({"kind": kind, "verifier": "judge alone (P(pass) < 0.5)", **verifier_scores(bad, x[:, 0] < 0.5)})
        scores = cross_validated(x, bad, folds)
        if scores is not None:
            rows.append({"kind": kind, "verifier": f"combined ({scores.pop('folds')}-fold CV)", **scores})
    return rows


def write_verifier_model(model: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    return path
