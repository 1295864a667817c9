"""Training curves as images: loss per step, STS-B dev Spearman per evaluation, and the RFD view (alignment and
uniformity on held-out training pairs vs on STS-B dev over training, NGCSE Fig. 3)."""

from __future__ import annotations

from pathlib import Path

from tasks.core.plots import plt, save_figure


def plot_curves(history: list[dict], path: Path) -> Path:
    """Loss (every step) and dev Spearman (every evaluation), side by side."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    losses = [r for r in history if "loss" in r]  # step 0 (the backbone) is evaluated, not trained
    left.plot([r["step"] for r in losses], [r["loss"] for r in losses], lw=1)
    left.set(xlabel="step", ylabel="training loss", title="Loss")
    evals = [r for r in history if "dev_spearman" in r]
    right.plot([r["step"] for r in evals], [r["dev_spearman"] for r in evals], marker="o")
    right.set(xlabel="step", ylabel="Spearman ×100", title="STS-B dev")
    return save_figure(fig, path)


def plot_rfd(history: list[dict], path: Path) -> Path:
    """Alignment and uniformity on held-out training pairs and on STS-B dev at each evaluation."""
    evals = [r for r in history if "align_heldout" in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    steps = [r["step"] for r in evals]
    for ax, name in ((left, "align"), (right, "uniform")):
        ax.plot(steps, [r[f"{name}_heldout"] for r in evals], marker="o", label="held-out training pairs")
        ax.plot(steps, [r[f"{name}_dev"] for r in evals], marker="s", label="STS-B dev")
        ax.set(xlabel="step", title="alignment" if name == "align" else "uniformity")
        ax.legend(fontsize=7)
    return save_figure(fig, path)
