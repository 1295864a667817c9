"""Parity of stage 4's `SentenceTransformerTrainer` path (tasks/train/trainer.py, what the flow runs) with the reference
loop it replaced (benchmarks/reference_loop.py), in one harness: the same pipeline data, held-out split, seeds,
backbone (all-MiniLM-L6-v2), objective (InfoNCE + hierarchical triplet + label regression) and budget, then STS-B
dev and test Spearman ×100 of each run's best-on-dev weights and seconds per step, side by side.

Budget: the loop's step is one batch of triples *and* one batch of pairs (losses summed); the trainer's step is one
batch of one dataset (round-robin over the triples and pairs datasets). The trainer gets `steps × datasets`
optimizer steps (and evaluations at the same points), so both see the same examples of each kind.

Noise: each arm runs with 3 seeds (each seed changes the held-out split, the batches and dropout); the table gives
every run, the mean and standard deviation per arm, and the paired (same seed) differences.

    .venv/bin/python -m benchmarks.trainer_parity --run /tmp/run200 [--steps 100] [--seeds 13,14,15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from benchmarks import reference_loop  # noqa: E402
from tasks.core.device import autocast_precision, resolve_device  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.core.sts_evaluation import evaluate_sources  # noqa: E402
from tasks.train.backbones import BackboneSettings, load_backbone, load_sentence_transformer  # noqa: E402
from tasks.train.trainer import train, training_datasets  # noqa: E402
from tasks.train.training import LossSettings, TrainSettings, split_data  # noqa: E402

SETS = ["stsb-dev", "stsb-test"]


def run_reference(data, dev, settings: TrainSettings) -> tuple[dict, int, float]:
    module, _ = load_backbone(settings.backbone)
    with tempfile.TemporaryDirectory() as work:
        t = time.perf_counter()
        state = reference_loop.train(module, data, dev, settings, Path(work), key="parity")
        seconds = time.perf_counter() - t
        module.load_state_dict(torch.load(Path(work) / "best.pt", weights_only=False)["model"])
    results = evaluate_sources(lambda s: reference_loop.encode(module, s, 64), SETS)
    return results, state.best_step, seconds / settings.steps


def run_trainer(data, dev, settings: TrainSettings) -> tuple[dict, int, float]:
    model, _ = load_sentence_transformer(settings.backbone)
    with tempfile.TemporaryDirectory() as work:
        t = time.perf_counter()
        state = train(model, data, dev, settings, Path(work))
        seconds = time.perf_counter() - t
    return evaluate_sources(lambda s: model.encode(s, batch_size=64), SETS), state.best_step, seconds / settings.steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="data/outputs", help="a pipeline run's output folder (triples + pairs)")
    ap.add_argument("--steps", type=int, default=100, help="reference-loop steps (the trainer gets × datasets)")
    ap.add_argument("--seeds", default="13,14,15")
    ap.add_argument("--dev-pairs", type=int, default=500)
    args = ap.parse_args()
    run = Path(args.run)
    triples = pq.read_table(run / "generate-sts-triples" / "triples.parquet").to_pandas()
    pairs = pq.read_table(run / "label-pairs" / "pairs.parquet").to_pandas()
    losses = LossSettings(regression=1.0)
    print(f"data: {len(triples)} triples, {len(pairs)} labeled pairs from {run}; torch threads "
          f"{torch.get_num_threads()}")
    print("\n| seed | arm | optimizer steps | STS-B dev | STS-B test | best step | s / optimizer step | train s |"
          "\n|---|---|---|---|---|---|---|---|")
    scores: dict[str, list[tuple[float, float]]] = {"reference loop": [], "SentenceTransformerTrainer": []}
    seconds: dict[str, list[float]] = {arm: [] for arm in scores}  # whole trainings: both arms see the same examples
    for seed in [int(s) for s in args.seeds.split(",")]:
        data = split_data(triples, pairs, 0.1, seed)
        dev = read_stsb("dev")
        dev = dev.iloc[np.sort(np.random.default_rng(seed).permutation(len(dev))[: args.dev_pairs])]
        base = TrainSettings(steps=args.steps, eval_every=max(args.steps // 2, 1), dev_pairs=args.dev_pairs,
                             seed=seed, losses=losses, backbone=BackboneSettings(kind="encoder"),
                             precision=autocast_precision(resolve_device("auto")))  # as the reference loop
        n = len(training_datasets(data, losses))
        arms = {"reference loop": (run_reference, base),
                "SentenceTransformerTrainer": (run_trainer, base.model_copy(
                    update={"steps": args.steps * n, "eval_every": base.eval_every * n}))}
        for arm, (fn, settings) in arms.items():
            results, best, per_step = fn(data, dev, settings)
            dev_s, test_s = (results[s]["spearman"] for s in SETS)
            scores[arm].append((dev_s, test_s))
            seconds[arm].append(per_step * settings.steps)
            print(f"| {seed} | {arm} | {settings.steps} | {dev_s:.2f} | {test_s:.2f} | {best} | {per_step:.2f} | "
                  f"{per_step * settings.steps:.0f} |", flush=True)
    print("\n| arm | STS-B dev mean ± sd | STS-B test mean ± sd |\n|---|---|---|")
    for arm, rows in scores.items():
        a = np.array(rows)
        print(f"| {arm} | {a[:, 0].mean():.2f} ± {a[:, 0].std(ddof=1):.2f} | "
              f"{a[:, 1].mean():.2f} ± {a[:, 1].std(ddof=1):.2f} |")
    diff = np.array(scores["SentenceTransformerTrainer"]) - np.array(scores["reference loop"])
    print(f"\npaired differences (trainer − loop) per seed: dev {np.round(diff[:, 0], 2).tolist()}, "
          f"test {np.round(diff[:, 1], 2).tolist()}")
    ratio = np.array(seconds["SentenceTransformerTrainer"]) / np.array(seconds["reference loop"])
    print(f"training time trainer / loop for the same examples, per seed: {np.round(ratio, 2).tolist()} "
          f"(mean {ratio.mean():.2f})")


if __name__ == "__main__":
    main()
