"""The combined verifier: weak signals of one generation → P(bad) by a logistic regression per kind, fit on
hand-labeled generations (`stsgen verifier fit`, tasks/generate/verifier_fit.py, writes the model file).

The model file is JSON — `{"version": 1, "predicts": "P(bad)", "features": [...], "kinds": {kind: {"mean": [...],
"scale": [...], "coef": [...], "intercept": x, "threshold": t}}}` — a standardise-then-logistic model (scikit-learn's
StandardScaler + LogisticRegression, stored as numbers rather than a pickle: nothing executes when it is read).

In stage 1 the signals at hand are those that cost no extra request: `judge` (the judge's P(pass)), `cosine` (the
best-of-N encoder cosine to the anchor), `dropped` / `added` (fact counts) and `length`; a model that needs another
signal is refused when it is loaded, with the names of what it asks for and what is there.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from tasks.core.config import ConfigError
from tasks.generate.facts import check_facts

STAGE_SIGNALS = ("judge", "cosine", "dropped", "added", "length")


class KindModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float = 0.5


class VerifierModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    version: int
    features: list[str]
    kinds: dict[str, KindModel]

    @model_validator(mode="after")
    def _sizes(self) -> "VerifierModel":
        for kind, m in self.kinds.items():
            if not len(m.mean) == len(m.scale) == len(m.coef) == len(self.features):
                raise ValueError(f"kind {kind}: mean/scale/coef must each have one value per feature "
                                 f"({len(self.features)})")
        return self

    def p_bad(self, kind: str, signals: dict[str, float | None]) -> float | None:
        """P(bad) of a generation of `kind`, or None when the model has no part for that kind. A missing signal
        (None) sits at the training mean: it neither accuses nor excuses."""
        part = self.kinds.get(kind)
        if part is None:
            return None
        z = part.intercept
        for name, mean, scale, coef in zip(self.features, part.mean, part.scale, part.coef):
            value = signals.get(name)
            z += 0.0 if value is None else coef * (float(value) - mean) / (scale or 1.0)
        return 1.0 / (1.0 + math.exp(-z))


def load_verifier_model(path: str | Path, available: tuple[str, ...] = STAGE_SIGNALS) -> VerifierModel:
    """Read and check a model file: it must parse, and ask only for signals in `available`."""
    path = Path(path)
    try:
        model = VerifierModel.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError(f"verifier.model: {path} does not exist; write one with "
                          "`stsgen verifier fit --labels LABELED_SIGNALS.csv --out PATH`.") from None
    except (ValueError, ValidationError) as err:
        raise ConfigError(f"verifier.model: {path} is not a combined-verifier model file ({str(err)[:300]}).") \
            from None
    unknown = [f for f in model.features if f not in available]
    if unknown:
        raise ConfigError(f"verifier.model: {path} was fit on signal(s) {', '.join(unknown)} that stage 1 does not "
                          f"compute; it has {', '.join(available)}. Refit the model on those (`stsgen "
                          "verifier fit`).")
    return model


def stage_signals(anchor: str, text: str, judge_p_pass: float | None, cosine: float | None) -> dict[str, float | None]:
    """The signals stage 1 has for a generation without another request."""
    facts = check_facts(anchor, text)
    return {"judge": judge_p_pass, "cosine": cosine, "dropped": float(len(facts.dropped)),
            "added": float(len(facts.added)), "length": len(text.split()) / max(1, len(anchor.split()))}
