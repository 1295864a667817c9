"""Stage 4 on `SentenceTransformerTrainer`: the project's objective as sentence-transformers datasets and losses,
dev evaluation with `EmbeddingSimilarityEvaluator` (+ alignment / uniformity for RFD), best-on-dev selection that
includes the untrained backbone (step 0), and resume from the trainer's own checkpoints.

Datasets (`training_datasets`), one per kind of row, sampled round-robin (one batch of one dataset per optimizer
step, so every kind gets the same number of steps whatever its size):
- `hierarchical` — anchor, positive, negative, intermediate: InfoNCE (`MultipleNegativesRankingLoss`, s⁻ as hard
  negative, or its Cached variant for large batches in bounded memory) + β·hierarchical triplet, one forward pass;
- `contrastive` — anchor, positive, negative: the triples without an intermediate, InfoNCE only;
  (both triple datasets carry `mined_negative_1..k` after their own columns when mined negatives are in use:
  InfoNCE reads the generated s⁻, the mined ones or both, `losses.negatives`);
- `pairs` — sentence1, sentence2, score: stage-3 labels, `CosineSimilarityLoss` (L2 on the cosine, Sun et al. 2022) or
  `CoSENTLoss` (ranking; `losses.regression_loss`);
- `simcse` — anchor, anchor: the unsupervised SimCSE baseline (dropout makes the two views differ).

Every optimizer step's batch and dropout masks follow from the seed (the trainer's sampler and its saved RNG state),
so a run resumed from a checkpoint continues as the uninterrupted one would.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from tasks.core.config import ConfigError
from tasks.core.device import resolve_device, resolve_train_precision
from tasks.train.hard_negatives import mined_columns
from tasks.train.learning_rate import resolve_lr
from tasks.train.settings import LossSettings, TrainSettings
from tasks.train.training import TrainingData, TrainState

DEV_METRIC = "eval_sts-dev_spearman_cosine"
BEST_FILE = "best.pt"


# ---------------------------------------------------------------- data and losses
def check_training_data(data: TrainingData, losses: LossSettings, source: str, pairs_source: str = "pairs") -> None:
    """One clear error, before anything is written, for data the chosen losses cannot use (`source` / `pairs_source`:
    the files named in the message)."""
    t, needed = data.triples, ["anchor", "positive"]
    if not losses.simcse and losses.infonce:
        needed.append("negative")
    if not losses.simcse and losses.hierarchical_triplet:
        needed += ["intermediate", "negative"]
    missing = sorted({c for c in needed if c not in t})
    if missing:
        raise ConfigError(f"{source}: the triples lack column(s) {', '.join(missing)}, which the chosen losses need "
                          "(losses.infonce needs negative; losses.hierarchical_triplet needs intermediate and "
                          "negative): pass a triples.parquet written by generate-sts-triples, or set those "
                          "weights to 0.")
    if losses.regression and not losses.simcse and len(data.pairs):
        labels = pd.to_numeric(data.pairs["label"], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(labels) | (np.abs(labels) > 1.0))
        if len(bad):
            raise ConfigError(f"{pairs_source}: {len(bad)} label(s) outside [-1, 1] (first: row {int(bad[0])}, "
                              f"{labels[bad[0]]:g}); the regression losses read labels on the "
                              "cosine scale: pass the pairs.parquet written by label-pairs, or set losses.regression "
                              "to 0.")


def training_datasets(data: TrainingData, losses: LossSettings):
    """DatasetDict of the non-empty datasets the losses' weights ask for (see the module doc). With mined negatives
    in use, their columns follow the triple's own, and triples without them are left out (counted by the flow)."""
    from datasets import Dataset, DatasetDict

    t = data.triples
    mined = mined_columns(t) if losses.negatives != "generated" else []
    if mined:
        t = t[t[mined].notna().all(axis=1)]
    sets = {}
    if losses.simcse:
        sets["simcse"] = Dataset.from_dict({"anchor": t["anchor"].tolist(), "positive": t["anchor"].tolist()})
    else:
        with_m = t["intermediate"].notna().to_numpy() if "intermediate" in t and losses.hierarchical_triplet \
            else np.zeros(len(t), bool)
        if with_m.any():  # negative third: the column order sentence-transformers' InfoNCE expects
            sets["hierarchical"] = Dataset.from_dict(
                {c: t.loc[with_m, c].tolist() for c in ("anchor", "positive", "negative", "intermediate", *mined)})
        if losses.infonce and (~with_m).any():
            sets["contrastive"] = Dataset.from_dict(
                {c: t.loc[~with_m, c].tolist() for c in ("anchor", "positive", "negative", *mined)})
        if losses.regression and len(data.pairs):
            p = data.pairs
            sets["pairs"] = Dataset.from_dict({"sentence1": p["s1"].tolist(), "sentence2": p["s2"].tolist(),
                                               "score": p["label"].astype(float).tolist()})
    if not sets:
        raise ConfigError("No loss term has both data and a non-zero weight: check losses.* (infonce, "
                          "hierarchical_triplet, regression) and that the triples / pairs files are not empty.")
    return DatasetDict(sets)


def infonce_columns(losses: LossSettings, n_columns: int, first_mined: int) -> tuple[int, ...]:
    """InfoNCE's columns: anchor, positive, then the generated s⁻ (column 2) and/or the mined ones."""
    mined = tuple(range(first_mined, n_columns))
    return (0, 1) + {"generated": (2,), "mined": mined, "both": (2, *mined)}[losses.negatives]


def training_losses(model, losses: LossSettings, datasets) -> dict:
    """{dataset name: loss} for `training_datasets`' datasets."""
    from sentence_transformers.sentence_transformer import losses as st_losses

    from models.losses import BackboneAnchorLoss, HierarchicalTripletLoss, WeightedSumLoss

    def infonce():
        scale = 1.0 / losses.temperature  # sentence-transformers' scale is the inverse temperature
        if losses.infonce_mini_batch:
            return st_losses.CachedMultipleNegativesRankingLoss(model, scale=scale,
                                                                mini_batch_size=losses.infonce_mini_batch)
        return st_losses.MultipleNegativesRankingLoss(model, scale=scale)

    regression = {"cosine": st_losses.CosineSimilarityLoss, "cosent": st_losses.CoSENTLoss}[losses.regression_loss]
    # One frozen copy of the backbone for every dataset's anchor term (built before a resume loads a checkpoint).
    anchor = BackboneAnchorLoss(model) if losses.backbone_anchor and not losses.simcse else None
    out = {}
    for name, dataset in datasets.items():
        n = len(dataset.column_names)
        if name == "simcse":
            out[name] = infonce()
            continue
        if name == "hierarchical":
            parts = {"hierarchical_triplet": (HierarchicalTripletLoss(model, losses.m1, losses.m2),
                                              losses.hierarchical_triplet, (0, 1, 3, 2))}
            if losses.infonce:
                parts = {"infonce": (infonce(), losses.infonce, infonce_columns(losses, n, 4))} | parts
            texts = (0, 1, 2, 3)
        elif name == "contrastive":
            parts = {"infonce": (infonce(), losses.infonce, infonce_columns(losses, n, 3))}
            texts = (0, 1, 2)
        else:
            parts = {"regression": (regression(model), losses.regression, (0, 1))}
            texts = (0, 1)
        if anchor is not None:
            parts["backbone_anchor"] = (anchor, losses.backbone_anchor, texts)
        out[name] = WeightedSumLoss(model, parts)
    return out


def dev_evaluators(data: TrainingData, dev: pd.DataFrame, batch: int) -> list:
    """STS-B dev Spearman (the selection metric) and alignment / uniformity on held-out triples and dev positives."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from models.evaluators import AlignmentUniformityEvaluator

    positive = dev["gold"].to_numpy() >= 4.0
    heldout = (data.heldout["anchor"].tolist(), data.heldout["positive"].tolist()) if len(data.heldout) >= 2 \
        else ([], [])
    dev_positive = (dev.loc[positive, "s1"].tolist(), dev.loc[positive, "s2"].tolist())
    sts = EmbeddingSimilarityEvaluator(dev["s1"].tolist(), dev["s2"].tolist(), dev["gold"].astype(float).tolist(),
                                       batch_size=batch, main_similarity="cosine", name="sts-dev", write_csv=False)
    if len(heldout[0]) < 2 and len(dev_positive[0]) < 2:  # nothing to measure alignment on
        return [sts]
    return [AlignmentUniformityEvaluator(heldout, dev_positive, batch), sts]


# ---------------------------------------------------------------- trainer pieces
def _trainer_class():
    from sentence_transformers import SentenceTransformerTrainer

    class StateDictCheckpoints(SentenceTransformerTrainer):
        """Checkpoints hold the model's state dict instead of a `from_pretrained` folder. Why: a BeLLM decoder comes
        from a GGUF file and peft adapters save as adapter-only folders whose base `from_pretrained` cannot reopen
        from there; the state dict restores exactly what trains, for both backbones. Optimizer, scheduler, RNG and
        trainer state are the trainer's own files beside it."""

        def _save(self, output_dir: str | None = None, state_dict=None) -> None:
            folder = Path(output_dir or self.args.output_dir)
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(self.model.state_dict(), folder / "model_state.pt")

        def _load_from_checkpoint(self, checkpoint_path: str, model=None) -> None:
            self.model.load_state_dict(torch.load(Path(checkpoint_path) / "model_state.pt", map_location="cpu"))

    return StateDictCheckpoints


def _selection_callback(model, workdir: Path, on_eval: Callable[[TrainState, dict], None] | None,
                        on_step: Callable[[int], None] | None = None):
    from transformers import TrainerCallback

    class BestOnDev(TrainerCallback):
        """Keeps the best-on-dev weights in workdir/best.pt, step 0 (the backbone, evaluated on start) included: when
        training only hurts dev, the backbone is what ships. A tie keeps the earlier (simpler) model; NaN never wins.
        Survives a resume: the best so far is read back from best.pt."""

        def __init__(self):
            self.state = TrainState()
            best = workdir / BEST_FILE
            if best.is_file():
                saved = torch.load(best, map_location="cpu", weights_only=False)
                self.state.best_step, self.state.best_dev = saved["step"], saved["dev"]
            self.started = time.perf_counter()

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            record = eval_record(state.global_step, metrics or {})
            record["seconds"] = round(time.perf_counter() - self.started, 2)
            if record["dev_spearman"] > self.state.best_dev:
                self.state.best_dev, self.state.best_step = record["dev_spearman"], record["step"]
                tmp = workdir / f"{BEST_FILE}.tmp-{os.getpid()}"
                torch.save({"model": model.state_dict(), "step": record["step"], "dev": record["dev_spearman"]},
                           tmp)
                os.replace(tmp, workdir / BEST_FILE)  # old or new, never half of each
            self.state.step = state.global_step
            if on_eval:
                on_eval(self.state, record)

        def on_step_end(self, args, state, control, **kwargs):
            if on_step:
                on_step(state.global_step)

    return BestOnDev()


def last_complete_checkpoint(folder: Path) -> Path | None:
    """The newest checkpoint the trainer finished writing (its state file is written after the weights): a kill
    during a save leaves a partial newest folder, and the one before it is where to resume."""
    done = [p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()
            and (p / "trainer_state.json").is_file() and (p / "model_state.pt").is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def eval_record(step: int, metrics: dict) -> dict:
    """The trainer's eval metrics → the project's record (dev Spearman ×100, alignment / uniformity)."""
    record = {"step": step, "dev_spearman": 100.0 * float(metrics.get(DEV_METRIC, float("nan")))}
    for key in ("align_heldout", "uniform_heldout", "align_dev", "uniform_dev"):
        if f"eval_{key}" in metrics:
            record[key] = float(metrics[f"eval_{key}"])
    return record


def history(log_history: list[dict]) -> list[dict]:
    """Training log → records: {step, loss, <loss parts>} per step, {step, dev_spearman, …} per evaluation."""
    out = []
    for entry in log_history:
        if "loss" in entry:
            out.append({"step": entry["step"], "loss": float(entry["loss"]),
                        **{k: float(v) for k, v in entry.items() if k not in ("loss", "step", "epoch",
                                                                              "learning_rate", "grad_norm")}})
        elif DEV_METRIC in entry:
            out.append(eval_record(entry["step"], entry))
    return out


def train(model, data: TrainingData, dev: pd.DataFrame, settings: TrainSettings, workdir: Path,
          on_eval: Callable[[TrainState, dict], None] | None = None, encode_batch: int = 64,
          callbacks: list | None = None, on_step: Callable[[int], None] | None = None) -> TrainState:
    """Train `model` (a SentenceTransformer) for settings.steps optimizer steps, resuming from the newest checkpoint
    in workdir/checkpoints; the best-on-dev weights (step 0 included) end in workdir/best.pt and are loaded into
    `model` before returning. `workdir` must be keyed by everything the training depends on. `callbacks`: extra
    transformers `TrainerCallback`s (logging, early stopping). `on_eval(state, record)` after each evaluation,
    `on_step(step)` after each optimizer step (progress); the loss history is in the returned state, not printed."""
    import json

    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers, MultiDatasetBatchSamplers
    from transformers.trainer_callback import PrinterCallback

    workdir.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    settings = resolved_settings(settings, data, device)  # the stage resolved them already; direct callers may not
    datasets = training_datasets(data, settings.losses)
    checkpoints = workdir / "checkpoints"
    resume = last_complete_checkpoint(checkpoints)
    saved = json.loads((resume / "trainer_state.json").read_text()) if resume else {}
    if saved.get("global_step", 0) >= settings.steps:
        # Finished before (a later failure, or new evaluation sets): the trainer would take one more step. The model
        # goes where a fresh run leaves it (the device), so what follows runs there either way.
        return _finished(model.to(device), workdir, saved)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(checkpoints), max_steps=settings.steps, per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.lr, warmup_steps=settings.warmup_steps, lr_scheduler_type="linear",
        weight_decay=0.01, max_grad_norm=1.0, seed=settings.seed, data_seed=settings.seed,
        eval_strategy="steps", eval_steps=settings.eval_every, eval_on_start=resume is None,
        save_strategy="steps", save_steps=settings.eval_every, save_total_limit=1,
        logging_steps=1, report_to="none", disable_tqdm=True, use_cpu=device.type == "cpu",
        bf16=settings.precision == "bfloat16",  # autocast; weights stay float32
        # In-batch negatives must not be duplicates of the anchor's positive (false negatives for InfoNCE).
        batch_sampler=BatchSamplers.NO_DUPLICATES, multi_dataset_batch_sampler=MultiDatasetBatchSamplers.ROUND_ROBIN,
        dataloader_num_workers=0,
    )
    callback = _selection_callback(model, workdir, on_eval, on_step)
    trainer = _trainer_class()(
        model=model, args=args, train_dataset=datasets,
        loss=training_losses(model, settings.losses, datasets),
        evaluator=dev_evaluators(data, dev, encode_batch), callbacks=[callback, *(callbacks or [])])
    # With tqdm off the trainer prints every log record ({'loss': …} per step); the caller's progress and one line
    # per evaluation (on_step / on_eval) say it instead, and the records stay in the state's history.
    trainer.remove_callback(PrinterCallback)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    # Under bf16, accelerate wraps model.forward in autocast and leaves it there: unwrapped, so what follows (the
    # guard's full-dev comparison, every evaluation, the export) encodes in float32, as the saved model will.
    trainer.accelerator.unwrap_model(trainer.model, keep_fp32_wrapper=False)
    return _finished(model, workdir, {"global_step": trainer.state.global_step,
                                      "log_history": trainer.state.log_history})


def resolved_settings(settings: TrainSettings, data: TrainingData, device: torch.device) -> TrainSettings:
    """`settings` with its 'auto' lr and precision made concrete for this data and device (idempotent): the stage
    calls it before its key, so the key, manifest and card hold what the training used."""
    return settings.model_copy(update={"lr": resolve_lr(settings.lr, len(data.triples)),
                                       "precision": resolve_train_precision(settings.precision, device)})


def _finished(model, workdir: Path, trainer_state: dict) -> TrainState:
    """The run's state from the trainer's state and best.pt, with the best weights loaded into `model`."""
    state = TrainState(step=trainer_state["global_step"], history=history(trainer_state["log_history"]))
    best = workdir / BEST_FILE
    if best.is_file():
        saved = torch.load(best, map_location="cpu", weights_only=False)
        model.load_state_dict(saved["model"])
        state.best_step, state.best_dev = saved["step"], saved["dev"]
    # The card's metrics are the last evaluation's, not necessarily the shipped weights': the flow's table has those.
    model.model_card_data.eval_results_dict = {}
    return state
