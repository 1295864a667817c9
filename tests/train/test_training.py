"""Stage 4 on SentenceTransformerTrainer with tiny random backbones: the objective's datasets, best-on-dev selection
with the backbone as a candidate, resume after a kill, the flow's outputs and model card, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tasks.core.config import ConfigError, CorpusSettings
from tasks.train.hard_negatives import MiningSettings
from tasks.train.trainer import check_training_data, train, training_datasets
from tasks.train.training import LossSettings, TrainSettings, split_data
from tests.conftest import TOPICS, latest_artifacts, latest_run_logs, write_tiny_corpus


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
def tiny_st(tiny_encoder_dir):
    """A fresh SentenceTransformer (tiny random BERT, mean pooling) per call, as the flow builds it."""
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    return lambda **kw: load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir), **kw))[0]


SETTINGS = TrainSettings(steps=6, batch_size=4, lr=1e-3, warmup_steps=1, eval_every=3, heldout_fraction=0.2,
                         losses=LossSettings(regression=1.0))

CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import pandas as pd
from transformers import TrainerCallback
from tasks.train.backbones import BackboneSettings, load_sentence_transformer
from tasks.train.trainer import train
from tasks.train.training import TrainSettings, split_data
from tests.train.test_training import synthetic_data

class StallAfterStep4(TrainerCallback):  # the parent kills the process here, between checkpoints (3 and 6)
    def on_step_end(self, args, state, control, **kw):
        if state.global_step == 4:
            Path({flag!r}).write_text("4")
            time.sleep(600)

settings = TrainSettings.model_validate_json({settings!r})
triples, pairs, dev = synthetic_data()
data = split_data(triples, pairs, settings.heldout_fraction, settings.seed)
model = load_sentence_transformer(BackboneSettings(source={source!r}))[0]
train(model, data, dev, settings, Path({workdir!r}), callbacks=[StallAfterStep4()])
"""


def test_trainer_resumes_after_a_kill_like_an_uninterrupted_run(tiny_st, tiny_encoder_dir, tmp_path):
    """A training process SIGKILLed after step 4 (checkpoint at 3) and started again ends like an uninterrupted run:
    same step count, the same evaluations and best step, the same weights. Tolerance 1e-5: the resumed run replays
    the same batches (the sampler's seed and position) and dropout masks (the saved RNG state) from the same
    optimizer and scheduler state; what may differ is float rounding of threaded CPU kernels (~1e-7 relative)."""
    import signal
    import subprocess
    import sys
    import time

    triples, pairs, dev = synthetic_data()
    data = split_data(triples, pairs, SETTINGS.heldout_fraction, SETTINGS.seed)
    full = tiny_st()
    state = train(full, data, dev, SETTINGS, tmp_path / "a")
    assert state.step == 6 and [r["step"] for r in state.history if "dev_spearman" in r] == [0, 3, 6]
    assert {"align_heldout", "uniform_heldout", "align_dev", "uniform_dev"} <= set(state.history[-1])
    for part in ("infonce", "ht_intermediate_negative", "regression"):  # each part of the objective is logged
        assert any(r.get(part, 0) > 0 for r in state.history), part
    assert (tmp_path / "a" / "best.pt").is_file() and state.best_step in (0, 3, 6)

    flag = tmp_path / "at-step-4"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(
        root=str(Path(__file__).resolve().parents[2]), flag=str(flag), settings=SETTINGS.model_dump_json(),
        source=str(tiny_encoder_dir), workdir=str(tmp_path / "b"))])
    deadline = time.time() + 300
    while not flag.exists() and child.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert flag.exists(), "the training process never reached step 4"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert [p.name for p in (tmp_path / "b" / "checkpoints").glob("checkpoint-*")] == ["checkpoint-3"]
    resumed_model = tiny_st()  # a fresh process's model: the weights come from the checkpoint
    resumed = train(resumed_model, data, dev, SETTINGS, tmp_path / "b")
    assert resumed.step == 6 and resumed.best_step == state.best_step
    assert resumed.best_dev == pytest.approx(state.best_dev, abs=1e-5)
    evals = lambda h: {r["step"]: r["dev_spearman"] for r in h if "dev_spearman" in r}  # noqa: E731
    assert list(evals(resumed.history)) == [0, 3, 6]
    assert list(evals(resumed.history).values()) == pytest.approx(list(evals(state.history).values()), abs=1e-5)
    losses = lambda h: [r["loss"] for r in h if "loss" in r]  # noqa: E731
    assert len(losses(resumed.history)) == 6 and losses(resumed.history) == pytest.approx(losses(state.history),
                                                                                          abs=1e-5)
    for (name, p), q in zip(full.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.allclose(p, q, atol=1e-5), name
    # Started again once finished (a later failure, new evaluation sets): no extra step, the best weights back; a
    # checkpoint folder a kill left half-written is passed over.
    (tmp_path / "b" / "checkpoints" / "checkpoint-9").mkdir()
    (tmp_path / "b" / "checkpoints" / "checkpoint-9" / "optimizer.pt").write_bytes(b"partial")
    again_model = tiny_st()
    again = train(again_model, data, dev, SETTINGS, tmp_path / "b")
    assert again.step == 6 and again.best_step == state.best_step and len(evals(again.history)) == 3
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").glob("checkpoint-*")) == ["checkpoint-6",
                                                                                             "checkpoint-9"]
    for (name, p), q in zip(resumed_model.state_dict().items(), again_model.state_dict().values()):
        assert torch.equal(p, q), name


def _selection_run(tiny_st, workdir: Path, dev_agrees: bool):
    """Regression that pulls each anchor towards its negative (which shares fewer words than its positive). A dev set
    whose gold agrees with that (negatives close) is helped by training; one whose gold follows word overlap (where
    the untrained mean-pooled model already scores high) is only hurt."""
    triples, _, _ = synthetic_data()
    s2 = list(triples["positive"]) + list(triples["negative"])
    negative = np.r_[np.zeros(len(triples)), np.ones(len(triples))]
    pairs = pd.DataFrame({"s1": list(triples["anchor"]) * 2, "s2": s2, "label": negative})
    dev = pd.DataFrame({"s1": pairs["s1"], "s2": s2, "gold": 4.5 * (negative if dev_agrees else 1 - negative)})
    data = split_data(triples, pairs, 0.0, 0)
    model = tiny_st()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = TrainSettings(steps=24, batch_size=12, lr=5e-3, warmup_steps=1, eval_every=8, heldout_fraction=0.0,
                             losses=LossSettings(infonce=0.0, hierarchical_triplet=0.0, regression=1.0))
    state = train(model, data, dev, settings, workdir)
    best = torch.load(workdir / "best.pt", map_location="cpu", weights_only=False)["model"]  # beside `before`
    return state, before, best


def test_trainer_with_cosent_and_the_cached_infonce(tiny_st, tmp_path):
    """The alternatives of the default losses train through the same trainer: CoSENTLoss for the regression and
    CachedMultipleNegativesRankingLoss (gradient cache, bounded memory) for InfoNCE inside the weighted sum."""
    from sentence_transformers.sentence_transformer import losses as st_losses

    from tasks.train.trainer import training_losses

    triples, pairs, dev = synthetic_data()
    losses = LossSettings(regression=1.0, regression_loss="cosent", infonce_mini_batch=2)
    settings = SETTINGS.model_copy(update={"steps": 3, "losses": losses})
    data = split_data(triples, pairs.assign(label=np.linspace(-0.5, 0.9, len(pairs))), settings.heldout_fraction,
                      settings.seed)
    model = tiny_st()
    built = training_losses(model, losses, training_datasets(data, losses))
    assert isinstance(built["pairs"].losses["regression"], st_losses.CoSENTLoss)
    assert isinstance(built["hierarchical"].losses["infonce"], st_losses.CachedMultipleNegativesRankingLoss)
    assert built["hierarchical"].losses["infonce"].mini_batch_size == 2
    state = train(model, data, dev, settings, tmp_path / "cached")
    assert state.step == 3  # every part ran and was logged (the best-on-dev weights may still be step 0's)
    assert any(r.get("infonce", 0) > 0 for r in state.history) and any(r.get("regression", 0) > 0
                                                                        for r in state.history)


def test_bf16_training_leaves_a_float32_model_that_encodes_as_its_export(tiny_st, tmp_path):
    """precision='bfloat16' trains under autocast (accelerate wraps forward); afterwards the model must encode in
    float32 — what the guard compares and the exported model does — not under a wrapper left behind."""
    from sentence_transformers import SentenceTransformer

    from tasks.train.model_export import export_model

    triples, pairs, dev = synthetic_data()
    settings = SETTINGS.model_copy(update={"steps": 3, "precision": "bfloat16", "lr": 3e-2})
    data = split_data(triples, pairs, settings.heldout_fraction, settings.seed)
    model = tiny_st()
    train(model, data, dev, settings, tmp_path / "bf16")
    assert "_original_forward" not in model.__dict__  # no autocast wrapper left on forward
    assert all(p.dtype == torch.float32 for p in model.parameters())
    trained = model.encode(SENTENCES)
    loaded = SentenceTransformer(str(export_model(model, tmp_path / "model")), device="cpu")
    assert np.allclose(loaded.encode(SENTENCES), trained, atol=1e-5)


def test_backbone_anchor_keeps_the_trained_embeddings_nearer_the_backbone(tiny_st, tmp_path):
    triples, pairs, dev = synthetic_data()
    sentences = sorted(set(triples["anchor"]) | set(triples["positive"]) | set(triples["negative"]))
    start = tiny_st().encode(sentences, convert_to_tensor=True).cpu()  # on a GPU the trained model encodes there
    drift = {}
    for weight in (0.0, 20.0):
        settings = SETTINGS.model_copy(update={"losses": LossSettings(regression=1.0, backbone_anchor=weight),
                                               "eval_every": 100, "lr": 3e-3})  # compared: the last step's weights
        model = tiny_st()
        train(model, split_data(triples, pairs, 0.0, 1), dev, settings, tmp_path / f"w{weight}")
        model.load_state_dict(torch.load(tmp_path / f"w{weight}" / "checkpoints" / "checkpoint-6" / "model_state.pt"))
        after = model.encode(sentences, convert_to_tensor=True).cpu()
        drift[weight] = float((1 - torch.nn.functional.cosine_similarity(after, start)).mean())
    assert drift[0.0] > 0.01, drift  # training moved the space ...
    assert drift[20.0] < 0.5 * drift[0.0], drift  # ... and the anchor held it nearer the backbone


def test_selection_keeps_the_backbone_when_training_only_hurts(tiny_st, tmp_path):
    hurt, before, best = _selection_run(tiny_st, tmp_path / "hurt", dev_agrees=False)
    scores = {r["step"]: r["dev_spearman"] for r in hurt.history if "dev_spearman" in r}
    # Margins of 10 Spearman points (the scores move by ~130: 86.6 → −86.1), far beyond what float summation order
    # at another thread count can move.
    assert list(scores) == [0, 8, 16, 24] and max(scores[8], scores[16], scores[24]) < scores[0] - 10
    assert hurt.best_step == 0 and hurt.best_dev == scores[0]
    for name, value in before.items():  # best.pt holds the untrained weights
        assert torch.equal(best[name], value), name

    helped, _, best = _selection_run(tiny_st, tmp_path / "help", dev_agrees=True)
    scores = {r["step"]: r["dev_spearman"] for r in helped.history if "dev_spearman" in r}
    assert helped.best_step > 0 and helped.best_dev == max(scores.values()) > scores[0] + 10
    assert any(not torch.equal(best[name], value) for name, value in before.items())


def test_final_guard_on_full_dev_and_the_printed_comparison(tmp_path, capsys):
    """The second selection step (full STS-B dev, after a subsampled training-time split) and what the main job
    prints from eval.json: backbone and surrogate per set, and which model shipped."""
    import json

    from flows.cli.console import print_outputs
    from tasks.train.surrogate_selection import keeps_backbone

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
        print_outputs({"train-surrogate": {"eval": str(eval_json)}})
        out = capsys.readouterr().out
        dev = results["stsb-dev"]["spearman"]
        assert f"| stsb-dev | 1500 | 86.72 | {dev:.2f} | {dev - 86.72:+.2f} |" in out and expected in out
        assert "| stsb-test | 1379 | 82.03 |" in out


def test_sts_b_test_is_evaluated_only_when_asked_for():
    from tasks.train.stage import evaluation_sets

    assert evaluation_sets(TrainSettings()) == ["stsb-dev"]  # the main job and every scheduled run: dev only
    asked = TrainSettings(eval_sets=["stsb-test", "stsb-dev", "SICK_trial.txt", "stsb-test"])
    assert evaluation_sets(asked) == ["stsb-dev", "stsb-test", "SICK_trial.txt"]


def test_held_out_triples_never_reach_training():
    triples, pairs, _ = synthetic_data()
    cross = pd.DataFrame({"s1": ["x"], "s2": ["y"], "label": [0.0], "triple_id": ["river0"],
                          "other_triple_id": [triples["source_id"].iloc[-1]]})
    data = split_data(triples, pd.concat([pairs.assign(other_triple_id=None), cross]), 0.3, seed=1)
    held = set(data.heldout["source_id"])
    assert len(held) == round(0.3 * len(triples)) and not held & set(data.triples["source_id"])
    assert not held & set(data.pairs["triple_id"]) and not held & set(data.pairs["other_triple_id"].dropna())


def test_datasets_follow_the_loss_weights_and_bad_data_fails_clearly():
    triples, pairs, _ = synthetic_data()
    data = split_data(triples.assign(intermediate=[None] * 3 + list(triples["intermediate"][3:])), pairs, 0.0, 13)
    sets = training_datasets(data, LossSettings(regression=1.0))
    assert sets["hierarchical"].column_names == ["anchor", "positive", "negative", "intermediate"]
    assert (len(sets["hierarchical"]), len(sets["contrastive"]), len(sets["pairs"])) == (len(triples) - 3, 3,
                                                                                        len(pairs))
    assert sets["pairs"].column_names == ["sentence1", "sentence2", "score"]
    assert list(training_datasets(data, LossSettings(hierarchical_triplet=0.0))) == ["contrastive"]
    simcse = training_datasets(data, LossSettings(simcse=True, regression=1.0))
    assert list(simcse) == ["simcse"] and simcse["simcse"]["anchor"] == simcse["simcse"]["positive"]
    empty = split_data(triples.iloc[:0], pairs.iloc[:0], 0.0, 13)
    with pytest.raises(ConfigError, match="No loss term has both data"):
        training_datasets(empty, LossSettings())
    with pytest.raises(ConfigError, match=r"lack column\(s\) intermediate.*hierarchical_triplet"):
        check_training_data(split_data(triples.drop(columns="intermediate"), pairs, 0.0, 1), LossSettings(), "t.pq")
    check_training_data(split_data(triples.drop(columns="intermediate"), pairs, 0.0, 1),
                        LossSettings(hierarchical_triplet=0.0), "t.pq")  # InfoNCE alone needs no intermediate
    with pytest.raises(ConfigError, match=r"1 label\(s\) outside \[-1, 1\] \(first: row 2, 4\.5\)"):
        check_training_data(split_data(triples, pairs.assign(label=[0.9, 0.9, 4.5] + [0.9] * (len(pairs) - 3)),
                                       0.0, 1), LossSettings(regression=1.0), "t.pq")


def test_bad_training_input_fails_before_anything_is_written(prefect_harness, tiny_encoder_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flows.train_surrogate import train_surrogate
    from tasks.train.backbones import BackboneSettings

    triples, pairs, _ = synthetic_data()
    pq.write_table(pa.Table.from_pandas(triples.drop(columns="intermediate"), preserve_index=False),
                   tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / "pairs.parquet")
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir))})
    with pytest.raises(ConfigError, match="triples.parquet: the triples lack column"):
        train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),
                        settings=settings, output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    # Labels outside [-1, 1] (a 0–5 gold column passed as labels) with the regression on: refused, nothing written.
    pq.write_table(pa.Table.from_pandas(pairs.assign(label=5.0 * pairs["label"].abs()), preserve_index=False),
                   tmp_path / "pairs-0-5.parquet")
    regression = settings.model_copy(update={"losses": LossSettings(regression=1.0)})
    with pytest.raises(ConfigError, match=r"pairs-0-5.parquet.*outside \[-1, 1\]"):
        train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs-0-5.parquet"),
                        settings=regression, output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    # Label sources: a teacher folder that is missing or no sentence encoder, pairs without the chosen column.
    (tmp_path / "no-encoder").mkdir()
    (tmp_path / "no-encoder" / "config.json").write_text("{}")
    for update, message in (({"teacher": str(tmp_path / "missing")}, "missing' does not exist"),
                            ({"teacher": str(tmp_path / "no-encoder")}, "is not a sentence encoder"),
                            ({"label_source": "rating"}, "pairs.parquet: label_source 'rating' needs a 'rating'")):
        recipe = regression.model_copy(update={"label_source": update.get("label_source", "teacher"), **update})
        with pytest.raises(ConfigError, match=message):
            train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),
                            settings=recipe, output_dir=str(tmp_path / "out"))
        assert not (tmp_path / "out").exists()
    (tmp_path / "empty-corpus").mkdir()
    (tmp_path / "empty-corpus" / "doc.txt").write_text("\n")
    empty = CorpusSettings(source=str(tmp_path / "empty-corpus"))
    mining = settings.model_copy(update={"mining": MiningSettings(num_negatives=2, corpus=empty),
                                         "losses": LossSettings(regression=1.0, negatives="both")})
    with pytest.raises(ConfigError, match="yielded no sentences"):
        train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),
                        settings=mining, output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_flow_trains_evaluates_and_exports(prefect_harness, tiny_encoder_dir, tmp_path, run_logs_at_info, capfd):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer

    from flows.train_surrogate import train_surrogate
    from tasks.core.store import sha256_path
    from tasks.train.backbones import BackboneSettings

    triples, pairs, _ = synthetic_data()
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / "pairs.parquet")
    # Mining on (LLM negatives + mined ones): the corpus is an input of the manifest but no dataset row of the card.
    corpus = write_tiny_corpus(tmp_path)
    (corpus / "d.txt").write_text("A man is feeding a mouse to a snake.")  # an STS-B dev sentence: never a mined negative
    mining = MiningSettings(num_negatives=1, relative_margin=0.0, corpus=CorpusSettings(source=str(corpus)))
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir)),
                                           "dev_pairs": 50, "mining": mining, "eval_sets": ["stsb-test"],
                                           "losses": LossSettings(regression=1.0, negatives="both"),
                                           "wise_alpha": 0.5})
    run = lambda: train_surrogate(triples=str(tmp_path / "triples.parquet"), pairs=str(tmp_path / "pairs.parquet"),  # noqa: E731
                                  settings=settings, output_dir=str(tmp_path / "out"))
    paths = run()
    printed = capfd.readouterr()
    assert "'loss'" not in printed.out + printed.err  # no trainer log record on the console (the history has them)
    report = json.loads(Path(paths["eval"]).read_text())
    assert set(report["results"]) == {"stsb-dev", "stsb-test"}
    assert report["results"]["stsb-dev"]["pairs"] == 1500 and report["results"]["stsb-test"]["pairs"] == 1379
    assert {"rfd_a", "rfd_u"} <= set(report) and [h["step"] for h in report["history"]] == [0, 3, 6]
    # The backbone is evaluated on the same sets, and the shipped model is never below it on STS-B dev.
    assert set(report["backbone_results"]) == {"stsb-dev", "stsb-test"} and report["shipped_step"] in (0, 3, 6)
    assert report["results"]["stsb-dev"]["spearman"] >= report["backbone_results"]["stsb-dev"]["spearman"]
    model = SentenceTransformer(paths["model"], device="cpu")
    assert model.encode(["the river flooded ."]).shape == (1, 32)
    card = (Path(paths["model"]) / "README.md").read_text()  # sentence-transformers' card + stsgen's provenance
    triples_sha = sha256_path(tmp_path / "triples.parquet")
    assert "library_name: sentence-transformers" in card and "loss:WeightedSumLoss" in card
    assert f"stsgen triples (sha256 {triples_sha[:16]})" in card  # the training data, by content
    assert "## stsgen provenance" in card and triples_sha in card and "no human similarity labels" in card
    assert f"shipped: step {report['shipped_step']}" in card
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["counts"]["steps"] == 6 and "model/model.safetensors" in manifest["outputs"]
    mined = manifest["counts"]["mined_negatives"]
    assert mined["per_triple"] == 1 and mined["with_mined_negatives"] > 0 and mined["candidates"] > 0
    assert mined["eval_overlap_removed"] == 1  # the dev sentence, kept out of the candidates
    assert {i["role"] for i in manifest["inputs"]} == {"triples", "pairs", "mining corpus"}
    assert "mining corpus" not in card.split("## stsgen provenance")[0]  # the card's datasets: the tables only
    assert manifest["device"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")  # device "auto"

    artifacts = latest_artifacts()
    assert artifacts["train-curves"].type == "image" and artifacts["train-rfd"].type == "image"
    history = json.loads(artifacts["train-loss-history"].data)  # every step's loss and its parts, in the UI
    assert [r["step"] for r in history] == [1, 2, 3, 4, 5, 6] and all(r["loss"] > 0 for r in history)
    assert float(artifacts["train-progress"].data) == 100.0
    rows = json.loads(artifacts["train-results"].data)
    assert {r["set"] for r in rows} == {"stsb-dev", "stsb-test"}
    for row in rows:
        assert row["backbone"] == pytest.approx(report["backbone_results"][row["set"]]["spearman"])
        assert row["spearman"] == pytest.approx(report["results"][row["set"]]["spearman"])
    assert manifest["selection"]["shipped_step"] == report["shipped_step"]
    # WiSE-FT: the best checkpoint (best.pt) averaged with the backbone, judged on the full STS-B dev. This tiny
    # random encoder's mix lands within ±0.05 of its backbone there (18.54 against 18.56 at two torch threads on
    # an AMX Xeon, above it at one; CI's machine below it), so float summation order decides which branch runs:
    # each branch is checked whole, the weights included.
    from tasks.train.backbones import load_sentence_transformer

    start = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0].state_dict()
    best = torch.load(next((tmp_path / "out").rglob("best.pt")), map_location="cpu", weights_only=False)["model"]
    turned_down = report["checkpoint_turned_down"]
    midpoint = {n: (start[n] + best[n]) / 2 if start[n].is_floating_point() else start[n] for n in start}  # α 0.5
    if report["best_step"] == 0:  # no trained checkpoint beat step 0 on dev (seen on an H100, bf16): nothing to mix
        assert turned_down is None and report["shipped_step"] == 0 and report["wise_alpha"] is None
        assert all(torch.equal(start[n], best[n]) for n in start)  # best.pt holds the untrained weights
        expected = start
    elif report["shipped_step"]:  # the mix shipped, and the card says so
        assert manifest["selection"]["wise_alpha"] == 0.5 and report["wise_alpha"] == 0.5 and turned_down is None
        assert "interpolated with the backbone at alpha 0.5 (WiSE-FT)" in card
        expected = midpoint
    else:  # the guard turned the mix down: the backbone's own weights shipped, the mix's scores kept
        assert report["best_step"] > 0 and turned_down["step"] == report["best_step"]
        assert turned_down["wise_alpha"] == 0.5 and report["wise_alpha"] is None
        assert turned_down["stsb-dev"] < report["backbone_results"]["stsb-dev"]["spearman"]
        assert "interpolated with the backbone at alpha 0.5 scored" in artifacts["train-summary"].data
        assert not all(torch.equal(start[n], best[n]) for n in start)  # a trained checkpoint was there to refuse
        # The score refused is the mix's own (not the bare checkpoint's): a broken interpolation fails here.
        from tasks.core.sts_evaluation import evaluate_sources

        def dev_score(weights) -> float:
            encoder = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0].to("cpu")
            encoder.load_state_dict(weights)
            return evaluate_sources(lambda s: encoder.encode(s, convert_to_numpy=True), ["stsb-dev"])["stsb-dev"][
                "spearman"]

        # This random encoder's dev cosines nearly tie: the mix re-encoded here (batch, ulp-level arithmetic of the
        # average) moves its Spearman by up to 0.02 (18.54 in the flow, 18.56 here), so 0.03 of slack; and the refused
        # score is nearer the mix's than the bare checkpoint's wherever those two can be told apart (≥ 0.06).
        refused, mixed, bare = turned_down["stsb-dev"], dev_score(midpoint), dev_score(best)
        assert abs(refused - mixed) <= 0.03 and (abs(mixed - bare) < 0.06 or abs(refused - mixed) < abs(refused - bare))
        expected = start
    for name, value in model.state_dict().items():
        if value.is_floating_point():
            assert torch.allclose(value, expected[name], atol=1e-6), name
    assert ("the shipped model is the backbone" in artifacts["train-summary"].data) == (report["shipped_step"] == 0)
    # The flow's log (the UI's Logs tab) holds the stage's summary, and nothing a library printed: datasets' table
    # fingerprinting makes dill disassemble a function into a captured stdout, which `log_prints` used to forward.
    logs = latest_run_logs("train-surrogate")
    assert any("| stsb-dev | 1500 |" in m for m in logs) and any(m.startswith("step 3: STS-B dev") for m in logs), logs
    assert not [m for m in logs if "LOAD_GLOBAL" in m or "RETURN_VALUE" in m]
    stamp = Path(paths["manifest"]).stat().st_mtime_ns
    run()  # unchanged: reused
    assert Path(paths["manifest"]).stat().st_mtime_ns == stamp


def test_bellm_with_lora_trains_on_the_same_trainer_and_exports_a_plain_merged_model(tiny_lm_dir, tmp_path):
    """The decoder backbone (BeLLM module) through the same trainer with peft adapters: only adapters train, the
    trainer's state-dict checkpoints hold them, they are merged on export, and the folder loads with
    sentence-transformers (stsgen's module, trusted) giving the trained model's embeddings."""
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    from models.lora import merge_lora
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer
    from tasks.train.model_export import export_model

    triples, pairs, dev = synthetic_data()
    data = split_data(triples, pairs, 0.2, 13)
    settings = SETTINGS.model_copy(update={
        "backbone": BackboneSettings(kind="bellm", source=str(tiny_lm_dir), lora_rank=2), "losses": LossSettings()})
    model, info = load_sentence_transformer(settings.backbone)
    before = {k: v.clone() for k, v in model.state_dict().items() if "lora" not in k}
    state = train(model, data, dev, settings, tmp_path / "work")
    assert state.step == 6 and info["lora"]["layers"] == 4
    assert (tmp_path / "work" / "checkpoints" / "checkpoint-6" / "model_state.pt").is_file()
    assert all(torch.equal(v, model.state_dict()[k].cpu()) for k, v in before.items())  # base weights frozen
    trained = model.encode(SENTENCES)
    assert merge_lora(model) == 4
    folder = export_model(model, tmp_path / "model")
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert not any("lora" in k for k in f.keys())
    loaded = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    assert np.allclose(loaded.encode(SENTENCES), trained, atol=1e-5)


SENTENCES = ["the river flooded the town .", "farmers planted wheat in the valley ."]


def test_cli_eval_on_model_folders(tiny_encoder_dir, tiny_lm_dir, tmp_path, capsys):
    """`stsgen eval` on a plain transformers folder and on a BeLLM export (stsgen's own module, trusted); tiny models:
    the protocol, not the scores, is under test (the main job reports all-MiniLM-L6-v2's)."""
    import json

    from flows.cli import main
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer
    from tasks.train.model_export import export_model

    sick = tmp_path / "SICK_trial.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\tA man is running.\tA man runs.\t4.9\tENTAILMENT\n2\tA dog sleeps.\tA stock market fell.\t1.0\t"
                    "NEUTRAL\n3\tA cat eats fish.\tA cat is eating.\t3.9\tNEUTRAL\n")
    bellm = export_model(load_sentence_transformer(BackboneSettings(kind="bellm", source=str(tiny_lm_dir)))[0],
                         tmp_path / "bellm")
    for folder in (tiny_encoder_dir, bellm):
        out_json = tmp_path / f"{folder.name}.json"
        assert main(["eval", str(folder), "--eval-set", str(sick), "--json", str(out_json)]) == 0
        assert "| stsb-test | 1379 |" in capsys.readouterr().out
        results = json.loads(out_json.read_text())
        assert results["stsb-dev"]["pairs"] == 1500 and results[str(sick)]["pairs"] == 3
        assert all(-100 <= r["spearman"] <= 100 for r in results.values())
    assert main(["eval", str(tmp_path)]) == 2 and "not a model folder" in capsys.readouterr().err


def test_the_pairs_of_held_out_triples_stay_out_of_training_when_read_from_a_file(tiny_encoder_dir, tmp_path):
    """prepare_training reads pairs.parquet through its declared columns: the triple ids must be among them, or
    split_data could not drop the pairs of the held-out triples (they would train and leak into held-out metrics)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.train.backbones import BackboneSettings
    from tasks.train.stage import prepare_training

    triples, pairs, _ = synthetic_data()
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), tmp_path / "triples.parquet")
    pq.write_table(pa.Table.from_pandas(pairs.assign(other_triple_id=None), preserve_index=False),
                   tmp_path / "pairs.parquet")
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir))})
    job = prepare_training(str(tmp_path / "triples.parquet"), str(tmp_path / "pairs.parquet"), settings)
    held = set(job.data.heldout["source_id"])
    assert held and not set(job.data.pairs["triple_id"]) & held
    assert len(job.data.pairs) == len(pairs) - len(held)  # one pair per triple here: the held-out ones removed


def test_lr_auto_follows_the_training_anchors_and_keys_the_number_used(tiny_encoder_dir, tmp_path):
    """`lr = "auto"` (sts-pipeline's default) resolves once the data is read: the gentle rate for a first run's few
    triples, the larger one past LARGE_FROM_ANCHORS; the stage key holds the number, so 'auto' on a small dataset
    reuses a training keyed with that number, and a grown dataset trains with the larger rate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.train.backbones import BackboneSettings
    from tasks.train.learning_rate import LARGE_DATA_LR, LARGE_FROM_ANCHORS, SMALL_DATA_LR, resolve_lr
    from tasks.train.stage import prepare_training

    assert resolve_lr(2e-5, 10_000) == 2e-5  # a number is kept whatever the size
    assert resolve_lr("auto", LARGE_FROM_ANCHORS - 1) == SMALL_DATA_LR < LARGE_DATA_LR == resolve_lr(
        "auto", LARGE_FROM_ANCHORS)
    triples, pairs, _ = synthetic_data()
    copies = -(-2 * LARGE_FROM_ANCHORS // len(triples))  # distinct anchors past the switch after the 20 % held out
    grown = pd.concat([triples.assign(source_id=triples["source_id"] + f"-{k}", anchor=triples["anchor"] + f" ({k})")
                       for k in range(copies)], ignore_index=True)
    settings = SETTINGS.model_copy(update={"backbone": BackboneSettings(source=str(tiny_encoder_dir)), "lr": "auto"})
    jobs = {}
    for name, frame in (("small", triples), ("grown", grown)):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / f"{name}.parquet")
        pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), tmp_path / f"{name}-pairs.parquet")
        jobs[name] = prepare_training(str(tmp_path / f"{name}.parquet"), str(tmp_path / f"{name}-pairs.parquet"),
                                      settings)
    assert jobs["small"].settings.lr == SMALL_DATA_LR and len(jobs["small"].data.triples) < LARGE_FROM_ANCHORS
    assert jobs["grown"].settings.lr == LARGE_DATA_LR and len(jobs["grown"].data.triples) >= LARGE_FROM_ANCHORS
    pinned = prepare_training(str(tmp_path / "small.parquet"), str(tmp_path / "small-pairs.parquet"),
                              settings.model_copy(update={"lr": SMALL_DATA_LR}))
    assert pinned.train_key == jobs["small"].train_key  # 'auto' is not in the key: the number is
    assert TrainSettings.model_validate({"lr": "auto"}).lr == "auto"
    with pytest.raises(ValueError, match="positive number or 'auto'"):
        TrainSettings.model_validate({"lr": 0})
