"""Stage 4, `train-surrogate`: a Siamese sentence encoder trained on the pipeline's own data (Sun et al. 2022, NGCSE,
BeLLM), in the stage outline (tasks.core.stage).

triples.parquet (+ pairs.parquet from label-pairs) → held-out split → backbone as a SentenceTransformer (encoder with
mean pooling, or a BeLLM-style decoder) → `SentenceTransformerTrainer` (tasks/train/trainer.py): InfoNCE + hierarchical
triplet + regression onto stage-3 labels, evaluation every N steps (STS-B dev Spearman; alignment / uniformity on
held-out pairs and dev → RFD) → best-on-dev weights, the backbone included → model/ (a sentence-transformers folder
with its model card), eval.json, curves. `prepare_training` reads and checks the data and finds the backbone;
`train_and_select` trains, picks the weights to ship and writes the outputs; `publish_training` creates the artifacts.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from models.embedding_metrics import rfd
from models.lora import merge_lora
from tasks.contracts import TRIPLE_SLOTS, StageIO, dataset_tables, read_triples
from tasks.core.artifacts import Progress, publish_image, publish_links, publish_markdown, publish_table
from tasks.core.config import ConfigError, CorpusSettings
from tasks.core.decontamination import DEFAULT_EVAL_SETS, EvalSentences, collect_eval_sentences
from tasks.core.device import device_info, resolve_device, scaled_batch
from tasks.core.hf_dataset import public_path
from tasks.core.stage import StageFolder, run_logger, stage_key
from tasks.core.store import fingerprint, read_input_table, sha256_path, write_json, write_parquet
from tasks.core.sts_data import read_stsb, stsb_version
from tasks.core.sts_evaluation import evaluate_sources
from tasks.corpus.sentences import load_corpus
from tasks.llm.teacher import teacher_identity
from tasks.train.backbones import backbone_identity, load_sentence_transformer
from tasks.train.hard_negatives import mine
from tasks.train.label_sources import regression_targets
from tasks.train.settings import TrainSettings, for_data
from tasks.train.surrogate_selection import comparison_markdown, comparison_rows, keeps_backbone, verdict
from tasks.train.trainer import check_training_data, resolved_settings, train
from tasks.train.training import TrainingData, split_data
from tasks.train.training_report import plot_curves, plot_rfd
from tasks.train.weight_interpolation import apply_interpolation, backbone_snapshot

STAGE = "train-surrogate"
CODE_VERSION = "train-v2"  # v2: SentenceTransformerTrainer
# A run's tables, or a dataset version's: the triples' columns, and the pairs' — their triples' ids (split_data keeps
# the pairs of held-out triples out of training) and the label sources' columns when there (label_source reads one).
_TRIPLES = ("source_id", *TRIPLE_SLOTS)
_PAIRS = ("s1", "s2", "label", "triple_id", "other_triple_id", "rating", "context_label")
_PAIRS_REQUIRED = ("s1", "s2", "label")
IO = StageIO(reads={"generate-sts-triples/triples.parquet": _TRIPLES, "label-pairs/pairs.parquet": _PAIRS,
                    "build-dataset/triples.parquet": _TRIPLES, "build-dataset/pairs.parquet": _PAIRS},
             writes={"model": (), "eval.json": ()})


def _eval_hash(source: str) -> str:
    """What an evaluation set's results depend on: its content (files) or the package version (STS-B)."""
    if source.startswith("stsb-"):
        return f"{source}@{stsb_version()}"
    return sha256_path(Path(source)) if Path(source).exists() else source


def _card_data(settings: TrainSettings, inputs: list[dict]) -> dict:
    """sentence-transformers' model card fields: what the model is and the data it was trained on (by content)."""
    source = public_path(settings.backbone.source) if settings.backbone.source else settings.backbone.kind
    return {"model_name": f"stsgen surrogate ({settings.backbone.kind}, from {source})",
            "train_datasets": [{"name": f"stsgen {i['role']} (sha256 {i['sha256'][:16]})", "size": i["rows"],
                                "columns": [f"<code>{c}</code>" for c in i["columns"]]}
                               for i in inputs if "rows" in i]}  # the tables; a mining corpus is no dataset row


def _card_section(settings: TrainSettings, inputs: list[dict], comparison: list[dict], shipped_step: int | None,
                  reverted: dict | None) -> str:
    """The provenance and selection section stsgen appends to sentence-transformers' own model card."""
    sources = "\n".join(f"- {i['role']}: `{public_path(str(i['path']))}` (sha256 `{i['sha256']}`)" + (
        f", manifest sha256 `{i['manifest_sha256']}`" if i.get("manifest_sha256") else "") for i in inputs)
    return ("\n\n## stsgen provenance\n\nTrained by the stsgen `train-surrogate` flow on sentence triples and pairs "
            "the pipeline generated from a corpus (LLM pattern simulation, stage-3 labels); no human similarity "
            f"labels were used in training.\n\n{sources}\n\n- losses: `{settings.losses.model_dump()}`"
            + (f", the pairs' regression target: {settings.label_source}\n" if settings.losses.regression else "\n") +
            f"- steps {settings.steps}, batch {settings.batch_size}, lr {settings.lr}, seed {settings.seed}; "
            f"shipped: step {shipped_step}\n\n### Backbone vs surrogate (Spearman ×100, cosine)\n\n"
            f"{comparison_markdown([dict(r, set=public_path(str(r['set']))) for r in comparison])}\n\n"
            f"{verdict(shipped_step, reverted, settings.wise_alpha)}\n")


@dataclass
class TrainJob:
    """Stage 4's inputs, read and checked: the split data, the mining candidates, the backbone and the eval sets."""

    settings: TrainSettings
    data: TrainingData
    inputs: list[dict]
    candidates: list[str] | None  # corpus sentences hard negatives are mined from
    backbone: dict  # its identity (kind, source, path, sha256): loaded only when the stage computes
    device: object
    eval_sources: list[str]
    mining_evals: EvalSentences | None = None  # sentences no mined negative may be (with candidates)

    @functools.cached_property
    def eval_hashes(self) -> list[str]:
        return [_eval_hash(s) for s in self.eval_sources]

    @functools.cached_property
    def train_key(self) -> str:
        """What training depends on: inputs, settings and the backbone's content (not its path). Checkpoints are
        keyed by it alone: adding an evaluation set retrains nothing, unless negatives are mined (the mining corpus is
        filtered against the evaluation sets)."""
        cross_encoder = self.settings.mining.cross_encoder
        mining_evals = {"mining_evals": [_eval_hash(s["source"]) for s in self.mining_evals.sources]} \
            if self.mining_evals is not None else {}  # what the mined negatives were kept clear of, by content
        return stage_key(STAGE, code=CODE_VERSION, inputs=[i["sha256"] for i in self.inputs],
                         cross_encoder=sha256_path(Path(cross_encoder)) if cross_encoder else None,
                         settings=self.settings, backbone=self.backbone["sha256"], **mining_evals)

    def key(self) -> str:
        wise = {"wise_alpha": self.settings.wise_alpha} if self.settings.wise_alpha != 1.0 else {}
        return fingerprint({"train": self.train_key, "eval": self.eval_hashes, **wise})


# Task runs of their own in the Prefect UI (state, duration, logs); in-process, no result caching: the trainer's
# checkpoints in the work folder are what resumes an interrupted training.
train_task = task(train, name="train-encoder", cache_policy=NO_CACHE)
evaluate_task = task(evaluate_sources, name="evaluate-sts", cache_policy=NO_CACHE)


def read_pairs_columns(path: Path) -> pd.DataFrame:
    """The pairs' declared columns (`_PAIRS`, those of them the file has; s1, s2 and label required)."""
    table = read_input_table(path, "Pairs file", "pass a pairs.parquet written by label-pairs", _PAIRS_REQUIRED)
    return table.select([c for c in _PAIRS if c in table.column_names]).to_pandas()


def training_inputs(triples: str | None, pairs: str | None, dataset: str | None) -> tuple[str, str | None]:
    """(triples, pairs) of a run's files or of a dataset version from build-dataset (its own triples and pairs)."""
    if (dataset is None) == (triples is None) or (dataset is not None and pairs is not None):
        raise ConfigError("Give train-surrogate either triples (a run's triples.parquet, and pairs) or dataset (a "
                          "version folder from build-dataset: its own triples and pairs), not both or neither.")
    return dataset_tables(Path(dataset)) if dataset is not None else (triples, pairs)


def prepare_training(triples: str | None, pairs: str | None, settings: TrainSettings,
                     dataset: str | None = None) -> TrainJob:
    """Resolve the device (an unavailable GPU fails first), read and check the training data — a run's `triples`
    and `pairs`, or a `dataset` version's — and the mining corpus (before anything is loaded or written), and find
    the backbone (loaded by `train_and_select`: a reused stage never loads it). Data without labeled pairs trains
    what `for_data` makes of `settings`: every entry point's one rule."""
    device = resolve_device(settings.device)
    triples, pairs = training_inputs(triples, pairs, dataset)
    triples_frame = read_triples(Path(triples), _TRIPLES)
    pairs_frame = read_pairs_columns(Path(pairs)) if pairs else pd.DataFrame(columns=list(_PAIRS_REQUIRED))
    settings = _for_data(settings, len(pairs_frame) > 0, dataset or triples)
    if settings.losses.regression and not len(pairs_frame):
        raise ConfigError("losses.regression is non-zero but there are no labeled pairs: pass the pairs.parquet "
                          "written by label-pairs (a dataset version has one only when its runs ran label-pairs), or "
                          "set losses.regression to 0.")
    inputs = [_input(triples, "triples"), *([_input(pairs, "pairs")] if pairs else [])]
    if settings.label_source == "teacher":  # (TrainSettings refuses a label source without the regression)
        # The teacher's folder checked and hashed here (the key); its labels are computed by train_and_select, after
        # the reuse decision: a reused stage never loads the teacher.
        teacher = teacher_identity(settings.teacher)
        inputs.append({"path": teacher["teacher"], "sha256": teacher["sha256"], "role": "teacher",
                       "licence": teacher["licence"]})
    elif settings.label_source != "label":  # a stage-3 column as the target: checked now, nothing to compute
        pairs_frame, _ = regression_targets(pairs_frame, settings.label_source, settings.teacher, str(device),
                                            pairs or "pairs")
    data = split_data(triples_frame, pairs_frame, settings.heldout_fraction, settings.seed)
    check_training_data(data, settings.losses, triples, pairs or "pairs")
    settings = resolved_settings(settings, data, device)  # 'auto' lr and precision made concrete before the key
    candidates, mining_evals = None, None
    if settings.mining.num_negatives:
        corpus = load_corpus(settings.mining.corpus or CorpusSettings())  # an empty one fails here, nothing written
        candidates = corpus.usable["text"].tolist()
        inputs += [dict(i, role="mining corpus") for i in corpus.inputs]
        mining_evals = collect_eval_sentences(mining_eval_sets(settings))
    return TrainJob(settings, data, inputs, candidates, backbone_identity(settings.backbone), device,
                    evaluation_sets(settings), mining_evals)


def _for_data(settings: TrainSettings, has_pairs: bool, source: str) -> TrainSettings:
    """The one rule for data without labeled pairs (tasks/train/settings.py `for_data`), logged where it changed
    what trains: every entry point goes through here."""
    resolved = for_data(settings, has_pairs, source)
    if resolved is not settings:
        run_logger().info("%s has no labeled pairs: training without the pairs' regression, losses %s, lr %s",
                          source, resolved.losses.model_dump(), resolved.lr)
    return resolved


def evaluation_sets(settings: TrainSettings) -> list[str]:
    """STS-B dev (it chooses the checkpoint and guards the backbone), then the reported-only `eval_sets` — STS-B test
    among them only when asked for (the honest-numbers rule: a test split is read once, at the end)."""
    return ["stsb-dev", *dict.fromkeys(s for s in settings.eval_sets if s != "stsb-dev")]


def mining_eval_sets(settings: TrainSettings) -> list[str]:
    """What a mined negative must not be: STS-B dev and test, whether or not test is evaluated, and the eval sets."""
    return list(dict.fromkeys([*DEFAULT_EVAL_SETS, *evaluation_sets(settings)]))


def train_and_select(job: TrainJob, out: StageFolder) -> dict:
    """Train (resuming from the work folder's checkpoints), ship the best weights unless the backbone scores higher
    on the full STS-B dev, export the model and eval.json; returns the manifest's body."""
    logger = run_logger()
    settings, data, device = job.settings, job.data, job.device
    model, backbone = load_sentence_transformer(settings.backbone, device=str(device),
                                                card=_card_data(settings, job.inputs), identity=job.backbone)
    workdir = out.work_dir("work", job.train_key)
    if settings.label_source == "teacher":  # labelled once per pairs content (cached)
        data.pairs, _ = regression_targets(data.pairs, "teacher", settings.teacher, str(device))
    mining = None
    if job.candidates is not None:
        data.triples, mining = _mined(data, job.candidates, job.mining_evals, model, settings, workdir,
                                      scaled_batch(settings.encode_batch, device))
        logger.info("Mined %d negatives per triple for %d of %d triples from %d corpus sentences (%d more left out: "
                    "they hold an evaluation sentence; the other %d triples train without: left out)",
                    mining["per_triple"], mining["with_mined_negatives"], mining["triples"], mining["candidates"],
                    mining["eval_overlap_removed"], mining["without"])
    dev = read_stsb("dev")
    if settings.dev_pairs:
        dev = dev.iloc[np.sort(np.random.default_rng(settings.seed).permutation(len(dev))[: settings.dev_pairs])]
    progress = Progress("train", settings.steps, f"{settings.steps} steps, {len(data.triples)} triples, "
                                                 f"{len(data.pairs)} labeled pairs")

    def on_eval(state, record):
        progress.advance(state.step - progress.done)
        what = " (backbone)" if record["step"] == 0 else f", loss {record['loss']:.4f}" if "loss" in record else ""
        run_logger().info(f"step {record['step']}: STS-B dev {record['dev_spearman']:.2f}{what}")  # inside train-encoder: its task run's log

    batch = scaled_batch(settings.encode_batch, device)

    def encode(sentences: list[str]) -> np.ndarray:
        return model.encode(sentences, batch_size=batch, convert_to_numpy=True)

    backbone_results = _backbone_results(encode, job.eval_sources, job.eval_hashes, workdir)
    # The backbone's weights, to ship if the full-dev guard turns training down: restored into the trained model
    # object, which keeps the model card data the trainer filled in (datasets, losses, hyperparameters).
    backbone_weights = backbone_snapshot(model)
    t1 = time.perf_counter()
    every = max(settings.steps // 50, 1)  # progress artifact updates: about 50 in a training

    def on_step(step: int) -> None:
        if step % every == 0 or step == settings.steps:
            progress.advance(step - progress.done)

    state = train_task(model, data, dev, settings, workdir, on_eval=on_eval, encode_batch=batch,
                       on_step=on_step)  # best loaded
    train_s = time.perf_counter() - t1
    shipped_step = state.best_step
    reverted = None  # the checkpoint the full-dev guard turned down, with its scores (kept for the record)
    if shipped_step == 0:
        results = backbone_results  # best.pt holds the backbone's own weights
    else:
        if settings.wise_alpha < 1.0:  # the best checkpoint averaged with the backbone; the guard judges the mix
            apply_interpolation(model, backbone_weights, settings.wise_alpha)
            logger.info("WiSE-FT: step %s interpolated with the backbone at alpha %g", shipped_step,
                        settings.wise_alpha)
        results = evaluate_task(encode, job.eval_sources)
        if keeps_backbone(backbone_results, results):  # the training-time dev split was a subsample
            logger.warning("Step %s beat the backbone on the training-time dev split but not on the full STS-B dev: "
                           "shipping the backbone", shipped_step)
            model.load_state_dict(backbone_weights)
            reverted = {"step": shipped_step, "wise_alpha": settings.wise_alpha,
                        **{k: r["spearman"] for k, r in results.items()}}
            shipped_step, results = 0, backbone_results
    comparison = comparison_rows(backbone_results, results)
    evals = [r for r in state.history if "align_heldout" in r and r["step"] > 0]  # RFD: over trained checkpoints
    rfd_values = {"rfd_a": rfd([r["align_heldout"] for r in evals], [r["align_dev"] for r in evals]),
                  "rfd_u": rfd([r["uniform_heldout"] for r in evals], [r["uniform_dev"] for r in evals])} \
        if evals else {}
    model_dir = out.folder / "model"
    model.to("cpu")  # exported and reloaded on any machine
    merge_lora(model)  # adapters folded into the weights: the exported folder is a plain model
    from tasks.train.model_export import export_model  # lazy: sentence-transformers takes ~2 s to import

    export_model(model, model_dir, _card_section(settings, job.inputs, comparison, shipped_step, reverted))
    # The loss history for the UI (publish reads nothing back): every step's record, up to ~100 rows.
    losses = [r for r in state.history if "loss" in r]
    out.preview = [{k: round(v, 5) if isinstance(v, float) else v for k, v in r.items()}
                   for r in losses[:: max(len(losses) // 100, 1)]]
    out.add(plot_curves(state.history, out.folder / "training_curves.png"))
    out.add(plot_rfd(state.history, out.folder / "rfd.png"))
    out.write_json("eval.json", {
        "results": results, "backbone_results": backbone_results, "shipped_step": shipped_step,
        "checkpoint_turned_down": reverted, "best_step": state.best_step,
        "wise_alpha": settings.wise_alpha if shipped_step else None,
        "best_dev_spearman_during_training": state.best_dev, **rfd_values,
        "history": [r for r in state.history if "dev_spearman" in r]})
    out.add(model_dir)
    return {
        "code_version": CODE_VERSION, "seed": settings.seed, "inputs": job.inputs,
        "parameters": settings.model_dump(), "device": device_info(device), "backbone": backbone,
        "eval_sets": job.eval_sources,
        "counts": {"train_triples": len(data.triples), "heldout_triples": len(data.heldout),
                   "train_pairs": len(data.pairs), "steps": state.step,
                   **({"mined_negatives": mining} if mining else {})},
        "selection": {"shipped_step": shipped_step, "best_step_on_training_dev": state.best_step,
                      "wise_alpha": settings.wise_alpha if shipped_step else None,
                      "backbone": {k: r["spearman"] for k, r in backbone_results.items()},
                      "surrogate": {k: r["spearman"] for k, r in results.items()},
                      "checkpoint_turned_down": reverted},
        "comparison": comparison, "rfd": rfd_values,
        "timings": {"train_s": round(train_s, 2)},
    }


def _alpha(selection: dict) -> float:
    """The WiSE-FT alpha of what shipped (1.0: plain weights, the backbone's included)."""
    return 1.0 if selection.get("wise_alpha") is None else selection["wise_alpha"]


def publish_training(out: StageFolder, manifest: dict) -> None:
    selection, backbone, comparison = manifest["selection"], manifest["backbone"], manifest["comparison"]
    shipped, reverted, rfd_values = selection["shipped_step"], selection["checkpoint_turned_down"], manifest["rfd"]
    publish_table("train-results", comparison, "Backbone vs surrogate (Spearman ×100)")
    publish_markdown("train-summary", "\n".join([
        f"# train-surrogate — {backbone['kind']} from {backbone['source']}", "", comparison_markdown(comparison), "",
        f"**{verdict(shipped, reverted, _alpha(selection))}**", "",
        f"- best dev during training (training-time split) at step {selection['best_step_on_training_dev']}; "
        + (f"RFD_a {rfd_values['rfd_a']:.4f}, RFD_u {rfd_values['rfd_u']:.4f}" if rfd_values else "no RFD"),
        f"- {manifest['counts']['steps']} steps in {manifest['timings']['train_s']:.0f} s; model: "
        f"`{out.folder / 'model'}`",
    ]), "Stage 4 summary")
    publish_image("train-curves", out.folder / "training_curves.png", "Loss and STS-B dev Spearman")
    if out.preview:
        publish_table("train-loss-history", out.preview, "Training loss per step (and each loss part)")
    publish_image("train-rfd", out.folder / "rfd.png",
                  "Alignment / uniformity: held-out training pairs vs STS-B dev")
    publish_links("train", {"model": out.folder / "model", "eval.json": out.folder / "eval.json",
                            "manifest.json": out.folder / "manifest.json"}, "Stage 4 outputs")
    run_logger().info(comparison_markdown(comparison) + "\n" + verdict(shipped, reverted, _alpha(selection)))


def _mined(data, candidates: list[str], evals: EvalSentences | None, model, settings: TrainSettings, workdir: Path,
           batch: int):
    """The training triples with mined negatives, mined once per training key (a resumed run trains on the same)."""
    cache = workdir / "mined_triples.parquet"
    if cache.is_file():
        meta = json.loads((workdir / "mined_counts.json").read_text())
        return pd.read_parquet(cache), meta
    triples, counts = mine(data.triples, candidates, model, settings.mining, settings.seed, batch,
                           exclude=data.heldout, evals=evals)
    workdir.mkdir(parents=True, exist_ok=True)
    write_parquet(cache, pa.Table.from_pandas(triples, preserve_index=False))
    write_json(workdir / "mined_counts.json", counts)
    return triples, counts


def _input(path: str, role: str) -> dict:
    """An input's content hash, and its stage manifest's where it has one (the card and manifest name both)."""
    manifest = Path(path).parent / "manifest.json"
    meta = pq.read_metadata(path)  # the card's dataset rows and the columns training reads
    read = TRIPLE_SLOTS if role == "triples" else _PAIRS
    return {"path": path, "sha256": sha256_path(Path(path)), "role": role, "rows": meta.num_rows,
            "columns": [c for c in read if c in meta.schema.names],
            **({"manifest_sha256": sha256_path(manifest)} if manifest.is_file() else {})}


def _backbone_results(encode, sources: list[str], key: list[str], workdir: Path) -> dict:
    """The untrained backbone on every evaluation set (`key`: their content hashes), computed once per training key
    and evaluation sets (a resumed run reads it back instead of encoding again)."""
    cache = workdir / "backbone_eval.json"
    if cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get("eval") == key:
            return saved["results"]
    results = evaluate_task(encode, sources)
    workdir.mkdir(parents=True, exist_ok=True)
    write_json(cache, {"eval": key, "results": results})
    return results
