"""An entailment check from the data at hand: does an NLI cross-encoder trained on SICK train see what the readers see?

No NLI model ships in a package here (../shared/docs/offline-stack.md), but SICK train (4,500 pairs with
ENTAILMENT / NEUTRAL / CONTRADICTION) sits in ../shared/data. This trains a 3-way cross-encoder on it
(sentence-transformers' CrossEncoderTrainer with CrossEntropyLoss, the library's recipe; backbone all-mpnet-base-v2
or all-MiniLM-L6-v2, both sentence-tuned), then scores every labeled positive and intermediate of benchmarks/data
(benchmarks/reader_signals.labeled: developer readings choose, blind readings confirm):

- positive: P(entailment) both ways, the smaller (a paraphrase entails and is entailed);
- intermediate: P(entailment) anchor ⇒ intermediate (a deletion is entailed by its anchor).

Printed: ROC AUC for "bad" (1 − P(entailment)) with bootstrap intervals, beside the best sentence-level signal of
reader_signals for comparison. Only SICK train is trained on; nothing is chosen on a test split.

    .venv/bin/python -m benchmarks.nli_check --backbone all-mpnet-base-v2 --epochs 2 \
        --scores benchmarks/results/nli_check_mpnet.csv [--scored benchmarks/results/reader_signals.csv]
    .venv/bin/python -m benchmarks.nli_check --scores benchmarks/results/nli_check_mpnet.csv --from-scores …
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.reader_signals import OWN_READINGS, auc_ci, direction, labeled  # noqa: E402
from tasks.core.defaults import DEFAULT_ENCODER  # noqa: E402
from tasks.llm.local_models import encoder_folder  # noqa: E402
from tasks.llm.teacher import teacher_folder  # noqa: E402

SICK = Path(__file__).resolve().parents[2] / "shared" / "data" / "sick2014" / "SICK_train.txt"
LABELS = {"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2}


def train(backbone: str, epochs: int, out: Path, seed: int = 13):
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import CrossEntropyLoss

    folder = teacher_folder() if backbone == "all-mpnet-base-v2" else encoder_folder(DEFAULT_ENCODER)
    sick = pd.read_csv(SICK, sep="\t")
    data = Dataset.from_dict({"premise": sick["sentence_A"].tolist(), "hypothesis": sick["sentence_B"].tolist(),
                              "label": sick["entailment_judgment"].map(LABELS).tolist()})
    model = CrossEncoder(str(folder), num_labels=3, device="cpu")
    args = CrossEncoderTrainingArguments(output_dir=str(out), num_train_epochs=epochs, per_device_train_batch_size=16,
                                         learning_rate=2e-5, warmup_steps=0.1, seed=seed, save_strategy="no",
                                         logging_steps=50, report_to=[], use_cpu=True)
    CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=CrossEntropyLoss(model)).train()
    return model


def entailment(model, premises: list[str], hypotheses: list[str]) -> np.ndarray:
    probs = model.predict(list(zip(premises, hypotheses)), batch_size=32, apply_softmax=True, convert_to_numpy=True)
    return probs[:, LABELS["ENTAILMENT"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", choices=["all-mpnet-base-v2", "all-minilm-l6-v2"], default="all-mpnet-base-v2")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--scored", type=Path, help="reader_signals' scored rows, for a side-by-side signal")
    parser.add_argument("--out", type=Path, default=Path("/tmp/nli-check"), help="the trainer's folder")
    parser.add_argument("--scores", type=Path, required=True,
                        help="each labeled row's entailment score (CSV), written here; read back with --from-scores")
    parser.add_argument("--from-scores", action="store_true", help="score an earlier run's --scores: nothing trained")
    args = parser.parse_args(argv)
    if args.from_scores:
        rows = pd.read_csv(args.scores)
    else:
        t0 = time.perf_counter()
        model = train(args.backbone, args.epochs, args.out)
        print(f"trained on SICK train in {time.perf_counter() - t0:.0f} s")
        rows = labeled()
        forward = entailment(model, rows["anchor"].tolist(), rows["text"].tolist())
        backward = entailment(model, rows["text"].tolist(), rows["anchor"].tolist())
        rows["nli"] = np.where(rows["kind"] == "positive", np.minimum(forward, backward), forward)
        rows.to_csv(args.scores, index=False)
    rows = rows[~rows["file"].isin(OWN_READINGS)]  # as benchmarks.reader_signals: selected by its signals
    scored = pd.read_csv(args.scored) if args.scored else None
    rng = np.random.default_rng(0)
    for kind, other in (("positive", "mpnet_tok_recall_min"), ("intermediate", "added_words")):
        part = rows[rows["kind"] == kind]
        for reader in ("developer", "blind"):
            sub = part[part["reader"] == reader]
            bad = (sub["verdict"] == "bad").to_numpy()
            point, lo, hi = auc_ci(bad, -sub["nli"].to_numpy(), rng, groups=sub["anchor"].to_numpy())
            line = f"{kind:12s} {reader:9s} n={len(sub):3d}: NLI ({args.backbone}) AUC {point:.2f} [{lo:.2f}, {hi:.2f}]"
            if scored is not None:
                ref = sub.merge(scored[["kind", "anchor", "text", other]], on=["kind", "anchor", "text"], how="left")
                dev = rows[(rows["kind"] == kind) & (rows["reader"] == "developer")]
                dev = dev.merge(scored[["kind", "anchor", "text", other]], on=["kind", "anchor", "text"])
                sign, known = direction(dev, other), ref[other].notna().to_numpy()
                p2, lo2, hi2 = auc_ci(bad[known], sign * ref[other].to_numpy()[known], rng,
                                      groups=ref["anchor"].to_numpy()[known])
                line += f"; {other} {p2:.2f} [{lo2:.2f}, {hi2:.2f}]"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
