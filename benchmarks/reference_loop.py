"""The reference training loop stage 4 ran before `SentenceTransformerTrainer` (tasks/train/trainer.py), kept only for the
parity benchmark (benchmarks/trainer_parity.py): the same weighted loss (InfoNCE + hierarchical triplet on a batch of
triples, + L2 regression of the cosine onto labels on a batch of pairs, summed every step), AdamW with linear warmup
and decay, periodic evaluation and best-on-dev selection (step 0 included). Plain functions over a bare backbone
module (`tasks.train.backbones.load_backbone`: `tokenize` + forward → embeddings).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from models.embedding_metrics import alignment, sts_spearman, uniformity
from models.losses import hierarchical_triplet_parts
from tasks.core.config import ConfigError
from tasks.core.device import autocast, module_device, resolve_device, scaled_batch
from tasks.train.training import TrainingData, TrainSettings, TrainState


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None,
             temperature: float) -> torch.Tensor:
    """−log exp(cos(a_i, p_i)/τ) / Σ_j [exp(cos(a_i, p_j)/τ) + exp(cos(a_i, n_j)/τ)], mean over the batch."""
    a = F.normalize(anchors, dim=-1)
    candidates = positives if negatives is None else torch.cat([positives, negatives], dim=0)
    logits = a @ F.normalize(candidates, dim=-1).T / temperature
    return F.cross_entropy(logits, torch.arange(len(a), device=a.device))


def cosine_regression(emb1: torch.Tensor, emb2: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    cos = F.cosine_similarity(emb1, emb2, dim=-1)
    return F.mse_loss(cos, labels.to(cos.dtype))


def embed(module: torch.nn.Module, sentences: list[str]) -> torch.Tensor:
    device = module_device(module)
    with autocast(device):
        return module(**{k: v.to(device) for k, v in module.tokenize(sentences).items()}).float()


@torch.inference_mode()
def encode(module: torch.nn.Module, sentences: list[str], batch: int = 64) -> np.ndarray:
    """Embeddings (N, D) in input order; batches of similar length (little padding)."""
    module.eval()
    order = np.argsort([-len(s) for s in sentences], kind="stable")
    chunks = [embed(module, [sentences[i] for i in order[k : k + batch]]).cpu().numpy()
              for k in range(0, len(sentences), batch)]
    if not chunks:
        return np.zeros((0, 1), dtype=np.float32)
    out = np.empty((len(sentences), chunks[0].shape[1]), dtype=np.float32)
    out[order] = np.concatenate(chunks)
    return out


def step_loss(module: torch.nn.Module, data: TrainingData, settings: TrainSettings, step: int
              ) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted loss of one step's batch (drawn from (seed, step))."""
    rng = np.random.default_rng([settings.seed, step])
    w, b = settings.losses, settings.batch_size
    parts: dict[str, torch.Tensor] = {}
    t = data.triples.iloc[rng.choice(len(data.triples), size=min(b, len(data.triples)), replace=False)] \
        if len(data.triples) else data.triples
    if w.simcse:
        anchors = t["anchor"].tolist()
        parts["simcse"] = info_nce(embed(module, anchors), embed(module, anchors), None, w.temperature)
    elif len(t) and (w.infonce or w.hierarchical_triplet):
        with_m = t["intermediate"].notna().to_numpy() if "intermediate" in t else np.zeros(len(t), bool)
        texts = t["anchor"].tolist() + t["positive"].tolist() + t["negative"].tolist() + \
            t.loc[with_m, "intermediate"].tolist()
        e = embed(module, texts)
        n = len(t)
        a, p, neg, m = e[:n], e[n : 2 * n], e[2 * n : 3 * n], e[3 * n :]
        if w.infonce:
            parts["infonce"] = w.infonce * info_nce(a, p, neg, w.temperature)
        if w.hierarchical_triplet and with_m.any():
            idx = torch.as_tensor(np.flatnonzero(with_m), device=e.device)
            parts["hierarchical_triplet"] = w.hierarchical_triplet * sum(hierarchical_triplet_parts(
                a[idx], p[idx], m, neg[idx], w.m1, w.m2).values())
    if w.regression and not w.simcse and len(data.pairs):
        pr = data.pairs.iloc[rng.choice(len(data.pairs), size=min(b, len(data.pairs)), replace=False)]
        e = embed(module, pr["s1"].tolist() + pr["s2"].tolist())
        labels = torch.tensor(pr["label"].to_numpy(), dtype=e.dtype, device=e.device)
        parts["regression"] = w.regression * cosine_regression(e[: len(pr)], e[len(pr) :], labels)
    if not parts:
        raise ConfigError("No loss term has both data and a non-zero weight: check losses.* (infonce, "
                          "hierarchical_triplet, regression) and that the triples / pairs files are not empty.")
    total = sum(parts.values())
    return total, {k: float(v.detach()) for k, v in parts.items()}


def evaluate(module: torch.nn.Module, data: TrainingData, dev: pd.DataFrame, batch: int = 64) -> dict[str, float]:
    """STS-B dev Spearman ×100; alignment (positives) and uniformity (sentences) on held-out pairs and on dev."""
    e1, e2 = encode(module, dev["s1"].tolist(), batch), encode(module, dev["s2"].tolist(), batch)
    out = {"dev_spearman": sts_spearman(e1, e2, dev["gold"].to_numpy())}
    positive = dev["gold"].to_numpy() >= 4.0
    out["align_dev"] = alignment(e1[positive], e2[positive]) if positive.any() else float("nan")
    out["uniform_dev"] = uniformity(np.concatenate([e1, e2]))
    if len(data.heldout) >= 2:
        a = encode(module, data.heldout["anchor"].tolist(), batch)
        p = encode(module, data.heldout["positive"].tolist(), batch)
        out["align_heldout"] = alignment(a, p)
        out["uniform_heldout"] = uniformity(np.concatenate([a, p]))
    return out


def _save(obj: dict, path: Path) -> None:
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # a checkpoint is either the old one or the new one, never half of each


def _keep_if_best(state: TrainState, record: dict, module: torch.nn.Module, workdir: Path) -> None:
    if record["dev_spearman"] > state.best_dev:  # NaN never counts as best; a tie keeps the earlier (simpler) model
        state.best_dev, state.best_step = record["dev_spearman"], record["step"]
        _save({"model": module.state_dict(), "step": record["step"]}, workdir / "best.pt")


def train(module: torch.nn.Module, data: TrainingData, dev: pd.DataFrame, settings: TrainSettings, workdir: Path,
          key: str, on_eval: Callable[[TrainState, dict], None] | None = None, stop_after: int | None = None
          ) -> TrainState:
    """Train for settings.steps (resuming from workdir/checkpoint.pt when its key matches); keep the best-on-dev
    weights in workdir/best.pt, the untrained backbone (step 0) included. The module is moved to settings.device.
    `stop_after` ends early after that many steps of this call (tests, interruptions)."""
    workdir.mkdir(parents=True, exist_ok=True)
    device = resolve_device(settings.device)
    module.to(device)
    encode_batch = scaled_batch(settings.encode_batch, device)
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr)
    warmup = max(settings.warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / settings.steps))
    state = TrainState()
    checkpoint = workdir / "checkpoint.pt"
    if checkpoint.is_file():
        saved = torch.load(checkpoint, weights_only=False, map_location=device)
        if saved.get("key") == key:
            module.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            state = saved["state"]
    started, done_here = time.perf_counter(), 0
    if state.step == 0 and not state.history:
        # Step 0 (the backbone itself) is a selection candidate like every checkpoint: when training only hurts dev,
        # the backbone is what best.pt holds and what ships.
        record = {"step": 0, **evaluate(module, data, dev, encode_batch), "seconds": 0.0}
        _keep_if_best(state, record, module, workdir)
        state.history.append(record)
        if on_eval:
            on_eval(state, record)
    while state.step < settings.steps and (stop_after is None or done_here < stop_after):
        module.train()
        torch.manual_seed(settings.seed * 1_000_003 + state.step)  # dropout masks depend on the step only
        loss, parts = step_loss(module, data, settings, state.step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        state.step += 1
        done_here += 1
        record = {"step": state.step, "loss": float(loss.detach()), **parts}
        if state.step % settings.eval_every == 0 or state.step == settings.steps:
            record |= evaluate(module, data, dev, encode_batch)
            record["seconds"] = round(time.perf_counter() - started, 2)
            _keep_if_best(state, record, module, workdir)
            state.history.append(record)
            _save({"key": key, "model": module.state_dict(), "optimizer": optimizer.state_dict(),
                   "scheduler": scheduler.state_dict(), "state": state}, checkpoint)
            if on_eval:
                on_eval(state, record)
        else:
            state.history.append(record)
    return state
