"""Stage-4 results table, every row measured in one harness on the same pipeline-generated data, the same held-out
split, seed and step budget: STS-B dev and test Spearman ×100 (best-on-dev weights).

Rows, per backbone: zero-shot; unsupervised SimCSE (dropout positives) on the same source sentences; InfoNCE on the
triples; + hierarchical triplet; + context-label regression. For the BeLLM decoder also 0 vs 1 bidirectional layers.

    .venv/bin/python -m benchmarks.training --triples data/outputs/latest/generate-sts-triples/triples.parquet \
        --pairs data/outputs/latest/label-pairs/pairs.parquet [--steps 100] [--backbones encoder,bellm]

With `--variants RUN` (a pipeline run's output folder) the rows are data variants instead, encoder backbone: the
triples the run would have kept without the verifier (earliest rule-passing generation per slot), the verified
triples, and the verified triples + stage-3 labels (regression term). With `--negatives RUN` the rows are InfoNCE's
hard negatives on the run's verified triples + labels: the LLM's s⁻ only (with the regression as
CosineSimilarityLoss and as CoSENTLoss), negatives mined from the corpus (`--mining-corpus`, default the packaged
one; `--mined 2` per triple) only, both.
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
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from tasks.core.device import autocast_precision, resolve_device  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.core.sts_evaluation import evaluate_sources  # noqa: E402
from tasks.train.backbones import BackboneSettings, load_sentence_transformer  # noqa: E402
from tasks.train.hard_negatives import MiningSettings  # noqa: E402
from tasks.train.trainer import train  # noqa: E402
from tasks.train.training import LossSettings, TrainSettings, split_data  # noqa: E402

NO_TRAINING = None
ROWS = {
    "encoder": [
        ("zero-shot backbone", BackboneSettings(kind="encoder"), NO_TRAINING),
        ("unsupervised SimCSE (dropout positives, same anchors)", BackboneSettings(kind="encoder"),
         LossSettings(simcse=True)),
        ("InfoNCE on triples (s⁻ hard negative)", BackboneSettings(kind="encoder"),
         LossSettings(hierarchical_triplet=0.0)),
        ("+ hierarchical triplet", BackboneSettings(kind="encoder"), LossSettings()),
        ("+ label regression, CosineSimilarityLoss", BackboneSettings(kind="encoder"), LossSettings(regression=1.0)),
        ("+ label regression, CoSENTLoss", BackboneSettings(kind="encoder"),
         LossSettings(regression=1.0, regression_loss="cosent")),
    ],
    "bellm": [
        ("zero-shot, 0 bidirectional layers", BackboneSettings(kind="bellm", bidirectional_layers=0), NO_TRAINING),
        ("InfoNCE + HT, 0 bidirectional layers (causal)",
         BackboneSettings(kind="bellm", bidirectional_layers=0, train_layers=2), LossSettings()),
        ("InfoNCE + HT, 1 bidirectional layer (BeLLM)",
         BackboneSettings(kind="bellm", bidirectional_layers=1, train_layers=2), LossSettings()),
    ],
}
VARIANT_ROWS = [  # (row, losses, data variant)
    ("zero-shot backbone", NO_TRAINING, "verified"),
    ("unverified triples: InfoNCE + HT", LossSettings(), "unverified"),
    ("verified triples: InfoNCE + HT", LossSettings(), "verified"),
    ("verified triples + labels: InfoNCE + HT + regression (CosineSimilarityLoss)", LossSettings(regression=1.0),
     "verified"),
    ("verified triples + labels: InfoNCE + HT + regression (CoSENTLoss)",
     LossSettings(regression=1.0, regression_loss="cosent"), "verified"),
]


def negative_rows(args, heldout_fraction: float, seed: int) -> list[tuple[str, BackboneSettings, object, object]]:
    from tasks.core.config import CorpusSettings
    from tasks.corpus.sentences import load_corpus
    from tasks.train.hard_negatives import MiningSettings, mine

    run = Path(args.negatives)
    triples = pq.read_table(run / "generate-sts-triples" / "triples.parquet").to_pandas()
    pairs = pq.read_table(run / "label-pairs" / "pairs.parquet").to_pandas()
    data = split_data(triples, pairs, heldout_fraction, seed)
    model, _ = load_sentence_transformer(BackboneSettings(kind="encoder"))
    t = time.perf_counter()
    data.triples, counts = mine(data.triples, load_corpus(CorpusSettings(source=args.mining_corpus)).usable[
        "text"].tolist(), model, MiningSettings(num_negatives=args.mined), seed, exclude=data.heldout)
    print(f"mined {counts} in {time.perf_counter() - t:.0f} s")
    rows = [(f"InfoNCE on {negatives} negatives + HT + regression (CosineSimilarityLoss)", "cosine", negatives)
            for negatives in ("generated", "mined", "both")]
    rows.insert(1, ("InfoNCE on generated negatives + HT + regression (CoSENTLoss)", "cosent", "generated"))
    return [(name, BackboneSettings(kind="encoder"), LossSettings(regression=1.0, regression_loss=loss,
                                                                  negatives=negatives), data)
            for name, loss, negatives in rows]


def rows_and_data(args, heldout_fraction: float, seed: int) -> list[tuple[str, BackboneSettings, object, object]]:
    """(row, backbone, losses, training data) for every row the arguments ask for."""
    if args.negatives:
        return negative_rows(args, heldout_fraction, seed)
    if args.variants:
        from benchmarks.verifier import unverified_triples

        run = Path(args.variants)
        labeled = run / "label-pairs" / "pairs.parquet"
        pairs = pq.read_table(labeled).to_pandas() if labeled.is_file() else pd.DataFrame(columns=["s1", "s2", "label"])
        triples = {"verified": pq.read_table(run / "generate-sts-triples" / "triples.parquet").to_pandas(),
                   "unverified": unverified_triples(run / "generate-sts-triples")}
        data = {k: split_data(t, pairs, heldout_fraction, seed) for k, t in triples.items()}
        if not labeled.is_file():
            print(f"{labeled} not there (yet): the row with labels is left out")
        return [(f"{name} ({len(data[variant].triples)} triples)", BackboneSettings(kind="encoder"), losses,
                 data[variant]) for name, losses, variant in VARIANT_ROWS
                if labeled.is_file() or not losses or not losses.regression]
    data = split_data(pq.read_table(args.triples).to_pandas(), pq.read_table(args.pairs).to_pandas(),
                      heldout_fraction, seed)
    print(f"data: {len(data.triples)} training triples, {len(data.heldout)} held out, {len(data.pairs)} labeled pairs")
    return [(name, backbone, losses, data) for kind in args.backbones.split(",") for name, backbone, losses in ROWS[kind]]


SICK_TRIAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "sick2014" / "SICK_trial.txt"


def compare(args, base: TrainSettings) -> None:
    """Data variants side by side (issue 24): the stage-1 triples of each run folder given, InfoNCE + HT, one row per
    training seed; the same sources are assumed (runs of the same corpus, n and seed). STS-B dev for every row (the
    choice), then STS-B test and SICK trial printed once, at the end, for the rows already chosen on."""
    dev = read_stsb("dev")
    dev = dev.iloc[np.sort(np.random.default_rng(base.seed).permutation(len(dev))[: args.dev_pairs])]
    def triples_of(folder: Path) -> pd.DataFrame:  # a run folder, or a dataset version from build-dataset
        table = folder / "triples.parquet" if (folder / "triples.parquet").is_file() else \
            folder / "generate-sts-triples" / "triples.parquet"
        return pq.read_table(table).to_pandas()

    runs = {Path(r).name: triples_of(Path(r)) for r in args.compare.split(",")}
    common = set.intersection(*(set(t["source_id"]) for t in runs.values()))
    print(f"sources with a complete triple in every run: {len(common)} (each variant trains on its own complete ones)")
    empty = pd.DataFrame(columns=["s1", "s2", "label"])
    results, models = [], {}
    print("\n| data | seed | triples | STS-B dev | best step | train s |\n|---|---|---|---|---|---|")
    for name, triples in runs.items():
        for seed in [int(x) for x in args.seeds.split(",")]:
            data = split_data(triples, empty, base.heldout_fraction, base.seed)  # same split whatever the seed
            model, _ = load_sentence_transformer(BackboneSettings(kind="encoder"))
            settings = base.model_copy(update={"backbone": BackboneSettings(kind="encoder"), "losses": LossSettings(),
                                               "seed": seed})
            t = time.perf_counter()
            with tempfile.TemporaryDirectory() as work:
                state = train(model, data, dev, settings, Path(work))
            seconds = time.perf_counter() - t
            score = evaluate_sources(lambda s: model.encode(s, batch_size=64), ["stsb-dev"])["stsb-dev"]["spearman"]
            results.append((name, seed, score))
            models[(name, seed)] = model
            print(f"| {name} | {seed} | {len(data.triples)} | {score:.2f} | {state.best_step} | {seconds:.0f} |",
                  flush=True)
    print("\nmean STS-B dev per data variant (the choice): " + ", ".join(
        f"{n} {np.mean([s for m, _, s in results if m == n]):.2f} ± {np.std([s for m, _, s in results if m == n]):.2f}"
        for n in runs))
    held_out = ["stsb-test"] + ([str(SICK_TRIAL)] if SICK_TRIAL.is_file() else [])
    print("\nreported once, after the choice (STS-B test, SICK trial):\n| data | seed | STS-B test | SICK trial |"
          "\n|---|---|---|---|")
    for (name, seed), model in models.items():
        r = evaluate_sources(lambda s: model.encode(s, batch_size=64), held_out)
        sick = f"{r[held_out[1]]['spearman']:.2f}" if len(held_out) > 1 else "—"
        print(f"| {name} | {seed} | {r['stsb-test']['spearman']:.2f} | {sick} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    ap.add_argument("--pairs", default="data/outputs/latest/label-pairs/pairs.parquet")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--dev-pairs", type=int, default=500, help="STS-B dev pairs for model selection during training")
    ap.add_argument("--backbones", default="encoder,bellm")
    ap.add_argument("--variants", default=None, help="a pipeline run's output folder: rows per data variant")
    ap.add_argument("--negatives", default=None, help="a pipeline run's output folder: rows per InfoNCE negatives")
    ap.add_argument("--mining-corpus", default="default")
    ap.add_argument("--mined", type=int, default=2, help="mined negatives per triple")
    ap.add_argument("--compare", default=None, help="comma-separated run folders: stage-1 data variants, one row "
                    "per --seeds training seed (InfoNCE + HT)")
    ap.add_argument("--seeds", default="13,14,15")
    ap.add_argument("--rows", default=None, help="comma-separated row numbers (from 1) to run; default all")
    ap.add_argument("--save-best", default=None, help="export the row best on STS-B dev to this folder (for "
                    "`stsgen eval` on other sets)")
    args = ap.parse_args()
    # precision: as every row recorded before TrainSettings.precision (float32 on the CPU, bf16 on a GPU); lr: as
    # every row recorded before TrainSettings' lr became 'auto' (each row names its losses itself)
    base = TrainSettings(steps=args.steps, batch_size=args.batch_size, eval_every=max(args.steps // 4, 1),
                         dev_pairs=args.dev_pairs, lr=3e-5, precision=autocast_precision(resolve_device("auto")))
    if args.compare:
        return compare(args, base)
    rows = rows_and_data(args, base.heldout_fraction, base.seed)
    if args.rows:
        rows = [rows[int(i) - 1] for i in args.rows.split(",")]
    dev = read_stsb("dev")
    dev = dev.iloc[np.sort(np.random.default_rng(base.seed).permutation(len(dev))[: args.dev_pairs])]
    print(f"{args.steps} steps × batch {args.batch_size}; torch threads {torch.get_num_threads()}")
    print("\n| backbone | row | STS-B dev | STS-B test | best step | train s |\n|---|---|---|---|---|---|")
    best_dev = (float("-inf"), None)
    for name, backbone, losses, data in rows:
        model, info = load_sentence_transformer(backbone)
        t, best = time.perf_counter(), "—"
        if losses is not None:
            settings = base.model_copy(update={"backbone": backbone, "losses": losses, "mining": MiningSettings(
                num_negatives=args.mined if losses.negatives != "generated" else 0)})
            with tempfile.TemporaryDirectory() as work:
                state = train(model, data, dev, settings, Path(work))  # best-on-dev weights loaded
                best = str(state.best_step)
        seconds = time.perf_counter() - t
        results = evaluate_sources(lambda s: model.encode(s, batch_size=64), ["stsb-dev", "stsb-test"])
        print(f"| {info['source']} | {name} | {results['stsb-dev']['spearman']:.2f} | "
              f"{results['stsb-test']['spearman']:.2f} | {best} | {seconds:.0f} |", flush=True)
        if args.save_best and results["stsb-dev"]["spearman"] > best_dev[0]:
            from models.lora import merge_lora
            from tasks.train.model_export import export_model

            best_dev = (results["stsb-dev"]["spearman"], name)
            merge_lora(model)
            export_model(model.to("cpu"), Path(args.save_best))
    if args.save_best:
        print(f"best on STS-B dev: {best_dev[1]} ({best_dev[0]:.2f}) → {args.save_best}")

if __name__ == "__main__":
    main()
