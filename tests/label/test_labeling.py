"""Stage 3: the context scorer's terms against a direct computation, cosine labels, scoring units, and the
label-pairs flow (outputs, quarantine, skip-if-unchanged, resume)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from scipy.stats import spearmanr

from tasks.core.config import ConfigError
from tasks.core.device import resolve_device, resolve_lm_dtype
from tests.conftest import latest_artifacts


@pytest.fixture(scope="session")
def tiny_lm(tiny_lm_dir):
    from models.causal_lm import load_causal_lm

    return load_causal_lm(tiny_lm_dir)


def _direct_mean_logprob(lm, prefix_ids: list[int], segments: list[list[int]], which: int) -> float:
    """Mean log-prob of segment `which` from one plain forward pass with log_softmax over the whole sequence."""
    ids = prefix_ids + [t for s in segments for t in s]
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    start = len(prefix_ids) + sum(len(s) for s in segments[:which])
    target = segments[which]
    return float(sum(logp[start + k - 1, t] for k, t in enumerate(target)) / len(target))


def _unit(sentences, lefts, rights):
    from tasks.label.pair_units import Unit

    return Unit(unit_id="u", sentence_ids=[f"s{i}" for i in range(len(sentences))], sentences=sentences,
                own_contexts=[len(lefts)] * len(sentences), context_ids=list(range(len(lefts))), left=lefts,
                right=rights, pairs=[(0, 1, "pair", {})])


UNIT_TEXTS = (
    ["the river flooded the lower town .", "farmers planted wheat early", "critics praised the strings ."],
    ["residents moved cattle to the hills .", "the council opened a school", "engineers found cracks in an old "
     "stone bridge after rain and the town council opened the school as a shelter"],
    ["the orchestra played a new symphony .", "prices rose in markets", "the river was a shelter ."],
)


def test_lm_terms_match_a_direct_computation(tiny_lm):
    from tasks.label.labeling import LabelSettings, lm_log_probs

    sentences, lefts, rights = UNIT_TEXTS
    units = [_unit(sentences, lefts, rights), _unit(sentences[::-1][:2], lefts[1:], rights[1:])]
    # A small batch budget forces several prefix batches and continuation chunks, with padding in both.
    settings = LabelSettings(lambda_left=1.0, lambda_right=1.0, max_batch_tokens=64, lm="unused")
    enc = lambda texts, keep="start": tiny_lm.encode(texts, settings.max_segment_tokens, keep)  # noqa: E731
    start = tiny_lm.start_ids
    for unit, terms in zip(units, lm_log_probs(tiny_lm, units, settings)):
        assert terms["lm_sentence"].shape == (len(unit.sentences), len(unit.left))
        for j, s in enumerate(unit.sentences):
            for c in range(len(unit.left)):
                left, right = enc([unit.left[c]], "end")[0], enc([" " + unit.right[c]])[0]
                sent, spaced_left = enc([" " + s])[0], enc([" " + unit.left[c]], "end")[0]
                expect_s = _direct_mean_logprob(tiny_lm, start + left, [sent, right], 0)
                expect_r = _direct_mean_logprob(tiny_lm, start + left, [sent, right], 1) - \
                    _direct_mean_logprob(tiny_lm, start + left, [right], 0)
                expect_l = _direct_mean_logprob(tiny_lm, start + enc([s])[0], [right, spaced_left], 1) - \
                    _direct_mean_logprob(tiny_lm, start, [right, spaced_left], 1)
                assert terms["lm_sentence"][j, c] == pytest.approx(expect_s, abs=1e-3)
                assert terms["lm_right"][j, c] == pytest.approx(expect_r, abs=1e-3)
                assert terms["lm_left"][j, c] == pytest.approx(expect_l, abs=1e-3)


def test_right_first_prompt_start_token_and_reference_correction_match_a_direct_computation(tiny_lm):
    """lm_prompt='right_first': [start] c> ⏎ c< then s; λ2 minus the mean over reference sentences per context."""
    from tasks.label.labeling import LabelSettings, lm_log_probs

    sentences, lefts, rights = UNIT_TEXTS
    units = [_unit(sentences, lefts, rights)]
    refs = ["prices rose in markets", "the council opened a school"]
    settings = LabelSettings(lm_prompt="right_first", start_token="</s>", lm_reference_sentences=2,
                             reference_sentences=2, max_batch_tokens=64, lm="unused")
    enc = lambda texts, keep="start": tiny_lm.encode(texts, settings.max_segment_tokens, keep)  # noqa: E731
    start = [tiny_lm.tokenizer.convert_tokens_to_ids("</s>")]
    assert start != tiny_lm.start_ids  # a different token than the BOS default
    terms = lm_log_probs(tiny_lm, units, settings, refs)[0]
    sep = enc(["\n\n"])[0]
    for c in range(len(lefts)):
        prefix = start + enc([rights[c]])[0] + sep + enc([lefts[c]], "end")[0]
        ref_mean = np.mean([_direct_mean_logprob(tiny_lm, prefix, [enc([" " + r])[0]], 0) for r in refs])
        for j, s in enumerate(sentences):
            expect = _direct_mean_logprob(tiny_lm, prefix, [enc([" " + s])[0]], 0) - ref_mean
            assert terms["lm_sentence"][j, c] == pytest.approx(expect, abs=1e-3)
    assert set(terms) == {"lm_sentence", "lm_sentence_baseline"}
    with pytest.raises(ValueError, match="start_token 'nope' is not a token"):
        tiny_lm.start_for("nope")


def test_reference_scorer_matches_a_direct_computation_and_positions_matter(tiny_lm):
    from models.causal_lm import Group, score_groups, score_one

    prefix, segments = tiny_lm.start_ids + [5, 6, 7, 8, 9], [[10, 11], [12, 13, 14]]
    sums, counts = score_one(tiny_lm, prefix, segments)
    assert counts.tolist() == [2, 3]
    for k in range(2):
        expect = _direct_mean_logprob(tiny_lm, prefix, segments, k) * len(segments[k])
        assert sums[k] == pytest.approx(expect, abs=1e-3)
    # The same continuation after a different prefix scores differently: the context is really used.
    moved, _ = score_groups(tiny_lm, [Group(tiny_lm.start_ids + [9, 8], [segments])])[0]
    assert np.abs(moved[0] - sums).max() > 1e-2


def test_terms_with_zero_lambda_are_not_computed(tiny_lm):
    from tasks.label.labeling import LabelSettings, lm_log_probs

    unit = _unit(*UNIT_TEXTS)
    only_s = lm_log_probs(tiny_lm, [unit], LabelSettings(lambda_right=0.0, lm="unused"))[0]
    both = lm_log_probs(tiny_lm, [unit], LabelSettings(lambda_right=1.0, lm="unused"))[0]
    assert set(only_s) == {"lm_sentence"} and {"lm_sentence", "lm_right"} <= set(both)
    # log p(s | c<) does not depend on whether c> is read afterwards.
    assert np.allclose(only_s["lm_sentence"], both["lm_sentence"], atol=1e-5)


def test_truncation_keeps_the_end_of_the_left_context(tiny_lm):
    ids = tiny_lm.encode(["the river flooded the lower town"], 2, keep="end")[0]
    assert tiny_lm.tokenizer.convert_ids_to_tokens(ids) == ["lower", "town"]
    assert tiny_lm.tokenizer.convert_ids_to_tokens(tiny_lm.encode(["the river flooded"], 2)[0]) == ["the", "river"]


def test_disc_term_is_the_log_sigmoid_of_the_coherence_model_minus_the_reference_mean():
    from models.coherence import CoherenceModel, Vocab, encode_texts
    from tasks.contracts import TrainedCoherence
    from tasks.label.labeling import disc_log_probs

    torch.manual_seed(0)
    sentences, lefts, rights = UNIT_TEXTS
    vocab = Vocab.build(sentences + lefts + rights, min_count=1)
    model = CoherenceModel(len(vocab), 8, 8).eval()
    trained = TrainedCoherence(model, vocab, Path("."), {}, "k", True)
    reference = ["prices rose", "the town"]
    got = disc_log_probs(trained, [_unit(sentences, lefts, rights)], reference)[0]

    def full(s, c):
        enc = lambda t: torch.tensor(encode_texts(model, vocab, [t]))  # noqa: E731
        with torch.no_grad():
            return float(torch.nn.functional.logsigmoid(model.logits_from_encodings(
                enc(lefts[c]), enc(s), enc(rights[c]))))

    for j, s in enumerate(sentences):
        for c in range(len(lefts)):
            baseline = np.mean([full(r, c) for r in reference])
            assert got[j, c] == pytest.approx(full(s, c) - baseline, abs=1e-4)


def test_cosine_labels_on_hand_made_vectors():
    from tasks.label.label_similarity import similarity_matrix
    from tasks.label.labeling import combine

    v = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 2.0, 1.0], [5.0, 5.0, 5.0], [1.0, 0.0, 0.0]])
    raw = similarity_matrix(v, "cosine")
    assert raw[0, 1] == pytest.approx(1.0) and raw[0, 2] == pytest.approx(10 / 14)
    assert raw[0, 4] == pytest.approx(1 / np.sqrt(14))
    centred = similarity_matrix(v, "centered_cosine")
    assert centred[0, 1] == pytest.approx(1.0) and centred[0, 2] == pytest.approx(-1.0)
    assert np.isnan(centred[3]).all() and np.isnan(centred[:, 3]).all()  # constant row: undefined, not 0
    assert centred[0, 4] == pytest.approx(np.corrcoef(v[0], v[4])[0, 1])
    s = combine({"disc": np.ones((2, 3)), "lm_right": np.full((2, 3), 2.0)}, {"disc": 0.5, "lm_right": 2.0})
    assert np.allclose(s, 4.5)


def _contexts_frame(rows: dict[str, list[tuple[int, str, str]]]) -> pd.DataFrame:
    from tasks.contracts import sentence_id

    return pd.DataFrame([{"sentence_id": sentence_id(s), "context_id": cid, "left": left, "right": right,
                          "rank": rank} for s, ctx in rows.items() for rank, (cid, left, right) in enumerate(ctx)])


def test_triple_units_pairs_union_and_fallback():
    from tasks.label.pair_units import context_sets, triple_units

    triples = pd.DataFrame({"source_id": ["t1", "t2"], "anchor": ["a one", "a two"],
                            "positive": ["p one", "p two"], "intermediate": ["m one", None],
                            "negative": ["n one", "n two"]})
    ctx = _contexts_frame({"a one": [(1, "l1", "r1"), (2, "l2", "r2"), (9, "l9", "r9")],
                           "p one": [(2, "l2", "r2"), (3, "l3", "r3")], "a two": [(4, "l4", "r4")]})
    broken = pd.DataFrame({"source_id": ["t0"], "anchor": [None], "positive": ["p zero"], "intermediate": [None],
                           "negative": ["n zero"]})
    units, bad = triple_units(pd.concat([broken, triples]), context_sets(ctx, 2), cross_per_triple=1, seed=0)
    assert [(b["triple_id"], b["reason"]) for b in bad] == [("t0", "bad_input")]  # no anchor: quarantined
    first, second = units[0], units[1]
    assert [p[2] for p in first.pairs] == ["anchor-positive", "anchor-intermediate", "anchor-negative",
                                          "positive-intermediate", "positive-negative", "intermediate-negative"]
    assert first.context_ids == [1, 2, 3]  # top-2 of each sentence, union without duplicates, rank order
    assert first.own_contexts == [2, 2, 0, 0]  # m one / n one have none: scored over their partners' contexts
    assert len(second.sentences) == 3 and [p[2] for p in second.pairs] == ["anchor-positive", "anchor-negative",
                                                                          "positive-negative"]
    cross = units[2:]
    assert [p[2] for u in cross for p in u.pairs] == ["cross", "cross"]
    assert cross[0].sentences[0] == "a one" and cross[0].sentences[1] in {"a two", "p two", "n two"}
    assert cross[0].pairs[0][3] == {"triple_id": "t1", "other_triple_id": "t2", "_row": 0}
    assert all("p zero" not in u.sentences for u in units)  # never a cross-pair partner either


def test_units_without_enough_contexts_are_quarantined(tiny_lm):
    from tasks.contracts import sentence_id
    from tasks.label.labeling import LabelSettings, label_units
    from tasks.label.pair_units import make_unit

    settings = LabelSettings(lambda_disc=0.0, similarity="centered_cosine")
    two = {sentence_id("a b"): pd.DataFrame({"context_id": [1, 2], "left": ["the river", "the town"],
                                             "right": ["rain", "hills"]})}
    # Three contexts with identical text: each sentence's vector is constant, so its cosine is undefined.
    same = {sentence_id("a b"): pd.DataFrame({"context_id": [1, 2, 3], "left": ["the river"] * 3,
                                              "right": ["rain"] * 3})}
    units = [make_unit(["a b", "c d"], {}, [(0, 1, "pair", {})]), make_unit(["a b", "c d"], two, [(0, 1, "pair", {})]),
             make_unit(["a b", "c d"], same, [(0, 1, "pair", {})])]
    rows, rejected, counts = label_units(units, settings, None, tiny_lm)
    assert rows == []
    assert [r["reason"] for r in rejected] == ["no_contexts", "too_few_contexts", "degenerate_vector"]
    assert counts["sentence_context_scores"] == 2 * 3  # only the third unit was scored


def test_label_settings_reject_unusable_combinations():
    from pydantic import ValidationError

    from tasks.label.settings import LabelSettings

    with pytest.raises(ValidationError, match="every λ is 0"):
        LabelSettings(lambda_disc=0, lambda_sentence=0)
    with pytest.raises(ValidationError, match="min_contexts must be ≥ 3"):
        LabelSettings(min_contexts=2, similarity="centered_cosine")
    assert LabelSettings(min_contexts=2, similarity="contrast").min_contexts == 2


def test_pairs_file_errors_name_the_file_and_the_fix(tmp_path):
    from tasks.contracts import read_contexts
    from tasks.label.pair_units import read_pairs

    bad = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), bad)
    with pytest.raises(ConfigError, match=r"pairs.parquet needs sentence columns s1/s2 or sentence1/sentence2"):
        read_pairs(bad)
    pq.write_table(pa.table({"sentence1": ["x", " ", None], "sentence2": ["y", "z", "w"], "score": [1.0, 2, 3]}), bad)
    frame, rejected = read_pairs(bad)
    assert frame["s1"].tolist() == ["x"] and frame["gold"].tolist() == [1.0]
    assert [r["reason"] for r in rejected] == ["bad_input", "bad_input"]
    assert "pairs.parquet row 1" in rejected[0]["detail"]
    with pytest.raises(ConfigError, match="lacks the columns .*left.*retrieve-contexts"):
        read_contexts(bad)
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match="junk.parquet is not readable Parquet"):
        read_contexts(tmp_path / "junk.parquet")


# --- the flow -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stage2(prefect_harness, tmp_path_factory):
    """Triples and a contexts.parquet (with its coherence model) from the retrieve-contexts flow — built once for the
    module: the tests only read them (each writes its labels under its own tmp_path)."""
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.core.config import CorpusSettings
    from tasks.retrieve.retrieval import SelectionSettings
    from tasks.retrieve.settings import RetrieveSettings
    from tests.conftest import write_topic_corpus
    from tests.retrieve.test_retrieval import SMALL_MODEL

    tmp_path = tmp_path_factory.mktemp("stage2")
    topic_corpus = write_topic_corpus(tmp_path / "topics")

    triples = pd.DataFrame({
        "source_id": ["t1", "t2", "t3"],
        "anchor": ["The river flooded the lower town.", "The orchestra played the new symphony.",
                   "Farmers planted wheat early."],
        "positive": ["The lower town was flooded by the river.", "The new symphony was played by the orchestra.",
                     "Wheat was planted early by farmers."],
        "intermediate": ["The town was flooded.", "The orchestra played.", "Farmers planted wheat."],
        "negative": ["The river was dry all year.", "The orchestra cancelled the concert.", "Xylophone quorum."],
    })
    path = tmp_path / "triples.parquet"
    pq.write_table(pa.Table.from_pandas(triples, preserve_index=False), path)
    out = retrieve_contexts(sentences=str(path), output_dir=str(tmp_path / "out"), settings=RetrieveSettings(
        corpora=[CorpusSettings(source=str(topic_corpus))], coherence=SMALL_MODEL,
        selection=SelectionSettings(screen_k=50, contexts_per_sentence=3)))
    return path, Path(out["contexts"])


def context_settings(tiny_lm_dir, **fields):
    """The tiny LM's context labels; `fields`: more LabelSettings fields (shard_size, execution)."""
    from tasks.label.settings import LabelSettings

    return LabelSettings(method="context", lm=str(tiny_lm_dir), contexts_per_sentence=3, reference_sentences=4,
                         **fields)


@contextmanager
def label_progress():
    """The (done, total) reports the label stage's progress listeners hear while the block runs."""
    from tasks.core.artifacts import add_progress_listener, remove_progress_listener

    seen = []
    listener = lambda stage, done, total: seen.append((done, total)) if stage == "label" else None  # noqa: E731
    add_progress_listener(listener)
    try:
        yield seen
    finally:
        remove_progress_listener(listener)


def run_label(stage2, tmp_path, tiny_lm_dir, settings=None, **kw):
    """label-pairs on `stage2` with `settings` (default: context_settings); `kw`: more label_pairs arguments."""
    from flows.label_pairs import label_pairs

    triples, contexts = stage2
    settings = context_settings(tiny_lm_dir) if settings is None else settings
    return label_pairs(contexts=str(contexts), triples=str(triples), settings=settings,
                       output_dir=str(tmp_path / "out"), **kw)


def test_progress_counts_the_pairs_each_shard_scored(stage2, tmp_path, tiny_lm_dir):
    """The label stage's progress (the CLI's line, the UI's artifact) advances by the pairs a shard scored, not by
    one per shard: a shard of two triples (6 pairs each) is 12 of the 21 pairs, so the ETA holds from the first
    shard."""
    with label_progress() as seen:
        run_label(stage2, tmp_path, tiny_lm_dir, settings=context_settings(tiny_lm_dir, shard_size=2))
    # units: the 3 triples (6 pairs each), then their 3 cross pairs (1 each), 2 to a shard: 12 + 7 + 2.
    assert seen == [(0, 21), (12, 21), (19, 21), (21, 21)]
    assert latest_artifacts()["label-progress"].data == 100.0


def test_flow_writes_pairs_manifest_and_artifacts(stage2, tmp_path, tiny_lm_dir, caplog):
    from tasks.contracts import PAIRS_SCHEMA, REJECTED_PAIRS_SCHEMA

    paths = run_label(stage2, tmp_path, tiny_lm_dir)
    # the fixture's ranker is the BiLSTM and λ1 the encoder head's default: the run says what to set
    assert any("coherence model scoring λ1 is a BiLSTM" in r.getMessage() for r in caplog.records)
    pairs = pq.read_table(paths["pairs"])
    assert pairs.schema.equals(PAIRS_SCHEMA)
    frame = pairs.to_pandas()
    rejected = pq.read_table(paths["rejected"])
    assert rejected.schema.equals(REJECTED_PAIRS_SCHEMA)
    # 3 triples x 6 pairs + 3 cross pairs, each labeled or quarantined with a reason.
    assert pairs.num_rows + rejected.num_rows == 21 and pairs.num_rows >= 18
    # "Xylophone quorum." has no contexts of its own: its pairs are scored over the partner's contexts (fallback).
    fallback = frame[frame["s2"] == "Xylophone quorum."]
    assert len(fallback) >= 3 and (fallback["n_contexts_s2"] == 0).all() and (fallback["n_contexts"] >= 3).all()
    assert frame["label"].between(-1, 1).all() and (frame["n_contexts"] >= 3).all()
    assert frame["pair_id"].is_unique and not set(frame["pair_id"]) & set(rejected.column("pair_id").to_pylist())
    assert frame[["label_disc", "label_lm_sentence"]].notna().all().all()
    assert frame[["label_lm_left", "label_lm_right"]].isna().all().all()  # λ3 = λ4 = 0: not computed
    assert set(frame["relation"]) >= {"anchor-positive", "anchor-negative", "cross"}
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["lambdas"] == {"disc": 2.0, "lm_sentence": 1.0, "lm_left": 0.0, "lm_right": 0.0}
    assert len(manifest["lm"]["sha256"]) == 64 and len(manifest["coherence_model"]["sha256"]) == 64
    # dtype 'auto' is recorded as the dtype used (bf16 only on a CPU with native bf16), as the key holds it
    used = resolve_lm_dtype("auto", resolve_device("auto"))
    assert manifest["lm"]["dtype"] == manifest["parameters"]["label"]["dtype"] == used != "auto"
    assert manifest["counts"]["pairs"] == pairs.num_rows
    assert manifest["counts"]["sentence_context_scores_this_run"] == manifest["counts"]["sentence_context_scores"] > 0
    assert 0 <= manifest["hierarchy"]["rate"] <= 1 and manifest["hierarchy"]["triples"] >= 1
    quality = manifest["quality"]["hierarchy"]
    assert quality == manifest["hierarchy"] and 0 <= quality["pos_over_neg_rate"] <= 1
    assert quality["pos_over_neg_triples"] >= quality["triples"] and manifest["quality"]["gold"] is None
    assert manifest["labeler"]["method"] == "context" and manifest["labeler"]["similarity"] == "contrast"
    assert set(manifest["outputs"]) == {"pairs.parquet", "rejected.parquet", "label_distribution.png"}
    assert (tmp_path / "out" / "label-pairs" / "label_distribution.png").read_bytes()[:4] == b"\x89PNG"

    artifacts = latest_artifacts()
    assert artifacts["label-distribution"].type == "image"
    assert artifacts["label-distribution"].data.startswith("data:image/png;base64,")
    summary = artifacts["label-summary"].data
    assert f"label(a,s+) > label(a,s-): **{quality['pos_over_neg_rate']:.1%} of " in summary
    assert "hierarchy rate" in summary and "similarity = contrast" in summary
    assert artifacts["label-progress"].data == 100.0

    stamp = Path(paths["pairs"]).stat().st_mtime_ns
    run_label(stage2, tmp_path, tiny_lm_dir)  # unchanged inputs and parameters: skipped
    assert Path(paths["pairs"]).stat().st_mtime_ns == stamp


def test_unchanged_labels_are_reused_across_run_folders_without_rescoring(stage2, tmp_path, tiny_lm_dir):
    first = run_label(stage2, tmp_path, tiny_lm_dir, run="nightly-1")
    second = run_label(stage2, tmp_path, tiny_lm_dir, run="nightly-2")
    assert Path(first["pairs"]).parent.parent.name == "nightly-1" and Path(second["pairs"]).parent.parent.name == \
        "nightly-2"
    assert Path(first["pairs"]).samefile(second["pairs"])  # hard-linked from the first run's committed folder
    assert not (Path(second["pairs"]).parent / ".shards").exists()  # nothing scored: no shard written
    assert os.readlink(tmp_path / "out" / "latest") == "nightly-2"


def test_interrupted_run_scores_only_unfinished_shards(stage2, tmp_path, tiny_lm_dir):
    first = run_label(stage2, tmp_path, tiny_lm_dir, context_settings(tiny_lm_dir, shard_size=1))
    folder = tmp_path / "out" / "label-pairs"
    shards = sorted(folder.glob(".shards/*/*.parquet"))
    assert len(shards) == 6  # 3 triples + 3 cross pairs
    expected = pq.read_table(first["pairs"])
    lost = json.loads(shards[0].with_suffix(".json").read_text())["counts"]["sentence_context_scores"]
    # A run killed before it committed: no manifest, one shard never written.
    (folder / "manifest.json").unlink()
    shards[0].unlink()
    again = run_label(stage2, tmp_path, tiny_lm_dir, context_settings(tiny_lm_dir, shard_size=1))
    counts = json.loads(Path(again["manifest"]).read_text())["counts"]
    assert counts["shards_reused"] == 5 and counts["sentence_context_scores_this_run"] == lost
    assert pq.read_table(again["pairs"]).equals(expected)


def test_pairs_input_with_gold_and_calibration(stage2, tmp_path, tiny_lm_dir):
    from flows.label_pairs import label_pairs
    from tasks.label.settings import LabelSettings

    triples, contexts = stage2
    t = pq.read_table(triples).to_pandas()
    pairs = pd.DataFrame({"sentence1": list(t["anchor"]) * 4, "sentence2": list(t["positive"]) + list(t["negative"])
                          + list(t["intermediate"]) + list(t["anchor"][::-1]),
                          "score": [4.5, 4.8, 4.2, 0.5, 1.0, 0.2, 3.0, 2.5, 3.2, 0.8, 5.0, 0.4]})
    pairs_path = tmp_path / "pairs.parquet"
    pq.write_table(pa.Table.from_pandas(pairs, preserve_index=False), pairs_path)
    settings = LabelSettings(method="context", lm=str(tiny_lm_dir), contexts_per_sentence=3, reference_sentences=4,
                             similarity="centered_cosine")  # labels that vary on the tiny corpus (calibration)
    first = label_pairs(contexts=str(contexts), pairs=str(pairs_path), settings=settings,
                        output_dir=str(tmp_path / "dev"))
    labeled = pq.read_table(first["pairs"]).to_pandas()
    assert labeled["gold"].notna().all() and labeled["label_calibrated"].isna().all()
    assert set(labeled["relation"]) == {"pair"}
    assert len(labeled) >= 10  # enough to fit the calibration below
    # The label–gold Spearman is in the manifest and the summary, computed on the written rows.
    both = labeled[["label", "gold"]].dropna()
    expected = round(100 * float(spearmanr(both["label"], both["gold"]).statistic), 2)
    quality = json.loads(Path(first["manifest"]).read_text())["quality"]["gold"]
    assert quality == {"pairs": len(both), "spearman": expected}
    summary = latest_artifacts()["label-summary"].data
    assert f"**{expected:.1f}** on {len(both)} pairs with gold" in summary
    second = label_pairs(contexts=str(contexts), pairs=str(pairs_path),
                         settings=settings.model_copy(update={"calibration": first["pairs"]}),
                         output_dir=str(tmp_path / "cal"))
    cal = pq.read_table(second["pairs"]).to_pandas()
    assert cal["label_calibrated"].between(0, 5).all()
    order = np.argsort(cal["label"].to_numpy())
    assert np.all(np.diff(cal["label_calibrated"].to_numpy()[order]) >= -1e-12)  # monotone in the label
    manifest = json.loads(Path(second["manifest"]).read_text())
    assert manifest["calibration"]["method"] == "isotonic" and manifest["calibration"]["pairs"] == len(labeled)


def test_flow_rejects_ambiguous_inputs(stage2, tmp_path, tiny_lm_dir):
    from flows.label_pairs import label_pairs

    triples, contexts = stage2
    with pytest.raises(ConfigError, match="exactly one of triples= .* or pairs="):
        label_pairs(contexts=str(contexts), triples=str(triples), pairs=str(triples))


def test_cli_label_runs_and_reports_bad_input(stage2, tmp_path, tiny_lm_dir, capsys):
    from flows.cli import main

    triples, contexts = stage2
    args = ["label", "--label-method", "context", "--contexts", str(contexts), "--lm", str(tiny_lm_dir),
            "--contexts-scored", "3", "--candidates", "4",
            "--output-dir", str(tmp_path / "cli")]
    assert main(args + ["--triples", str(triples)]) == 0
    assert "pairs" in capsys.readouterr().out and (tmp_path / "cli" / "latest" / "label-pairs" / "pairs.parquet").is_file()
    manifest = json.loads((tmp_path / "cli" / "latest" / "label-pairs" / "manifest.json").read_text())
    assert manifest["parameters"]["label"]["candidates_per_sentence"] == 4  # the flag reaches the settings the run records
    # Fewer candidates than contexts to choose: refused naming both fields, nothing written.
    few = args[:-1] + [str(tmp_path / "cli-few")]
    few[few.index("4")] = "2"
    assert main(few + ["--triples", str(triples)]) == 2
    assert "candidates_per_sentence (2) < contexts_per_sentence" in capsys.readouterr().err
    assert not (tmp_path / "cli-few").exists()
    assert main(args + ["--pairs", str(tmp_path / "missing.parquet")]) == 2
    assert "missing.parquet does not exist" in capsys.readouterr().err
    # k ≤ 0 from the command line: one clear line naming the field, no traceback, nothing written.
    bad = [a if a != "3" else "0" for a in args]
    bad[bad.index(str(tmp_path / "cli"))] = str(tmp_path / "cli-bad")
    assert main(bad + ["--triples", str(triples)]) == 2
    err = capsys.readouterr().err
    assert "contexts_per_sentence = 0" in err and "Traceback" not in err and not (tmp_path / "cli-bad").exists()
    # An unknown similarity function: refused by the command line before any work, nothing written.
    with pytest.raises(SystemExit) as exit_info:
        main(args[:-2] + ["--output-dir", str(tmp_path / "cli-dot"), "--similarity", "dot", "--triples", str(triples)])
    assert exit_info.value.code == 2 and "invalid choice: 'dot'" in capsys.readouterr().err
    assert not (tmp_path / "cli-dot").exists()


@pytest.mark.slow
def test_flow_on_a_loopback_dask_cluster_matches_threads(stage2, tmp_path, tiny_lm_dir):
    from distributed import LocalCluster

    from tasks.core.runners import ExecutionSettings

    threads = pq.read_table(run_label(stage2, tmp_path / "t", tiny_lm_dir,
                                      context_settings(tiny_lm_dir, shard_size=1))["pairs"]).to_pandas()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        dask = ExecutionSettings(dask_address=cluster.scheduler_address)
        paths = run_label(stage2, tmp_path / "d", tiny_lm_dir, context_settings(tiny_lm_dir, shard_size=1,
                                                                                execution=dask))
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["parameters"]["workers"] == "dask" and manifest["counts"]["shards_reused"] == 0
    dask = pq.read_table(paths["pairs"]).to_pandas()
    labels = [c for c in dask.columns if c.startswith("label") or c == "context_label"]
    assert dask.drop(columns=labels).equals(threads.drop(columns=labels))
    assert np.allclose(dask[labels].fillna(9), threads[labels].fillna(9), atol=1e-5)


# --- the LLM rating labeler (real HTTP against the scripted OpenAI-compatible server) -------------------------------

def _overlap_rating(messages, body):
    """Top log-probs of a rater that likes shared words: P(digit) peaks at round(5 · word overlap)."""
    user = messages[-1]["content"]
    s1, s2 = (line.split(": ", 1)[1] for line in user.splitlines())
    w1, w2 = set(s1.lower().strip(".").split()), set(s2.lower().strip(".").split())
    target = 5 * len(w1 & w2) / max(len(w1 | w2), 1)
    weights = {d: np.exp(-((d - target) ** 2)) for d in range(6)}
    total = sum(weights.values())
    return sorted(((str(d), float(np.log(w / total))) for d, w in weights.items()), key=lambda x: -x[1])


@pytest.fixture
def rater():
    from tasks.llm.scripted_server import ScriptedOpenAI

    with ScriptedOpenAI(models=("rater",), responder=lambda m, b: "3", logprobs=_overlap_rating) as server:
        yield server


def test_combined_labels_mix_rating_and_context_labels_and_quarantine_failed_calls(
        stage2, tmp_path, tiny_lm_dir, rater):
    from tasks.core.config import LLMSettings
    from tasks.label.settings import LabelSettings

    llm = LLMSettings(base_url=rater.base_url, model="rater", max_retries=0, max_concurrency=1,
                      cache_path=str(tmp_path / "cache.sqlite"))
    settings = LabelSettings(lm=str(tiny_lm_dir), contexts_per_sentence=3, reference_sentences=4,
                             method="combined", rating_weight=0.6, tfidf_weight=0.15, similarity="contrast")
    rater.push(("status", 400, {}), "ok", ("status", 400, {}))  # two calls fail for good (a 400 is not retried)
    with label_progress() as seen:
        first = run_label(stage2, tmp_path, tiny_lm_dir, settings=settings, llm=llm)
    assert seen[1] == (21, 42) and seen[-1] == (42, 42)  # the one shard's 21 pairs scored, then each pair rated
    pairs = pq.read_table(first["pairs"]).to_pandas()
    rejected = pq.read_table(first["rejected"]).to_pandas()
    failed = rejected[rejected["reason"] == "llm_error"]
    assert len(failed) == 2 and failed["detail"].str.contains("http_400").all()
    expected = [_expected_rating(s1, s2) for s1, s2 in zip(pairs["s1"], pairs["s2"])]
    assert pairs["rating"].to_numpy() == pytest.approx(expected, abs=1e-9)
    from tests.label.test_tfidf import tfidf_reference

    assert pairs["tfidf_cosine"].to_numpy() == pytest.approx(tfidf_reference(list(pairs["s1"]), list(pairs["s2"])),
                                                             abs=1e-9)
    assert pairs["label"].to_numpy() == pytest.approx(
        0.6 * pairs["rating"] / 5 + 0.15 * pairs["tfidf_cosine"] + 0.25 * pairs["context_label"], abs=1e-12)
    assert pairs["context_label"].between(0, 1).all()  # the contrast label is on 0–1 already
    assert pairs["tfidf_cosine"].between(0, 1 + 1e-9).all() and pairs["tfidf_cosine"].nunique() > 1
    manifest = json.loads(Path(first["manifest"]).read_text())
    assert manifest["labeler"]["method"] == "combined" and manifest["labeler"]["rating_weight"] == 0.6
    assert manifest["labeler"]["tfidf_weight"] == 0.15 and manifest["labeler"]["context_weight"] == 0.25
    assert manifest["rating"]["model"] == "rater" and manifest["rating"]["failed"] == 2
    assert manifest["rating"]["from_logprobs"] == len(pairs)  # every answered call came with log-probs
    assert manifest["counts"]["rejected_by_reason"] == {"llm_error": 2}
    summary = latest_artifacts()["label-summary"].data
    assert "labeler: method = combined" in summary
    # Each label column's hierarchy rate in the summary (the rating, the context label and their mix).
    assert all(f"| {column} | " in summary for column in ("rating", "context_label", "tfidf_cosine", "label"))
    assert set(manifest["quality"]["columns"]) == {"rating", "context_label", "tfidf_cosine", "label"}

    # The re-run sends exactly the two failed requests again; every answered one comes from the cache.
    sent = len(rater.chat_requests())
    second = run_label(stage2, tmp_path, tiny_lm_dir, settings=settings.model_copy(update={"rating_weight": 0.5}),
                       llm=llm)
    assert len(rater.chat_requests()) - sent == 2
    again = pq.read_table(second["pairs"]).to_pandas()
    assert len(again) == len(pairs) + 2 and json.loads(Path(second["manifest"]).read_text())["counts"][
        "shards_reused"] == json.loads(Path(second["manifest"]).read_text())["counts"]["shards"]


def test_rating_reports_progress_while_it_runs_and_keeps_the_input_order(tmp_path):
    """Progress is told as pairs finish (several reports, not one at the end), from outside the event loop, while
    every request runs at the client's full concurrency; ratings come back in input order."""
    import threading

    from tasks.core.config import LLMSettings
    from tasks.label.llm_rating import RatingSettings, rate_pairs
    from tasks.llm.scripted_server import ScriptedOpenAI

    heard = threading.Event()  # set by the first report

    def responder(messages, body):  # the digit is the pair's number mod 6: order is checkable
        number = int(messages[-1]["content"].split("pair")[1].split()[0])
        if number >= 12:  # the second half is answered only once a report was heard: it cannot be the only one
            heard.wait(timeout=60)
        return str(number % 6)

    pairs = [(f"pair{i} left", f"pair{i} right") for i in range(24)]
    reports, loop_threads = [], set()
    on_rated = lambda n: (reports.append(n), loop_threads.add(threading.current_thread()), heard.set())  # noqa: E731
    with ScriptedOpenAI(models=("rater",), responder=responder) as server:
        llm = LLMSettings(base_url=server.base_url, model="rater", max_concurrency=4, cache_path="off")
        ratings, stats = rate_pairs(pairs, llm, RatingSettings(top_logprobs=0), on_rated=on_rated,
                                    report_every_s=0.05)
    assert [r.digit for r in ratings] == [i % 6 for i in range(24)]
    assert sum(reports) == 24 and len(reports) >= 2 and reports[0] <= 12, reports  # told while it ran
    assert threading.main_thread() not in loop_threads  # told from a worker thread, not the event loop's
    assert stats["requests_sent"] == 24


def test_a_slow_progress_listener_still_hears_every_pair(tmp_path):
    """Pairs that finish while `on_rated` is still running (a slow artifact update) are told in a later report,
    and the ones that finish during the last report are told before `rate_pairs` returns: the counts add up."""
    import time

    from tasks.core.config import LLMSettings
    from tasks.label.llm_rating import RatingSettings, rate_pairs
    from tasks.llm.scripted_server import ScriptedOpenAI

    reports = []
    on_rated = lambda n: (reports.append(n), time.sleep(0.25))  # noqa: E731  slower than one request
    with ScriptedOpenAI(models=("rater",), responder=lambda messages, body: "3", latency_s=0.05) as server:
        llm = LLMSettings(base_url=server.base_url, model="rater", max_concurrency=4, cache_path="off")
        ratings, _ = rate_pairs([(f"a{i}", f"b{i}") for i in range(40)], llm, RatingSettings(top_logprobs=0),
                                on_rated=on_rated, report_every_s=0.02)
    assert len(ratings) == 40 and sum(reports) == 40, reports


def _expected_rating(s1, s2):
    lp = _overlap_rating([{"content": f"Sentence 1: {s1}\nSentence 2: {s2}"}], {})
    return sum(int(d) * np.exp(p) for d, p in lp) / sum(np.exp(p) for _, p in lp)


def test_llm_rating_method_needs_no_contexts_and_fails_fast_on_a_bad_endpoint(stage2, tmp_path, tiny_lm_dir,
                                                                               rater):
    from tasks.core.config import LLMSettings
    from tasks.label.settings import LabelSettings

    llm = LLMSettings(base_url=rater.base_url, model="rater", cache_path="off")
    settings = LabelSettings(lm="not-a-model", method="llm_rating")  # the LM is never loaded
    with label_progress() as seen:
        paths = run_label(stage2, tmp_path, tiny_lm_dir, settings=settings, llm=llm)
    pairs = pq.read_table(paths["pairs"]).to_pandas()
    assert len(pairs) == 21 and pairs["context_label"].isna().all()  # every pair, with or without contexts
    # Progress counts the rated pairs (the CLI's progress line and the UI's progress artifact): 0 → 21 of 21.
    assert seen[0] == (0, 21) and seen[-1] == (21, 21) and latest_artifacts()["label-progress"].data == 100.0
    assert pairs["label"].to_numpy() == pytest.approx(pairs["rating"].to_numpy() / 5)
    manifest = json.loads(Path(paths["manifest"]).read_text())
    assert manifest["counts"]["sentence_context_scores"] == 0
    assert [i["role"] for i in manifest["inputs"]] == ["triples"]  # contexts are not an input of the rating
    with pytest.raises(ConfigError, match="does not serve the model 'other'|model 'other'"):
        run_label(stage2, tmp_path / "bad", tiny_lm_dir, settings=settings, llm=llm.model_copy(update={"model": "other"}))
    assert not (tmp_path / "bad" / "out" / "label-pairs").exists()


def test_the_teacher_as_the_ratings_partner_fills_teacher_cosine_and_a_missing_one_fails_first(
        stage2, tmp_path, tiny_lm_dir, tiny_encoder_dir, rater):
    """label.teacher_weight > 0: the pairs carry the teacher's cosine and the label mixes it in; the manifest names
    the teacher by content; a teacher that is not there fails before any scoring, nothing written."""
    from sentence_transformers import SentenceTransformer

    from tasks.core.config import LLMSettings
    from tasks.label.settings import LabelSettings

    llm = LLMSettings(base_url=rater.base_url, model="rater", max_retries=0, max_concurrency=1,
                      cache_path=str(tmp_path / "cache.sqlite"))
    settings = LabelSettings(lm=str(tiny_lm_dir), contexts_per_sentence=3, reference_sentences=4, method="combined",
                             rating_weight=0.5, tfidf_weight=0.0, teacher_weight=0.5, teacher=str(tiny_encoder_dir),
                             similarity="contrast")
    missing = settings.model_copy(update={"teacher": str(tmp_path / "no-teacher")})
    with pytest.raises(ConfigError, match="no-teacher' does not exist.*label.teacher"):
        run_label(stage2, tmp_path, tiny_lm_dir, settings=missing, llm=llm)
    assert not (tmp_path / "out" / "label-pairs").exists() and not rater.chat_requests()

    first = run_label(stage2, tmp_path, tiny_lm_dir, settings=settings, llm=llm)
    pairs = pq.read_table(first["pairs"]).to_pandas()
    model = SentenceTransformer(str(tiny_encoder_dir))
    a, b = (model.encode(pairs[c].tolist(), normalize_embeddings=True) for c in ("s1", "s2"))
    assert pairs["teacher_cosine"].to_numpy() == pytest.approx(np.clip((a * b).sum(axis=1), 0, 1), abs=1e-5)
    assert pairs["teacher_cosine"].nunique() > 1
    assert pairs["label"].to_numpy() == pytest.approx(0.5 * pairs["rating"] / 5 + 0.5 * pairs["teacher_cosine"],
                                                      abs=1e-12)  # tfidf_weight 0 and the context label's rest 0
    manifest = json.loads(Path(first["manifest"]).read_text())
    assert manifest["labeler"]["teacher_weight"] == 0.5 and manifest["labeler"]["context_weight"] == 0
    assert len(manifest["teacher"]["sha256"]) == 64  # the teacher's folder name, never its local path
    assert manifest["teacher"]["teacher"] == tiny_encoder_dir.name and str(tiny_encoder_dir.parent) not in json.dumps(
        manifest["teacher"])
    assert "teacher_cosine" in manifest["quality"]["columns"]

    # Without the teacher (the default) the column is empty and the label is the earlier 0.7/0.3 rating + TF-IDF;
    # the shards are the same (the mix is applied after scoring) and nothing is rescored.
    plain = run_label(stage2, tmp_path, tiny_lm_dir, llm=llm, settings=settings.model_copy(
        update={"rating_weight": 0.7, "tfidf_weight": 0.3, "teacher_weight": 0.0}))
    again = pq.read_table(plain["pairs"]).to_pandas()
    assert again["teacher_cosine"].isna().all()
    assert again["label"].to_numpy() == pytest.approx(0.7 * again["rating"] / 5 + 0.3 * again["tfidf_cosine"])
    counts = json.loads(Path(plain["manifest"]).read_text())["counts"]
    assert counts["shards_reused"] == counts["shards"]


def test_bad_labeler_settings_fail_before_anything_is_written(stage2, tmp_path, tiny_lm_dir, tiny_encoder_dir):
    from pydantic import ValidationError

    from tasks.label.settings import LabelSettings

    with pytest.raises(ValidationError, match="contexts_per_sentence"):
        LabelSettings(contexts_per_sentence=0)
    with pytest.raises(ValidationError, match="similarity"):
        LabelSettings(similarity="dot")
    # The same through the flow's parameters (a deployment run passes a dict): refused before anything is written.
    with pytest.raises(Exception, match="similarity"):
        run_label(stage2, tmp_path, tiny_lm_dir, settings={"method": "context", "similarity": "dot"})
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="right_first"):
        LabelSettings(lm_prompt="right_first", lambda_right=1.0)
    # A folder that holds a model, but not a causal LM (an encoder): one clear error, nothing written.
    encoder = LabelSettings(method="context", lm=str(tiny_encoder_dir), contexts_per_sentence=3)
    with pytest.raises(ConfigError, match="cannot be loaded as a causal LM.*not a causal LM .*BertModel"):
        run_label(stage2, tmp_path, tiny_lm_dir, settings=encoder)
    assert not (tmp_path / "out" / "label-pairs").exists()


def test_scoring_endpoint_without_prompt_logprobs_fails_before_any_shard(stage2, tmp_path, tiny_lm_dir, scripted):
    from tasks.label.settings import LabelSettings

    served = LabelSettings(method="context", lm=str(tiny_lm_dir), contexts_per_sentence=3, lambda_disc=0.0,
                           lm_endpoint={"base_url": scripted.base_url, "model": "scripted-model"})
    with pytest.raises(ConfigError, match=f"{scripted.base_url}.*returns no prompt log-probs"):
        run_label(stage2, tmp_path, tiny_lm_dir, settings=served)
    assert not (tmp_path / "out" / "label-pairs").exists()


def test_eq3_selection_keeps_each_sentences_best_fitting_contexts():
    """context_selection='score' (Sun et al. 2022, Eq. 3): among a sentence's own candidates, the k with the highest
    S(s, c); the label reads the union of the chosen sets. 'rank' keeps the stage-2 sets as they are."""
    from tasks.label.labeling import LabelSettings, select_contexts

    scores = np.array([[0.1, 0.9, 0.5, 0.3, 0.0, 0.2],
                       [0.8, 0.0, 0.1, 0.0, 0.7, 0.6]])
    own = np.array([[1, 1, 1, 1, 0, 0],
                    [0, 0, 0, 1, 1, 1]], dtype=bool)
    chosen, keep = select_contexts(scores, own, LabelSettings(contexts_per_sentence=2, candidates_per_sentence=4))
    assert keep.tolist() == [1, 2, 4, 5]  # sentence 0: columns 1 and 2 (0.9, 0.5); sentence 1: 4 and 5 (0.7, 0.6)
    assert chosen.tolist() == [[True, True, False, False], [False, False, True, True]]
    same, all_columns = select_contexts(scores, own, LabelSettings(context_selection="rank",
                                                                   contexts_per_sentence=4))
    assert (same == own).all() and all_columns.tolist() == list(range(6))
    with pytest.raises(ValueError, match="candidates_per_sentence"):
        LabelSettings(contexts_per_sentence=8, candidates_per_sentence=4)


def test_each_label_column_gets_its_own_hierarchy_and_gold_agreement():
    from tasks.label.label_quality import label_columns_quality

    rows = []
    for t in range(12):  # rating orders a+ > am > a- every time; the context label reverses it on 4 triples
        for rel, r, c in (("anchor-positive", 4.5, 0.9), ("anchor-intermediate", 3.0, 0.5), ("anchor-negative", 1.0, 0.1)):
            flip = t < 4 and rel != "anchor-intermediate"
            rows.append({"triple_id": f"t{t}", "relation": rel, "rating": r, "context_label": 1 - c if flip else c,
                         "label": r / 5, "gold": r + 0.01 * t})
    quality = label_columns_quality(pd.DataFrame(rows))
    assert quality["rating"]["hierarchy"]["rate"] == 1.0
    assert quality["context_label"]["hierarchy"]["rate"] == pytest.approx(8 / 12)
    assert quality["rating"]["gold"]["spearman"] > quality["context_label"]["gold"]["spearman"]
    without = label_columns_quality(pd.DataFrame(rows).assign(context_label=None))
    assert set(without) == {"rating", "label"}  # a column with no values is not reported


def test_label_weights_are_checked_and_a_zero_weight_part_is_left_out():
    import numpy as np
    from pydantic import ValidationError

    from tasks.label.labeling import LabelSettings, final_label

    with pytest.raises(ValidationError, match="must be at most 1"):
        LabelSettings(rating_weight=0.8, tfidf_weight=0.3)
    with pytest.raises(ValidationError, match="teacher_weight \\(0.5\\) must be at most 1"):
        LabelSettings(teacher_weight=0.5)
    from tasks.core.config import key_fields

    # The teacher's fields enter the key only when it is mixed in (earlier runs keep their keys), its folder never.
    assert not {"teacher", "teacher_weight"} & set(key_fields(LabelSettings()))
    with_teacher = key_fields(LabelSettings(rating_weight=0.5, tfidf_weight=0.0, teacher_weight=0.5, teacher="/x/t"))
    assert with_teacher["teacher_weight"] == 0.5 and "teacher" not in with_teacher
    default = LabelSettings()
    # the context label mixed in at 0.2 with λ1 2 (chosen on STS-B dev A with the encoder ranker; docs/results.md)
    assert default.context_weight == pytest.approx(0.2) and default.lambda_disc == 2.0
    label = final_label(np.array([0.5, 0.9]), np.array([2.5, 5.0]), default, np.array([0.0, 1.0]))
    assert label.tolist() == pytest.approx([0.6 * 0.5 + 0.2 * 0.5, 0.6 + 0.2 + 0.2 * 0.9])
    without = LabelSettings(rating_weight=0.7, tfidf_weight=0.3)
    label = final_label(np.array([np.nan, 0.5]), np.array([5.0, 2.5]), without, np.array([1.0, 0.0]))
    assert label.tolist() == pytest.approx([0.7 + 0.3, 0.35])  # a missing context label does not make it NaN
    mixed = final_label(np.array([0.9]), np.array([0.0]), LabelSettings(rating_weight=0.5, tfidf_weight=0.2,
                                                                        similarity="contrast"), np.array([0.5]))
    assert mixed.tolist() == pytest.approx([0.1 + 0.3 * 0.9])


def test_the_encoder_heads_defaults_over_a_bilstm_are_named_with_the_bilstms_settings():
    from tasks.label.settings import LabelSettings, ranker_note

    bilstm = {"settings": {"encoder": "bilstm"}}  # a BiLSTM's manifest names no frozen encoder
    head = {"encoder": {"source": "all-minilm-l6-v2", "sha256": "x", "dim": 384}}
    note = ranker_note(LabelSettings(), bilstm)
    assert note is not None and "label.lambda_disc = 0.25" in note and "BiLSTM" in note
    assert "lambda_disc = 2.0" in note and "weight 0.2" in note
    assert ranker_note(LabelSettings(), head) is None
    # λ1 set by hand with the mix still the head's: the mix is named; the BiLSTM's own settings: nothing to say
    only_mix = ranker_note(LabelSettings(lambda_disc=0.25), bilstm)
    assert only_mix is not None and "weight 0.2" in only_mix and "lambda_disc = 0.25 and" not in only_mix
    assert ranker_note(LabelSettings(lambda_disc=0.25, rating_weight=0.7, tfidf_weight=0.3), bilstm) is None
