"""The never-worse guard of train-surrogate, through the flow: a checkpoint that won on the training-time dev split
but loses to the backbone on the full STS-B dev is turned down, and the model shipped is the backbone's own weights
(tasks/train/stage.py). The guard's rule alone (keeps_backbone) is tested in test_training.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

import tasks.core.sts_data
import tasks.train.stage
from flows.train_surrogate import train_surrogate
from tasks.train.backbones import BackboneSettings, load_sentence_transformer
from tasks.train.training import LossSettings, TrainSettings
from tests.train.test_training import synthetic_data


def test_the_flow_ships_the_backbones_own_weights_when_the_full_dev_turns_training_down(
        prefect_harness, tiny_encoder_dir, tmp_path, monkeypatch):
    """The never-worse guard through the flow. The regression pulls each anchor towards its negative (as in
    `_selection_run`); the training-time dev split's gold agrees with that, so a trained step is best there, and the
    full STS-B dev's gold is its mirror image (4.5 − gold: every Spearman on it is the negative of the split's), so
    whatever step was best on the split scores below the backbone on the full dev. The guard must then ship the
    backbone's weights, bit for bit, not the trained checkpoint's."""
    triples, _, _ = synthetic_data()
    s2 = list(triples["positive"]) + list(triples["negative"])
    negative = np.r_[np.zeros(len(triples)), np.ones(len(triples))]
    pairs = pd.DataFrame({"s1": list(triples["anchor"]) * 2, "s2": s2, "label": negative,
                          "triple_id": list(triples["source_id"]) * 2})
    split_dev = pd.DataFrame({"s1": pairs["s1"], "s2": s2, "gold": 4.5 * negative})
    full_dev = split_dev.assign(gold=4.5 - split_dev["gold"])
    monkeypatch.setattr(tasks.train.stage, "read_stsb", lambda split="dev", path=None: split_dev.copy())
    monkeypatch.setattr(tasks.core.sts_data, "read_stsb", lambda split="dev", path=None: full_dev.copy())
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / "pairs.parquet")
    settings = TrainSettings(steps=24, batch_size=12, lr=5e-3, warmup_steps=1, eval_every=8, heldout_fraction=0.0,
                             losses=LossSettings(infonce=0.0, hierarchical_triplet=0.0, regression=1.0),
                             backbone=BackboneSettings(source=str(tiny_encoder_dir)))
    paths = train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),
                            settings=settings, output_dir=str(tmp_path / "out"))
    report = json.loads(Path(paths["eval"]).read_text())
    split = {h["step"]: h["dev_spearman"] for h in report["history"]}
    assert report["best_step"] > 0 and split[report["best_step"]] > split[0]  # training won on the split ...
    turned_down = report["checkpoint_turned_down"]  # ... and lost on the full dev: turned down
    assert turned_down["step"] == report["best_step"] and report["shipped_step"] == 0
    assert turned_down["stsb-dev"] < report["backbone_results"]["stsb-dev"]["spearman"]
    backbone = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0].state_dict()
    trained = torch.load(next((tmp_path / "out").rglob("best.pt")), map_location="cpu", weights_only=False)["model"]
    assert any(not torch.equal(backbone[n], trained[n]) for n in backbone)  # there was a trained model to refuse
    from sentence_transformers import SentenceTransformer  # ~2 s to import: only where a model is loaded

    shipped = SentenceTransformer(paths["model"], device="cpu").state_dict()
    assert set(shipped) == set(backbone)
    changed = [n for n in backbone if not torch.equal(shipped[n], backbone[n])]
    assert not changed, f"the shipped model is not the backbone: {changed[:3]}"
