"""What the data is worth (issue 33): backbone × training data × anchors, 3 seeds each, one harness.

NGCSE's headline experiment (its Table 1: unsupervised SimCSE vs pattern-simulated triples on the same
backbone) at this machine's scale. Every row trains the same backbone under the same budget rule (steps, batch,
learning rate, evaluation every steps/4 on the full STS-B dev; a fixed `--steps`/`--lr`, or with `--search-budget`
each row's own searched on dev the same way for every row) on data built from the same anchors — the anchors of the
generated runs' complete triples, the first N of them. A trained row keeps its best *trained* checkpoint on dev
(step > 0): the untrained backbone is the table's `backbone` row, never a candidate, so a row can land under it
(benchmarks/data_value_selection.py says what chooses and on what):

- `simcse`: unsupervised SimCSE, each anchor against itself under another dropout mask (NGCSE's baseline);
- `simcse-paper`: the same at SimCSE's paper setting (lr 3e-5, batch 64, one epoch of the anchors), never searched;
- `neighbours`: the anchor's next sentence in its corpus document as the positive (the previous one for a
  document's last sentence), a sentence of another document as the negative: what the corpus alone gives;
- `triples`: stsgen's triples, InfoNCE (s⁻ as hard negative) + hierarchical triplet (the train stage's default);
- `nli`: the NLI pattern's triples for the same anchors (`--nli-runs`: a run of `./stsgen generate --pattern nli` on
  the corpus `--save-anchor-corpus` wrote), InfoNCE only (no intermediate); anchors it has no triple for are left out;
- `hardneg`: stsgen's triples with the `--nli-runs` negative of the same anchor as a second hard negative beside s⁻
  (InfoNCE reads both: losses.negatives = "both") + hierarchical triplet;
- `mined`: stsgen's triples with a hard negative mined by the untrained backbone itself from the default corpus
  beside s⁻ — the train stage's `mining.num_negatives` 1 at its defaults (tasks/train/hard_negatives.py), mined per
  seed as the stage does — + hierarchical triplet; a triple no candidate passes for is left out, as in the stage;
  with `--miner`, a trained model mines instead (the surrogate itself), and the row still trains from the backbone;
- `pairs:SOURCE` / `triples+pairs:SOURCE`: the labeled pairs (`--pairs`, label-pairs' pairs.parquet) as a regression
  (CosineSimilarityLoss, or CoSENT with `--regression-loss cosent`) onto SOURCE — `label` (stage 3's mix), `rating`, `context_label` or `teacher` (an encoder
  teacher's cosine, tasks/llm/teacher.py) — alone, or beside the triples' losses: the label sources compared with
  everything else the same (TrainSettings.label_source).

STS-B dev chooses (checkpoints and budgets); SICK trial (../shared/data, read in place) confirms; STS-B test is
evaluated once, on each row's chosen weights. STS12 train is the generator's few-shot pattern pool: the column
`sts12_train_pattern_pool` — a pattern pool, not a judgement — is in no choice and no mean. The one mean is that of
STS-B dev and SICK trial. The per-seed rows (`--table-out`) record each row's steps, lr and budget search.

    .venv/bin/python -m benchmarks.data_value --runs data/outputs/data-value/r1 --sizes 100 --seeds 13,14,15 \
        --data simcse,neighbours,triples --backbone encoder --steps 100
    .venv/bin/python -m benchmarks.data_value --runs … --sizes 400 --data simcse,simcse-paper,triples \
        --backbone bellm --search-budget --steps 100 --search-max-steps 1600 --search-lrs 3e-5,1e-4

The runs' triples are copied to benchmarks/data/data_value_triples.parquet (`--save-triples`) so the table can be
re-run without regenerating: `--runs benchmarks/data/data_value_triples.parquet`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from benchmarks.data_value_columns import COLUMNS, DEV, PAPER_BUDGET, POOL, SICK, TEST  # noqa: E402
from benchmarks.data_value_report import report  # noqa: E402
from benchmarks.data_value_search import ladder, search_budget, search_record  # noqa: E402
from benchmarks.data_value_selection import (  # noqa: E402
    PAPER_SIMCSE,
    against_backbone,
    backbone_row,
    budget_of,
    held_scores,
    paper_steps,
    scores_of,
    train_candidate,
    with_mean,
)
from tasks.core.decontamination import EvalSentences  # noqa: E402
from tasks.core.defaults import DEFAULT_TEACHER  # noqa: E402
from tasks.core.device import autocast_precision, resolve_device, resolve_train_precision  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.train import baselines  # noqa: E402
from tasks.train.backbones import BackboneSettings, load_sentence_transformer  # noqa: E402
from tasks.train.label_sources import regression_targets  # noqa: E402
from tasks.train.model_export import MODEL_FILES, is_model_folder, load_model_folder  # noqa: E402
from tasks.train.training import LossSettings, TrainingData, TrainSettings  # noqa: E402
from tasks.train.weight_interpolation import backbone_snapshot, interpolate_state  # noqa: E402

TRIPLE_COLUMNS = ["source_id", "doc_id", "position", "anchor", "positive", "intermediate", "negative"]
SENTENCE_COLUMNS = TRIPLE_COLUMNS[3:]
SIMCSE = ("simcse", "simcse-paper")
LOSSES = {"simcse": LossSettings(simcse=True), "simcse-paper": LossSettings(simcse=True), "neighbours": LossSettings(hierarchical_triplet=0.0),
          "triples": LossSettings(), "nli": LossSettings(), "hardneg": LossSettings(negatives="both"),
          "mined": LossSettings(negatives="both")}


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
    """(triple data, losses, label source) of a data variant: one of LOSSES (`simcse`, `neighbours`, `triples`,
    `mined`, …), `pairs:SOURCE`, or a triple variant + `pairs:SOURCE` (SimCSE aside); the pairs' regression in the
    form `regression_loss` (LossSettings.regression_loss)."""
    parts = kind.split("+")
    sources = [p for p in parts if p.startswith("pairs:")]
    bases = [p for p in parts if not p.startswith("pairs:")]
    if len(sources) > 1 or len(bases) > 1 or (bases and bases[0] not in LOSSES) or (sources and bases and bases[0] in SIMCSE):
        raise SystemExit(f"--data {kind}: one of {', '.join(LOSSES)} and/or one pairs:SOURCE (SimCSE takes no pairs)")
    base, source = (bases or [None])[0], (sources or [""])[0]
    if not source:
        return base, LOSSES[base], "label"
    label_source = source.removeprefix("pairs:")
    losses = LOSSES[base] if base else LossSettings(infonce=0.0, hierarchical_triplet=0.0)
    return base, losses.model_copy(update={"regression": 1.0, "regression_loss": regression_loss}), label_source


def tagged(recipes: dict, tag: str, applies) -> dict:
    """The recipes with ' TAG' added to the name of each that `applies(base, source)` to (the miner's or teacher's
    name, so a row says who mined or labeled for it)."""
    return {f"{kind} {tag}" if applies(base, source) else kind: (base, losses, source)
            for kind, (base, losses, source) in recipes.items()}


def mining_evals() -> EvalSentences:
    """What a mined negative must not be: STS-B dev and test (as in the train stage) and SICK trial, read in place
    (the train stage leaves out SICK trial where it is one of its eval sets)."""
    from benchmarks.held_out import SICK_TRIAL
    from tasks.core.decontamination import DEFAULT_EVAL_SETS, collect_eval_sentences

    return collect_eval_sentences([*DEFAULT_EVAL_SETS, str(SICK_TRIAL)])


def training_frame(kind: str | None, triples: pd.DataFrame, seed: int, sentences: pd.DataFrame | None,
                   nli: pd.DataFrame | None = None, model=None, evals: EvalSentences | None = None) -> pd.DataFrame:
    """The rows one data variant trains on, from the same anchors (tasks/train/baselines.py; `mined`: `model` mines
    from `sentences`, the corpus, less `evals`' sentences)."""
    if kind is None:  # the pairs alone
        return triples.iloc[:0][SENTENCE_COLUMNS]
    if kind == "mined":  # as the train stage: a triple no candidate passed for is left out (trainer.training_datasets)
        from tasks.train.hard_negatives import MiningSettings, mine, mined_columns

        usable = sentences.loc[sentences["usable"], "text"].tolist()  # the Corpus's `usable`, on its sentences table
        mined, counts = mine(triples[SENTENCE_COLUMNS], usable, model, MiningSettings(num_negatives=1), seed,
                             evals=evals)
        print(f"seed {seed}: {counts['with_mined_negatives']} of {counts['triples']} triples with a mined negative "
              f"(from {counts['candidates']} candidates; {counts['eval_overlap_removed']} more left out: they hold "
              "an evaluation sentence)", flush=True)
        return mined[mined[mined_columns(mined)].notna().all(axis=1)].reset_index(drop=True)
    if kind == "nli":
        return baselines.same_anchor_rows(triples, nli)
    if kind == "hardneg":
        return baselines.with_extra_negative(triples[SENTENCE_COLUMNS], nli)
    if kind == "neighbours":
        return baselines.neighbour_rows(triples, sentences, seed)
    if kind in SIMCSE:
        return baselines.simcse_rows(triples)
    return triples[SENTENCE_COLUMNS]


def pairs_of(triples: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The labeled pairs both of whose sentences belong to these triples: a row at N anchors trains on the pairs of
    those N anchors' triples only, so the learning curve's sizes differ in pairs as in triples."""
    sentences = set(triples[SENTENCE_COLUMNS].stack())
    return pairs[pairs["s1"].isin(sentences) & pairs["s2"].isin(sentences)].reset_index(drop=True)


def held_out_sets() -> dict[str, pd.DataFrame]:
    """SICK trial (confirms), STS-B test (reported once) and STS12 train (the generator's pattern pool, reported as
    `sts12_train_pattern_pool`, in no choice and no mean), SICK and STS12 read in place: never chosen on."""
    from benchmarks.held_out import held_out_pairs

    return {SICK: held_out_pairs("sick-trial"), TEST: read_stsb("test"), POOL: held_out_pairs("sts12-train")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="comma-separated run folders (or a saved triples Parquet)")
    ap.add_argument("--sizes", default="100", help="comma-separated anchor counts (the first N anchors)")
    ap.add_argument("--seeds", default="13,14,15")
    ap.add_argument("--data", default="simcse,neighbours,triples")
    ap.add_argument("--backbone", default="encoder", choices=("encoder", "bellm"))
    ap.add_argument("--source", default=None, help="the backbone's source (default: all-MiniLM-L6-v2 / SmolLM2-135M; "
                    "all-mpnet-base-v2 after `./stsgen teacher fetch`, a .gguf file or a transformers folder)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--simcse-dropout", type=float, default=0.1, help="dropout given to a backbone that has none, "
                    "for the SimCSE rows only (tasks/train/baselines.ensure_dropout)")
    ap.add_argument("--table-out", default=None, help="also write the per-seed rows here (CSV)")
    ap.add_argument("--steps", type=int, default=100, help="every row's steps; with --search-budget, the first rung "
                    "of the steps ladder (doubled while dev improves)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-5, help="every row's learning rate (without --search-budget)")
    ap.add_argument("--search-budget", action="store_true", help="each row's (steps, lr) searched on STS-B dev: per "
                    "lr of --search-lrs, --steps doubled while the mean dev over seeds improves, up to "
                    "--search-max-steps; the same search for every row (simcse-paper aside)")
    ap.add_argument("--search-lrs", default="1e-5,3e-5,1e-4", help="the search's learning rates")
    ap.add_argument("--search-max-steps", type=int, default=1600, help="the steps ladder's top")
    ap.add_argument("--precision", default=None, choices=("auto", "float32", "bfloat16"),
                    help="the training's forward passes (TrainSettings.precision); by default as every row recorded "
                    "before the setting existed: float32 on the CPU, bf16 on a GPU with it")
    ap.add_argument("--dev-pairs", type=int, default=None, help="choose on this many seeded STS-B dev pairs (default "
                    "all 1,500; a subset only where encoding the full dev at every evaluation does not fit)")
    ap.add_argument("--pairs", default=None, help="label-pairs' pairs.parquet, or several comma-separated (their rows "
                    "concatenated, a repeated (s1, s2) kept once), for the pairs:SOURCE variants")
    ap.add_argument("--teacher", default=DEFAULT_TEACHER, help="the pairs:teacher label source's encoder: the "
                    "registered one or a sentence-transformers folder, e.g. the larger weekly model "
                    "(anchors_curve.sh lever distilled)")
    ap.add_argument("--teacher-name", default=None, help="name the pairs:teacher rows 'DATA … teacher:NAME' (a name, "
                    "not a path, so that a committed CSV names no local path); needed with any --teacher but the "
                    "registered one")
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
    ap.add_argument("--miner", default=None, help="a sentence-transformers folder that mines the `mined` rows' "
                    "negatives in place of the untrained backbone — the surrogate itself, e.g. the weekly model "
                    "(anchors_curve.sh lever selfmined); the rows are named 'DATA … miner:NAME'")
    ap.add_argument("--miner-name", default=None, help="the --miner's NAME in the rows (default: its folder's name; "
                    "a name, not a path, so that a committed CSV names no local path)")
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
    sizes = [int(s) for s in args.sizes.split(",")]
    if max(sizes) > len(triples):  # a row is named by its anchors: it must have them all
        raise SystemExit(f"--sizes {max(sizes)}: --runs hold {len(triples)} anchors with a complete triple")
    recipes = {kind: recipe(kind, args.regression_loss) for kind in args.data.split(",")}  # fails before training
    bases = {base for base, _, _ in recipes.values()}
    if not args.pairs and any(losses.regression for _, losses, _ in recipes.values()):
        raise SystemExit("the pairs:SOURCE variants need --pairs (label-pairs' pairs.parquet)")
    teaches = any(source == "teacher" for _, _, source in recipes.values())
    if args.teacher_name and not teaches:
        raise SystemExit("--teacher-name names the pairs:teacher rows' teacher: give --data …pairs:teacher")
    if teaches and args.teacher != DEFAULT_TEACHER and not args.teacher_name:  # else two teachers' rows look alike
        raise SystemExit(f"--teacher {args.teacher}: name it with --teacher-name (the rows name their teacher, "
                         "never its path)")
    nli = None
    if {"nli", "hardneg"} & bases:
        if not args.nli_runs:
            raise SystemExit("--data nli / hardneg need --nli-runs (a run of the NLI pattern on the same anchors)")
        nli = read_triples(args.nli_runs.split(","))
    dev, held = read_stsb("dev"), held_out_sets()
    if args.dev_pairs:
        dev = dev.iloc[np.sort(np.random.default_rng(0).permutation(len(dev))[: args.dev_pairs])]
    sentences = None
    if {"neighbours", "mined"} & bases:  # stage 1's default corpus
        from tasks.core.config import CorpusSettings
        from tasks.corpus.sentences import load_corpus

        sentences = load_corpus(CorpusSettings()).sentences
    evals = mining_evals() if "mined" in bases else None
    if args.backbone_anchor:
        recipes = {kind if base in SIMCSE else f"{kind} anchor{args.backbone_anchor:g}":
                   (base, losses if base in SIMCSE else losses.model_copy(
                       update={"backbone_anchor": args.backbone_anchor}), source)
                   for kind, (base, losses, source) in recipes.items()}
    if args.miner_name and not args.miner:
        raise SystemExit("--miner-name names a --miner: give the --miner folder too")
    if args.miner:
        if "mined" not in bases:
            raise SystemExit(f"--miner {args.miner}: only the `mined` variants mine (--data mined…)")
        if not is_model_folder(Path(args.miner)):
            raise SystemExit(f"--miner {args.miner}: no sentence-transformers model there (none of "
                             f"{', '.join(MODEL_FILES)}); the weekly model is written by "
                             "`benchmarks/anchors_curve.sh weekly`")
        recipes = tagged(recipes, f"miner:{args.miner_name or Path(args.miner).name}", lambda base, _: base == "mined")
    if args.teacher_name:
        recipes = tagged(recipes, f"teacher:{args.teacher_name}", lambda _, source: source == "teacher")
    labeled = (pd.concat([pd.read_parquet(p) for p in args.pairs.split(",")], ignore_index=True)
               .drop_duplicates(["s1", "s2"]).reset_index(drop=True)) if args.pairs else None  # runs may share pairs
    backbone = BackboneSettings(kind=args.backbone, source=args.source)
    device = resolve_device(args.device)
    targets = {source: regression_targets(labeled, source, args.teacher, str(device), args.pairs)[0]
               for _, losses, source in recipes.values() if losses.regression}  # each label source once
    base = TrainSettings(backbone=backbone, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                         eval_every=max(args.steps // 4, 1), heldout_fraction=0.0, device=args.device,
                         precision=resolve_train_precision(args.precision, device) if args.precision
                         else autocast_precision(device))
    steps = ladder(args.steps, args.search_max_steps) if args.search_budget else None
    lrs = [float(lr) for lr in args.search_lrs.split(",")]
    budget = (f"steps {', '.join(map(str, steps))} while dev improves × lr {', '.join(f'{lr:g}' for lr in lrs)}"
              if steps else f"{args.steps} steps, lr {args.lr}")
    print(f"{len(triples)} anchors with a complete triple; {budget}, batch {args.batch_size}, {base.precision}, "
          f"every steps/4 on STS-B dev ({len(dev)} pairs), the best trained checkpoint on dev (step > 0)")

    t = time.perf_counter()
    untrained, info = load_sentence_transformer(backbone, device=str(device))
    print(f"backbone loaded in {time.perf_counter() - t:.0f} s on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    miner = untrained
    if args.miner:  # a trained model mines; every row still trains from the untrained backbone
        miner = load_model_folder(Path(args.miner), device=str(device))
        print(f"the mined negatives: mined by {args.miner}")
    alphas = [float(a) for a in args.wise.split(",") if a]
    theta0 = backbone_snapshot(untrained) if alphas else {}
    zero = scores_of(untrained, dev, held)  # the untrained backbone: its own row, never a trained row's candidate
    rows = [backbone_row(zero)]

    def write() -> None:  # after every row, so a run stopped by a time limit keeps what it measured
        if args.table_out:
            pd.DataFrame(rows, columns=COLUMNS).astype({c: "Int64" for c in ("seed", "batch_size", "best_step")}) \
                .assign(backbone=info["source"], precision=base.precision).to_csv(args.table_out, index=False)

    write()
    print(f"\nbackbone {info['source']}, untrained: STS-B dev {zero[DEV]:.2f}, SICK trial {zero[SICK]:.2f}")
    print("\n| anchors | data | training rows | seed | steps | lr | STS-B dev | best step | train s |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for size in sizes:
        anchors = triples.iloc[:size]
        for kind, (triple_kind, losses, label_source) in recipes.items():
            pairs = pairs_of(anchors, targets[label_source]) if losses.regression \
                else pd.DataFrame(columns=["s1", "s2", "label"])  # the same for every seed
            frames = {int(seed): training_frame(triple_kind, anchors, int(seed), sentences, nli, miner, evals)
                      for seed in args.seeds.split(",")}
            datas = {seed: TrainingData(f.reset_index(drop=True), pairs, f.iloc[:0]) for seed, f in frames.items()}
            settings = base.model_copy(update={"losses": losses})

            def run(n: int, lr: float, **update):
                candidate = train_candidate(untrained, datas, dev, budget_of(n, settings, lr=lr, **update),
                                            args.simcse_dropout if triple_kind in SIMCSE else None)
                for seed, r in candidate.runs.items():
                    print(f"| {size} | {kind} | {len(frames[seed]) + len(pairs)} | {seed} | {n} | {lr:g} | "
                          f"{r.best_dev:.2f} | {r.best_step} | {r.seconds:.0f} |", flush=True)
                return candidate

            if triple_kind == "simcse-paper":  # one epoch at batch 64, lr 3e-5, no warm-up: never searched
                n = paper_steps(len(next(iter(frames.values()))))
                chosen = run(n, PAPER_SIMCSE["lr"], batch_size=PAPER_SIMCSE["batch_size"], warmup_steps=0)
                tried, record = [chosen], PAPER_BUDGET
            elif steps:
                chosen, tried = search_budget(run, steps, lrs)
                record = search_record(chosen, tried, steps)
            else:
                chosen = run(args.steps, args.lr)
                tried, record = [chosen], search_record(chosen, [chosen], None)
            for seed, r in chosen.runs.items():  # the chosen budget's weights: now, and only now, every set
                scores = with_mean({DEV: r.best_dev} | held_scores(r.model, held))
                plain = {"anchors": size, "data": kind, "seed": seed, "rows": len(frames[seed]) + len(pairs),
                         "steps": chosen.steps, "lr": chosen.lr, "batch_size": chosen.batch_size,
                         "best_step": r.best_step, "train_s": r.seconds,
                         "search_train_s": sum(c.seconds for c in tried), "budget": record}
                rows.append({**plain, **scores, **against_backbone(scores, zero)})
                tuned = backbone_snapshot(r.model) if alphas else {}
                for alpha in alphas:  # the same chosen weights, averaged with the backbone's
                    r.model.load_state_dict(interpolate_state(theta0, tuned, alpha))
                    mixed = scores_of(r.model, dev, held)
                    rows.append({**plain, "data": f"{kind} wise{alpha:g}", "best_step": None, **mixed,
                                 **against_backbone(mixed, zero)})
                    print(f"| {size} | {kind} wise{alpha:g} | | {seed} | | | {mixed[DEV]:.2f} | | |", flush=True)
                r.model = None
                write()
    report(pd.DataFrame(rows, columns=COLUMNS))


if __name__ == "__main__":
    main()
