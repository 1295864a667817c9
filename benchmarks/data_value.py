"""What the data is worth (issue 33): backbone × training data × anchors, 3 seeds each, one harness.

NGCSE's headline experiment (its Table 1: unsupervised SimCSE vs pattern-simulated triples on the same
backbone) at this machine's scale. Every row trains the same backbone with the same budget (steps, batch, learning
rate, evaluation every steps/4 on the full STS-B dev, best-on-dev weights with the untrained backbone as step 0)
on data built from the same anchors — the anchors of the generated runs' complete triples, the first N of them:

- `simcse`: unsupervised SimCSE, each anchor against itself under another dropout mask (NGCSE's baseline);
- `neighbours`: the anchor's next sentence in its corpus document as the positive (the previous one for a
  document's last sentence), a sentence of another document as the negative: what the corpus alone gives;
- `triples`: stsgen's triples, InfoNCE (s⁻ as hard negative) + hierarchical triplet (the train stage's default);
- `nli`: the NLI pattern's triples for the same anchors (`--nli-runs`: a run of `./stsgen generate --pattern nli` on
  the corpus `--save-anchor-corpus` wrote), InfoNCE only (no intermediate); anchors it has no triple for are left out;
- `hardneg`: stsgen's triples with the `--nli-runs` negative of the same anchor as a second hard negative beside s⁻
  (InfoNCE reads both: losses.negatives = "both") + hierarchical triplet;
- `pairs:SOURCE` / `triples+pairs:SOURCE`: the labeled pairs (`--pairs`, label-pairs' pairs.parquet) as a regression
  (CosineSimilarityLoss, or CoSENT with `--regression-loss cosent`) onto SOURCE — `label` (stage 3's mix), `rating`, `context_label` or `teacher` (an encoder
  teacher's cosine, tasks/llm/teacher.py) — alone, or beside the triples' losses: the label sources compared with
  everything else the same (TrainSettings.label_source).

STS-B dev chooses (the table's first columns); SICK trial and the STS12 train pairs (../shared/data, read in place)
and STS-B test are computed once, after every row has trained, and printed last. Never choose on them.

    .venv/bin/python -m benchmarks.data_value --runs data/outputs/data-value/r1 --sizes 100 --seeds 13,14,15 \
        --data simcse,neighbours,triples --backbone encoder --steps 100

The runs' triples are copied to benchmarks/data/data_value_triples.parquet (`--save-triples`) so the table can be
re-run without regenerating: `--runs benchmarks/data/data_value_triples.parquet`.
"""

from __future__ import annotations

import argparse
import copy
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
from scipy import stats  # noqa: E402

from tasks.core.device import autocast_precision, resolve_device, resolve_train_precision  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.core.sts_evaluation import evaluate_frame  # noqa: E402
from tasks.train import baselines  # noqa: E402
from tasks.train.backbones import BackboneSettings, load_sentence_transformer  # noqa: E402
from tasks.train.label_sources import regression_targets  # noqa: E402
from tasks.train.trainer import train  # noqa: E402
from tasks.train.training import LossSettings, TrainingData, TrainSettings  # noqa: E402
from tasks.train.weight_interpolation import backbone_snapshot, interpolate_state  # noqa: E402

TRIPLE_COLUMNS = ["source_id", "doc_id", "position", "anchor", "positive", "intermediate", "negative"]
SENTENCE_COLUMNS = TRIPLE_COLUMNS[3:]
LOSSES = {"simcse": LossSettings(simcse=True), "neighbours": LossSettings(hierarchical_triplet=0.0),
          "triples": LossSettings(), "nli": LossSettings(), "hardneg": LossSettings(negatives="both")}


def read_triples(sources: list[str]) -> pd.DataFrame:
    """The complete triples of run folders (or of a saved triples Parquet), in run order, one per anchor."""
    frames = []
    for source in sources:
        path = Path(source)
        table = path if path.suffix == ".parquet" else path / "generate-sts-triples" / "triples.parquet"
        frames.append(pq.read_table(table, columns=TRIPLE_COLUMNS).to_pandas())
    triples = pd.concat(frames, ignore_index=True).dropna(subset=["anchor", "positive", "negative"])
    return triples.drop_duplicates("anchor").reset_index(drop=True)


def recipe(kind: str, regression_loss: str = "cosine") -> tuple[str | None, LossSettings, str]:
    """(triple data, losses, label source) of a data variant: `simcse`, `neighbours`, `triples`, `pairs:SOURCE` or
    `triples+pairs:SOURCE`; the pairs' regression in the form `regression_loss` (LossSettings.regression_loss)."""
    parts = kind.split("+")
    sources = [p for p in parts if p.startswith("pairs:")]
    bases = [p for p in parts if not p.startswith("pairs:")]
    if len(sources) > 1 or len(bases) > 1 or (bases and bases[0] not in LOSSES) or (sources and bases == ["simcse"]):
        raise SystemExit(f"--data {kind}: one of {', '.join(LOSSES)} and/or one pairs:SOURCE (SimCSE takes no pairs)")
    base, source = (bases or [None])[0], (sources or [""])[0]
    if not source:
        return base, LOSSES[base], "label"
    label_source = source.removeprefix("pairs:")
    losses = LOSSES[base] if base else LossSettings(infonce=0.0, hierarchical_triplet=0.0)
    return base, losses.model_copy(update={"regression": 1.0, "regression_loss": regression_loss}), label_source


def training_frame(kind: str | None, triples: pd.DataFrame, seed: int, sentences: pd.DataFrame | None,
                   nli: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows one data variant trains on, from the same anchors (tasks/train/baselines.py)."""
    if kind is None:  # the pairs alone
        return triples.iloc[:0][SENTENCE_COLUMNS]
    if kind == "nli":
        return baselines.same_anchor_rows(triples, nli)
    if kind == "hardneg":
        return baselines.with_extra_negative(triples[SENTENCE_COLUMNS], nli)
    if kind == "neighbours":
        return baselines.neighbour_rows(triples, sentences, seed)
    if kind == "simcse":
        return baselines.simcse_rows(triples)
    return triples[SENTENCE_COLUMNS]


def pairs_of(triples: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The labeled pairs both of whose sentences belong to these triples: a row at N anchors trains on the pairs of
    those N anchors' triples only, so the learning curve's sizes differ in pairs as in triples."""
    sentences = set(triples[SENTENCE_COLUMNS].stack())
    return pairs[pairs["s1"].isin(sentences) & pairs["s2"].isin(sentences)].reset_index(drop=True)


def held_out_sets() -> dict[str, pd.DataFrame]:
    """SICK trial and the STS12 train pairs (read in place), STS-B test: reported once, never chosen on."""
    from benchmarks.held_out import held_out_pairs

    return {"SICK trial": held_out_pairs("sick-trial"), "STS12 train": held_out_pairs("sts12-train"),
            "STS-B test": read_stsb("test")}


def t_interval(values: list[float]) -> tuple[float, float]:
    """95 % t-interval of the mean over seeds."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return v.mean() - half, v.mean() + half


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="comma-separated run folders (or a saved triples Parquet)")
    ap.add_argument("--sizes", default="100", help="comma-separated anchor counts (the first N anchors)")
    ap.add_argument("--seeds", default="13,14,15")
    ap.add_argument("--data", default="simcse,neighbours,triples")
    ap.add_argument("--backbone", default="encoder", choices=("encoder", "bellm"))
    ap.add_argument("--source", default=None, help="the backbone's source (default: all-MiniLM-L6-v2 / SmolLM2-135M; "
                    "a .gguf file or a transformers folder)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--simcse-dropout", type=float, default=0.1, help="dropout given to a backbone that has none, "
                    "for the SimCSE rows only (tasks/train/baselines.ensure_dropout)")
    ap.add_argument("--table-out", default=None, help="also write the per-seed rows here (CSV)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--precision", default=None, choices=("auto", "float32", "bfloat16"),
                    help="the training's forward passes (TrainSettings.precision); by default as every row recorded "
                    "before the setting existed: float32 on the CPU, bf16 on a GPU with it")
    ap.add_argument("--dev-pairs", type=int, default=None, help="choose on this many seeded STS-B dev pairs (default "
                    "all 1,500; a subset only where encoding the full dev at every evaluation does not fit)")
    ap.add_argument("--pairs", default=None, help="label-pairs' pairs.parquet, or several comma-separated (their rows "
                    "concatenated, a repeated (s1, s2) kept once), for the pairs:SOURCE variants")
    ap.add_argument("--teacher", default="all-mpnet-base-v2", help="the pairs:teacher label source's encoder")
    ap.add_argument("--regression-loss", default="cosine", choices=("cosine", "cosent"),
                    help="the pairs' regression: CosineSimilarityLoss (L2 to the label) or CoSENT (its order only)")
    ap.add_argument("--save-triples", default=None, help="write the anchors' triples here (benchmarks/data)")
    ap.add_argument("--nli-runs", default=None, help="comma-separated run folders (or a saved triples Parquet) of the "
                    "NLI pattern on the same anchors, for the `nli` variant")
    ap.add_argument("--save-anchor-corpus", default=None, help="write the largest size's anchors here as a corpus "
                    "Parquet (one document each) for `./stsgen generate --pattern nli --corpus …`, then stop")
    ap.add_argument("--backbone-anchor", type=float, default=0.0, help="every trained row (SimCSE aside) also "
                    "keeps its embeddings near the frozen backbone's with this weight (LossSettings.backbone_anchor); "
                    "the rows are named 'DATA anchorW'")
    ap.add_argument("--wise", default="", help="comma-separated WiSE-FT alphas: each trained row is also reported "
                    "with its weights interpolated with the backbone's, (1 − α)·θ₀ + α·θ (a row 'DATA wiseα'; "
                    "tasks/train/weight_interpolation.py)")
    args = ap.parse_args()

    triples = read_triples(args.runs.split(","))
    if args.save_triples:
        triples.to_parquet(args.save_triples, index=False)
    if args.save_anchor_corpus:
        largest = max(int(s) for s in args.sizes.split(","))
        baselines.anchor_corpus(triples.iloc[:largest]).to_parquet(args.save_anchor_corpus, index=False)
        print(f"{min(largest, len(triples))} anchors → {args.save_anchor_corpus}")
        return
    nli = None
    if {"nli", "hardneg"} & set(args.data.split(",")):
        if not args.nli_runs:
            raise SystemExit("--data nli / hardneg need --nli-runs (a run of the NLI pattern on the same anchors)")
        nli = read_triples(args.nli_runs.split(","))
    dev, held = read_stsb("dev"), held_out_sets()
    if args.dev_pairs:
        dev = dev.iloc[np.sort(np.random.default_rng(0).permutation(len(dev))[: args.dev_pairs])]
    sentences = None
    if "neighbours" in args.data:  # the corpus the anchors came from (stage 1's default)
        from tasks.core.config import CorpusSettings
        from tasks.corpus.sentences import load_corpus

        sentences = load_corpus(CorpusSettings()).sentences
    recipes = {kind: recipe(kind, args.regression_loss) for kind in args.data.split(",")}  # fails before training
    if args.backbone_anchor:
        recipes = {kind if base == "simcse" else f"{kind} anchor{args.backbone_anchor:g}":
                   (base, losses if base == "simcse" else losses.model_copy(
                       update={"backbone_anchor": args.backbone_anchor}), source)
                   for kind, (base, losses, source) in recipes.items()}
    labeled = (pd.concat([pd.read_parquet(p) for p in args.pairs.split(",")], ignore_index=True)
               .drop_duplicates(["s1", "s2"]).reset_index(drop=True)) if args.pairs else None  # runs may share pairs
    if labeled is None and any(losses.regression for _, losses, _ in recipes.values()):
        raise SystemExit("the pairs:SOURCE variants need --pairs (label-pairs' pairs.parquet)")
    backbone = BackboneSettings(kind=args.backbone, source=args.source)
    device = resolve_device(args.device)
    targets = {source: regression_targets(labeled, source, args.teacher, str(device), args.pairs)[0]
               for _, losses, source in recipes.values() if losses.regression}  # each label source once
    base = TrainSettings(backbone=backbone, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                         eval_every=max(args.steps // 4, 1), heldout_fraction=0.0, device=args.device,
                         precision=resolve_train_precision(args.precision, device) if args.precision
                         else autocast_precision(device))
    print(f"{len(triples)} anchors with a complete triple; {args.steps} steps × batch {args.batch_size}, lr {args.lr}, "
          f"{base.precision}, every {base.eval_every} steps on STS-B dev ({len(dev)} pairs), best-on-dev "
          "(step 0 = backbone)")

    def encoder_of(model):
        return lambda sentences: model.encode(sentences, batch_size=64, convert_to_numpy=True)

    t = time.perf_counter()
    untrained, info = load_sentence_transformer(backbone, device=str(device))
    print(f"backbone loaded in {time.perf_counter() - t:.0f} s on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    model = untrained  # every row trains a fresh copy of these weights (loaded once: a GGUF dequantizes slowly)
    alphas = [float(a) for a in args.wise.split(",") if a]
    theta0 = backbone_snapshot(untrained) if alphas else {}
    zero = {"STS-B dev": evaluate_frame(encoder_of(model), dev)["spearman"]}
    zero |= {name: evaluate_frame(encoder_of(model), frame)["spearman"] for name, frame in held.items()}
    print(f"\nbackbone {info['source']}, untrained: STS-B dev {zero['STS-B dev']:.2f}")
    print("\n| anchors | data | training rows | seed | STS-B dev | best step | train s |\n|---|---|---|---|---|---|---|")
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        anchors = triples.iloc[:size]
        for kind, (triple_kind, losses, label_source) in recipes.items():
            pairs = pairs_of(anchors, targets[label_source]) if losses.regression \
                else pd.DataFrame(columns=["s1", "s2", "label"])  # the same for every seed
            for seed in [int(s) for s in args.seeds.split(",")]:
                frame = training_frame(triple_kind, anchors, seed, sentences, nli)
                data = TrainingData(frame.reset_index(drop=True), pairs, frame.iloc[:0])
                # model_copy skips TrainSettings' validators on purpose: `hardneg` reads negatives "both" from the
                # NLI run's column, not from mining, which the _mined_negatives_need_mining rule would demand.
                settings = base.model_copy(update={"losses": losses, "seed": seed})
                model = copy.deepcopy(untrained)
                if triple_kind == "simcse":
                    baselines.ensure_dropout(model, args.simcse_dropout)
                t = time.perf_counter()
                with tempfile.TemporaryDirectory() as work:
                    state = train(model, data, dev, settings, Path(work))  # best-on-dev weights loaded
                seconds = time.perf_counter() - t
                scores = {"STS-B dev": state.best_dev}
                scores |= {name: evaluate_frame(encoder_of(model), f)["spearman"] for name, f in held.items()}
                rows.append({"anchors": size, "data": kind, "seed": seed, "rows": len(frame) + len(data.pairs),
                             "best_step": state.best_step, "train_s": seconds, **scores})
                print(f"| {size} | {kind} | {len(frame) + len(data.pairs)} | {seed} | {state.best_dev:.2f} | {state.best_step} | "
                      f"{seconds:.0f} |", flush=True)
                tuned, plain = (backbone_snapshot(model) if alphas else {}), rows[-1]
                for alpha in alphas:  # the same best-on-dev weights, averaged with the backbone's
                    model.load_state_dict(interpolate_state(theta0, tuned, alpha))
                    mixed = {"STS-B dev": evaluate_frame(encoder_of(model), dev)["spearman"]}
                    mixed |= {name: evaluate_frame(encoder_of(model), f)["spearman"] for name, f in held.items()}
                    rows.append({**plain, "data": f"{kind} wise{alpha:g}", **mixed})
                    print(f"| {size} | {kind} wise{alpha:g} | | {seed} | {mixed['STS-B dev']:.2f} | | |", flush=True)
                if args.table_out:  # after every row, so a run stopped by a time limit keeps what it measured
                    pd.DataFrame(rows).assign(backbone=info["source"], steps=args.steps, lr=args.lr,
                                              precision=base.precision).to_csv(args.table_out, index=False)
    table = pd.DataFrame(rows)
    print("\nmean ± sd over seeds, STS-B dev (the choice):")
    for (size, kind), g in table.groupby(["anchors", "data"], sort=False):
        print(f"  {size} anchors, {kind}: {g['STS-B dev'].mean():.2f} ± {g['STS-B dev'].std(ddof=1):.2f}")

    print("\nreported once, after the choice (SICK trial, STS12 train, STS-B test); 'mean3' = mean of STS-B dev, SICK "
          "trial and STS12 train (the issue's target measure):")
    sets = ["STS-B dev", "SICK trial", "STS12 train", "STS-B test"]
    table["mean3"] = table[["STS-B dev", "SICK trial", "STS12 train"]].mean(axis=1)
    print("| anchors | data | " + " | ".join(sets) + " | mean3 |\n|---|---|" + "---|" * (len(sets) + 1))
    print("| — | backbone, untrained | " + " | ".join(f"{zero[s]:.2f}" for s in sets)
          + f" | {np.mean([zero[s] for s in sets[:3]]):.2f} |")
    for (size, kind), g in table.groupby(["anchors", "data"], sort=False):
        print(f"| {size} | {kind} | " + " | ".join(f"{g[s].mean():.2f} ± {g[s].std(ddof=1):.2f}" for s in sets)
              + f" | {g['mean3'].mean():.2f} |")
    print("\n− the untrained backbone, paired by seed (95 % t-interval over seeds): STS-B dev | SICK trial:")
    for (size, kind), g in table.groupby(["anchors", "data"], sort=False):
        cells = []
        for s in ("STS-B dev", "SICK trial"):
            diff = (g[s] - zero[s]).tolist()
            lo, hi = t_interval(diff)
            cells.append(f"{np.mean(diff):+.2f} [{lo:+.2f}, {hi:+.2f}]")
        print(f"  {size} anchors, {kind}: " + " | ".join(cells))
    if {"simcse", "triples"} <= set(table["data"]):
        print("\nstsgen triples − SimCSE, mean3, paired by seed (95 % t-interval over seeds):")
        for size, g in table.groupby("anchors"):
            a = g[g["data"] == "triples"].set_index("seed")["mean3"]
            b = g[g["data"] == "simcse"].set_index("seed")["mean3"]
            diff = (a - b).dropna().tolist()
            lo, hi = t_interval(diff)
            print(f"  {size} anchors: {np.mean(diff):+.2f} [{lo:+.2f}, {hi:+.2f}] (seeds: "
                  + ", ".join(f"{d:+.2f}" for d in diff) + ")")
    for other, what in (("nli", "NLI-pattern triples"), ("hardneg", "triples + the NLI negative")):
        if not {other, "triples"} <= set(table["data"]):
            continue
        print(f"\n{what} − STS-pattern triples on the same anchors, paired by seed (95 % t-interval):")
        for size, g in table.groupby("anchors"):
            cells = []
            for s in ("STS-B dev", "SICK trial", "STS12 train", "mean3"):
                a = g[g["data"] == other].set_index("seed")[s]
                diff = (a - g[g["data"] == "triples"].set_index("seed")[s]).dropna().tolist()
                lo, hi = t_interval(diff)
                cells.append(f"{s} {np.mean(diff):+.2f} [{lo:+.2f}, {hi:+.2f}]")
            print(f"  {size} anchors: " + "; ".join(cells))
    print(f"\ntotal train s: {table['train_s'].sum():.0f}")


if __name__ == "__main__":
    main()
