"""Backbone vs surrogate: the comparison a user needs to see before using a trained model, and the rule that never
ships a model worse than the one training started from.

Selection happens twice, both on STS-B dev: during training the backbone is step 0 of the best-on-dev checkpoints
(tasks/train/training.py), and at the end the selected checkpoint must not fall below the backbone on the full STS-B dev
set (the training-time split may be a subsample, `dev_pairs`). Test sets are only reported, never used to choose.
"""

from __future__ import annotations

SELECTION_SET = "stsb-dev"


def keeps_backbone(backbone: dict[str, dict], trained: dict[str, dict]) -> bool:
    """True when the trained model is below the backbone on STS-B dev (a NaN score never wins)."""
    before, after = backbone[SELECTION_SET]["spearman"], trained[SELECTION_SET]["spearman"]
    return not after >= before


def comparison_rows(backbone: dict[str, dict], surrogate: dict[str, dict]) -> list[dict]:
    """One row per evaluation set: pairs, backbone and surrogate Spearman ×100, and the difference."""
    return [{"set": name, "pairs": r["pairs"], "backbone": backbone[name]["spearman"], "spearman": r["spearman"],
             "delta": r["spearman"] - backbone[name]["spearman"]} for name, r in surrogate.items()]


def comparison_markdown(rows: list[dict]) -> str:
    lines = ["| set | pairs | backbone | surrogate | Δ |", "|---|---|---|---|---|"]
    lines += [f"| {r['set']} | {r['pairs']} | {r['backbone']:.2f} | {r['spearman']:.2f} | {r['delta']:+.2f} |"
              for r in rows]
    return "\n".join(lines)


def verdict(shipped_step: int | None, turned_down: dict | None = None, wise_alpha: float = 1.0) -> str:
    """What shipped, in one sentence (two when the full-dev guard turned a checkpoint down); `wise_alpha` < 1: the
    checkpoint was interpolated with the backbone (WiSE-FT) before the guard judged it."""
    if shipped_step == 0:
        mixed = f" interpolated with the backbone at alpha {turned_down['wise_alpha']:g}" \
            if turned_down and turned_down.get("wise_alpha", 1.0) < 1.0 else ""
        guard = "" if not turned_down else (
            f" Step {turned_down['step']} was best on the training-time dev split but{mixed} scored "
            f"{turned_down[SELECTION_SET]:.2f} on the full STS-B dev.")
        return ("Training did not improve STS-B dev: the shipped model is the backbone (step 0)." + guard + " More or "
                "better training data, fewer steps or a lower learning rate may help.")
    mixed = f", interpolated with the backbone at alpha {wise_alpha:g} (WiSE-FT)" if wise_alpha < 1.0 else ""
    return f"Training improved STS-B dev: the shipped model is the checkpoint of step {shipped_step}{mixed}."
