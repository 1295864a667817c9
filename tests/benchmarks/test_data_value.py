"""benchmarks/data_value.py chooses on STS-B dev only (issue 62): the untrained backbone is a row of its own, never a
trained row's candidate; STS12 train (the generator's pattern pool) is in no choice and no mean; the budget search
stops where dev stops improving and records its choice (the rule itself: test_data_value_search.py). The trainer and
the evaluation are scripted (a one-parameter "model" whose weight is the step it was saved at), so these take seconds;
test_smoke.py trains for real."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.image import imread

import benchmarks.data_value as data_value
import benchmarks.data_value_selection as selection
from benchmarks.data_value_columns import DEV, MEAN, POOL, SICK, TEST, VS_BACKBONE
from tests.benchmarks.test_smoke import run
from tests.conftest import PROJECT

TRIPLES = PROJECT / "benchmarks" / "data" / "data_value_triples_mainjob.parquet"
PAIRS = PROJECT / "benchmarks" / "data" / "label_pairs_mainjob.parquet"  # stage 3's pairs of the same main job
BACKBONE = {DEV: 90.0, SICK: 80.0, TEST: 85.0, POOL: 50.0}  # the untrained "model" (weight 0)


class Tiny(torch.nn.Module):
    """A backbone of one weight; its "embedding" carries the weight, so the scripted evaluation can read it."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def encode(self, sentences, **kwargs):
        return np.full((len(sentences), 2), float(self.w.detach()))


def named(name: str) -> pd.DataFrame:
    frame = pd.DataFrame({"s1": ["a", "b"], "s2": ["c", "d"], "gold": [1.0, 2.0]})
    frame.attrs["set"] = name
    return frame


@pytest.fixture
def harness(monkeypatch, tmp_path):
    """Scripted data_value: `dev_at(settings, step)` is the trainer's dev record at an evaluation, `held_at(set,
    weight)` a held-out set's score of a trained weight; returns (run(argv…) → (CSV rows, output), calls)."""
    calls = {"train": [], "evaluate": [], "data": []}
    script = {"dev_at": lambda settings, step: 80.0, "held_at": lambda name, w: 70.0}

    def fake_train(model, data, dev, settings, workdir, on_eval=None, **kwargs):
        calls["train"].append(settings)
        calls["data"].append(data)
        for step in range(0, settings.steps + 1, settings.eval_every):
            with torch.no_grad():
                model.w.fill_(step)
            on_eval(None, {"step": step, "dev_spearman": BACKBONE[DEV] if step == 0 else
                           script["dev_at"](settings, step)})
        with torch.no_grad():
            model.w.fill_(0)  # the trainer's own choice, step 0 included: the backbone wins on dev here

    def fake_evaluate(encode, frame):
        name, w = frame.attrs["set"], float(encode(["x"])[0, 0])
        calls["evaluate"].append((name, w))
        return {"spearman": BACKBONE[name] if w == 0 else script["held_at"](name, w)}

    monkeypatch.setattr(selection, "train", fake_train)
    monkeypatch.setattr(selection, "evaluate_frame", fake_evaluate)
    monkeypatch.setattr(data_value, "read_stsb", lambda split: named(DEV))
    monkeypatch.setattr(data_value, "held_out_sets", lambda: {name: named(name) for name in (SICK, TEST, POOL)})
    monkeypatch.setattr(data_value, "load_sentence_transformer", lambda backbone, device: (Tiny(), {"source": "tiny"}))

    def harness_run(capsys, *argv):
        table = tmp_path / "rows.csv"
        out = run(monkeypatch, capsys, "data_value", "--runs", TRIPLES, "--sizes", 4, "--seeds", "13,14",
                  "--batch-size", 4, "--device", "cpu", "--table-out", table, *argv)
        return pd.read_csv(table), out

    return harness_run, calls, script


def test_the_harness_writes_the_untrained_backbones_row(harness, capsys):
    harness_run, _, _ = harness
    rows, _ = harness_run(capsys, "--data", "triples", "--steps", 2)
    backbone = rows[rows["data"] == "backbone"]
    assert len(backbone) == 1 and backbone.index[0] == 0
    first = backbone.iloc[0]
    assert first["best_step"] == 0 and first["anchors"] == 0
    assert {s: first[s] for s in BACKBONE} == BACKBONE and first[MEAN] == (BACKBONE[DEV] + BACKBONE[SICK]) / 2
    assert set(rows["data"]) == {"backbone", "triples"} and len(rows) == 3  # + one row per seed


def test_the_plot_reads_the_backbone_row(harness, capsys, monkeypatch, tmp_path):
    harness_run, _, _ = harness
    harness_run(capsys, "--data", "triples", "--steps", 2)
    run(monkeypatch, capsys, "data_value_plot", "--out", tmp_path / "curves.png", tmp_path / "rows.csv")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_the_plot_draws_sick_trial_from_its_own_column_and_backbone_row(harness, capsys, monkeypatch, tmp_path):
    from benchmarks.data_value_plot import curves, untrained_of

    harness_run, _, _ = harness
    rows, _ = harness_run(capsys, "--data", "triples", "--steps", 2)
    sick = curves(rows, untrained_of(rows, None, SICK), SICK)["triples"]
    trained = rows[rows["data"] == "triples"]
    assert list(sick["mean"]) == [BACKBONE[SICK], trained[SICK].mean()]
    assert untrained_of(rows, "12.5", SICK) == BACKBONE[SICK]  # `=` names STS-B dev's untrained score only
    with pytest.raises(SystemExit, match="SICK trial: a CSV without a `backbone` row"):
        untrained_of(rows[rows["data"] != "backbone"], "86.72", SICK)
    heights = {}
    for metrics in (DEV, f"{DEV},{SICK}"):
        out = tmp_path / f"{len(metrics)}.png"
        run(monkeypatch, capsys, "data_value_plot", "--metrics", metrics, "--out", out, tmp_path / "rows.csv")
        heights[metrics] = imread(out).shape[0]
    assert heights[f"{DEV},{SICK}"] == 2 * heights[DEV]  # a row of panels per metric


@pytest.mark.parametrize("pool_favours", [1, 2])
def test_sts12_train_is_in_no_selection_and_no_mean(harness, capsys, pool_favours):
    """Two trained checkpoints (steps 1 and 2) differ only in STS12 train's score; the backbone (step 0) is better on
    dev than both. The row keeps step 1 (the earlier of a dev tie) whichever the pattern pool favours, lands under
    the backbone, and its mean is that of dev and SICK trial."""
    harness_run, calls, script = harness
    script["dev_at"] = lambda settings, step: 80.0
    script["held_at"] = lambda name, w: (99.0 if w == pool_favours else 10.0) if name == POOL else 70.0
    rows, out = harness_run(capsys, "--data", "triples", "--steps", 2)
    trained = rows[rows["data"] == "triples"]
    assert (trained["best_step"] == 1).all()  # not step 0 (the backbone), and not where the pool points
    assert (trained[POOL] == (99.0 if pool_favours == 1 else 10.0)).all()
    assert (trained[VS_BACKBONE[DEV]] == 80.0 - BACKBONE[DEV]).all()  # a row can be worse than its backbone
    assert (trained[MEAN] == (80.0 + 70.0) / 2).all()
    means = [c for c in rows.columns if "mean" in c.lower()]
    assert means == [MEAN, VS_BACKBONE[MEAN]] and "mean3" not in out
    # the pool is read for the backbone and for each seed's final chosen weights, never for a candidate
    assert sorted(w for name, w in calls["evaluate"] if name == POOL) == [0.0, 1.0, 1.0]


def test_the_harness_searches_every_rows_budget_the_same_way_and_records_it(harness, capsys):
    harness_run, calls, script = harness
    final = {(1, 1e-5): 70.0, (2, 1e-5): 75.0, (4, 1e-5): 74.0, (1, 1e-4): 72.0, (2, 1e-4): 71.0}
    script["dev_at"] = lambda s, step: final.get((s.steps, s.lr), 65.0) if step == s.steps else 60.0
    rows, out = harness_run(capsys, "--data", "simcse,simcse-paper,triples", "--steps", 1, "--search-budget",
                            "--search-max-steps", 4, "--search-lrs", "1e-4,1e-5")
    trained = rows[rows["data"] != "backbone"].set_index("data")
    for kind in ("simcse", "triples"):
        assert (trained.loc[kind, "steps"] == 2).all() and (trained.loc[kind, "lr"] == 1e-5).all()
        assert (trained.loc[kind, "budget"].str.endswith("→ 2@1e-05")).all()
        assert (trained.loc[kind, "search_train_s"] >= trained.loc[kind, "train_s"]).all()
    paper = trained.loc["simcse-paper"]
    assert (paper["steps"] == 1).all() and (paper["lr"] == 3e-5).all() and (paper["batch_size"] == 64).all()
    budgets = [(s.steps, s.lr, s.batch_size) for s in calls["train"]]
    assert budgets.count((1, 3e-5, 64)) == 2  # the paper row: one epoch of 4 anchors, its two seeds, not searched
    assert [s.warmup_steps for s in calls["train"] if s.batch_size == 64] == [0, 0]
    for steps, lr in final:  # five candidates × two seeds, for simcse and for triples alike
        assert budgets.count((steps, lr, 4)) == 4
    assert len(calls["train"]) == 2 * 5 * 2 + 2
    assert sorted(w for name, w in calls["evaluate"] if name == POOL) == [0.0, 1.0, 1.0] + [2.0] * 4


@pytest.fixture
def mining(monkeypatch):
    """A scripted corpus and `mine`: returns the (seed, candidates, miner's weight, num_negatives) of each call; the
    mined triples lack a negative in their first row only."""
    import tasks.corpus.sentences as corpus_module
    import tasks.train.hard_negatives as hard_negatives

    corpus = pd.DataFrame({"doc_id": ["d", "d", "e"], "position": [0, 1, 0], "usable": [True, False, True],
                           "text": ["A usable corpus sentence.", "too short", "Another usable sentence."]})
    monkeypatch.setattr(corpus_module, "load_corpus", lambda settings: type("C", (), {"sentences": corpus}))
    mined = []

    evals = object()  # what the train stage keeps a mined negative clear of: STS-B dev, test and SICK trial
    monkeypatch.setattr(data_value, "mining_evals", lambda: evals)

    def fake_mine(triples, candidates, model, settings, seed, *args, **kwargs):
        assert kwargs.get("evals") is evals
        mined.append((seed, candidates, float(model.w.detach()), settings.num_negatives))
        out = triples.assign(mined_negative_1=[None] + [candidates[0]] * (len(triples) - 1))  # none for the first
        return out, {"with_mined_negatives": len(out) - 1, "triples": len(out), "candidates": len(candidates),
                     "eval_overlap_removed": 2}

    monkeypatch.setattr(hard_negatives, "mine", fake_mine)
    return mined


USABLE = ["A usable corpus sentence.", "Another usable sentence."]


def test_the_mined_row_trains_on_negatives_the_untrained_backbone_mined_per_seed(harness, capsys, mining):
    harness_run, calls, _ = harness
    # as the lever runs it: the mined triples beside the labeled pairs, which must not skip loading the corpus
    rows, out = harness_run(capsys, "--data", "mined+pairs:label", "--pairs", PAIRS, "--steps", 2)
    assert set(rows["data"]) == {"backbone", "mined+pairs:label"}
    assert mining == [(13, USABLE, 0.0, 1), (14, USABLE, 0.0, 1)]  # per seed, by the untrained backbone
    assert [s.losses.negatives for s in calls["train"]] == ["both", "both"]  # InfoNCE reads s⁻ and the mined one
    first = data_value.read_triples([str(TRIPLES)])["anchor"][0]
    for data in calls["data"]:  # the triple without a mined negative is left out, as the train stage leaves it
        assert len(data.triples) == 3 and first not in set(data.triples["anchor"])
        assert (data.triples["mined_negative_1"] == USABLE[0]).all() and len(data.pairs) > 0
    assert (rows.loc[rows["data"] != "backbone", "rows"] == 3 + len(calls["data"][0].pairs)).all()
    assert "3 of 4 triples with a mined negative (from 2 candidates; 2 more left out" in out


def test_a_miner_the_surrogate_mines_and_every_row_still_trains_from_the_backbone(harness, capsys, mining,
                                                                                    monkeypatch, tmp_path):
    import sentence_transformers

    harness_run, calls, _ = harness
    surrogate = tmp_path / "weekly-model"
    surrogate.mkdir()
    (surrogate / "modules.json").write_text("[]")
    loaded = []

    def fake_surrogate(path, **kwargs):  # a trained "model": weight 7
        loaded.append(path)
        model = Tiny()
        with torch.no_grad():
            model.w.fill_(7)
        return model

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", fake_surrogate)
    trained_from = []
    train = selection.train
    monkeypatch.setattr(selection, "train", lambda model, *a, **k: (trained_from.append(float(model.w.detach())),
                                                                    train(model, *a, **k))[1])
    rows, out = harness_run(capsys, "--data", "mined+pairs:label", "--pairs", PAIRS, "--steps", 2,
                            "--miner", surrogate, "--miner-name", "weekly")
    assert loaded == [str(surrogate)]
    assert mining == [(13, USABLE, 7.0, 1), (14, USABLE, 7.0, 1)]  # the surrogate mined, per seed
    assert trained_from == [0.0, 0.0]  # each seed's row starts from the untrained backbone, not the miner
    assert set(rows["data"]) == {"backbone", "mined+pairs:label miner:weekly"}  # a name, never the path
    assert not rows.astype(str).apply(lambda c: c.str.contains(str(tmp_path))).any().any()
    for argv, refusal in ((["--data", "triples", "--miner", surrogate], "only the `mined` variants mine"),
                          (["--data", "mined", "--miner", tmp_path], "no sentence-transformers model there"),
                          (["--data", "mined", "--miner-name", "weekly"], "give the --miner folder too")):
        with pytest.raises(SystemExit, match=refusal):
            harness_run(capsys, *argv)
    assert len(calls["train"]) == 2  # refused before any training


def test_a_named_teacher_folder_labels_the_pairs_and_names_the_rows_without_its_path(harness, capsys,
                                                                                        tiny_encoder_dir):
    from sentence_transformers import SentenceTransformer

    harness_run, calls, _ = harness
    rows, _ = harness_run(capsys, "--data", "triples+pairs:teacher", "--pairs", PAIRS, "--steps", 2,
                          "--teacher", tiny_encoder_dir, "--teacher-name", "weekly-mpnet400")
    assert set(rows["data"]) == {"backbone", "triples+pairs:teacher teacher:weekly-mpnet400"}  # a name, not the path
    pairs = calls["data"][0].pairs
    teacher = SentenceTransformer(str(tiny_encoder_dir), device="cpu")
    e1, e2 = (teacher.encode(pairs[c].tolist(), normalize_embeddings=True) for c in ("s1", "s2"))
    cosines = np.clip((e1 * e2).sum(axis=1), 0, 1)
    assert np.allclose(pairs["label"], cosines, atol=1e-4)  # the folder's cosines, not stage 3's label
    for argv, refusal in ((["--data", "triples+pairs:label", "--teacher-name", "weekly"],
                           "give --data …pairs:teacher"),
                          (["--data", "pairs:teacher", "--teacher", tiny_encoder_dir], "name it with --teacher-name")):
        with pytest.raises(SystemExit, match=refusal):
            harness_run(capsys, *argv, "--pairs", PAIRS)
    assert len(calls["train"]) == 2  # refused before any training
    rows, _ = harness_run(capsys, "--data", "triples+pairs:teacher", "--pairs", PAIRS, "--steps", 2,
                          "--teacher", tiny_encoder_dir, "--teacher-name", "weekly-mpnet400", "--backbone-anchor", 50)
    assert set(rows["data"]) == {"backbone", "triples+pairs:teacher anchor50 teacher:weekly-mpnet400"}  # both said
    assert [s.losses.backbone_anchor for s in calls["train"][2:]] == [50.0, 50.0]  # the anchor trained, per seed


def test_a_mined_frame_adds_a_corpus_sentence_beside_each_generated_negative(tiny_encoder_dir):
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer
    from tests.train.test_training import synthetic_data

    model = load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0]
    triples = synthetic_data()[0]
    others = ["The farmers sold their wheat at the market.", "The orchestra tuned the strings before the concert."]
    sentences = pd.DataFrame({"text": others + list(triples["anchor"]) + ["The river rose again in spring."],
                              "usable": [True] * (len(others) + len(triples)) + [False]})
    frame = data_value.training_frame("mined", triples, 13, sentences, model=model)
    assert list(frame.columns) == data_value.SENTENCE_COLUMNS + ["mined_negative_1"]
    got = frame["mined_negative_1"].dropna()
    assert len(got) > 0  # never an anchor, a triple's own positive, or an unusable sentence:
    assert set(got) <= set(others) | set(triples["positive"]) and not (got == frame.loc[got.index, "positive"]).any()


def test_variants_parse_alone_and_beside_pairs_and_ask_for_their_inputs(harness, capsys):
    base, losses, source = data_value.recipe("pairs:label")  # the pairs alone: no triple data
    assert base is None and losses.regression == 1.0 and losses.infonce == 0.0 and source == "label"
    assert data_value.recipe("hardneg+pairs:rating", "cosent")[0] == "hardneg"
    with pytest.raises(SystemExit, match="SimCSE takes no pairs"):
        data_value.recipe("simcse+pairs:label")
    harness_run, calls, _ = harness
    with pytest.raises(SystemExit, match="need --nli-runs"):  # also where the variant trains beside pairs
        harness_run(capsys, "--data", "hardneg+pairs:label", "--pairs", PAIRS)
    with pytest.raises(SystemExit, match="need --pairs"):
        harness_run(capsys, "--data", "mined+pairs:label")
    with pytest.raises(SystemExit, match="--sizes 28: --runs hold 27 anchors"):  # no row named for more than it has
        harness_run(capsys, "--data", "triples", "--sizes", 28)
    assert calls["train"] == []
