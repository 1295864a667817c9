"""Hard negatives mined from a corpus for InfoNCE: never the triple's own anchor or positive, as extra negative
columns in the order the loss reads them, and one clear error for a corpus too small to mine from."""

from __future__ import annotations

import pytest

from tasks.core.config import ConfigError
from tasks.core.decontamination import EvalSentences
from tasks.train.hard_negatives import MiningSettings, candidate_sentences, mine, mined_columns
from tasks.train.trainer import infonce_columns, training_datasets
from tasks.train.training import LossSettings, TrainSettings, split_data
from tests.conftest import TOPICS
from tests.train.test_training import synthetic_data


@pytest.fixture(scope="module")
def tiny_model(tiny_encoder_dir):
    from tasks.train.backbones import BackboneSettings, load_sentence_transformer

    return load_sentence_transformer(BackboneSettings(source=str(tiny_encoder_dir)))[0]


def test_mined_negatives_are_corpus_sentences_never_the_anchor_or_positive(tiny_model):
    triples, _, _ = synthetic_data()
    corpus = [s for topic in TOPICS.values() for s in topic] + list(triples["positive"]) + [
        "The farmers sold their wheat at the market.", "The river rose again in spring.",
        "The orchestra tuned the strings before the concert."] * 2  # duplicates count once
    assert set(candidate_sentences(corpus, triples, 100, 0)).isdisjoint(set(triples["anchor"]) |
                                                                       set(triples["positive"]))
    out, counts = mine(triples, corpus, tiny_model, MiningSettings(num_negatives=2, relative_margin=0.0,
                                                                   range_max=3), seed=0)
    cols = mined_columns(out)
    assert cols == ["mined_negative_1", "mined_negative_2"] and len(out) == len(triples)
    assert counts["candidates"] == 3 and counts["with_mined_negatives"] + counts["without"] == len(triples)
    assert counts["with_mined_negatives"] > 0
    allowed = {"The farmers sold their wheat at the market.", "The river rose again in spring.",
               "The orchestra tuned the strings before the concert."} | set(triples["positive"])  # others' positives
    for col in cols:
        got = out[col].dropna()
        assert set(got) <= allowed and not set(got) & set(triples["anchor"])
        assert not (got == out.loc[got.index, "positive"]).any()
    both = out[cols].notna().all(axis=1)
    assert (out.loc[both, cols[0]] != out.loc[both, cols[1]]).all()
    held = triples.iloc[:2]  # held-out triples' sentences are never candidates either
    again, _ = mine(triples.iloc[2:], corpus + list(held["anchor"]), tiny_model,
                    MiningSettings(num_negatives=1, relative_margin=0.0, range_max=3), seed=0, exclude=held)
    assert not set(again["mined_negative_1"].dropna()) & set(held["anchor"])
    # An evaluation sentence, or one holding it, is never a candidate (nor, so, a negative); the manifest counts them.
    evals = EvalSentences(["dev:0:s1", "dev:1:s1"], ["The river rose again in spring.", "The farmers sold their wheat."],
                          [])
    clean, counts = mine(triples, corpus, tiny_model, MiningSettings(num_negatives=1, relative_margin=0.0,
                                                                     range_max=3), seed=0, evals=evals)
    negatives = set(clean["mined_negative_1"].dropna())
    assert counts["eval_overlap_removed"] == 2 and counts["candidates"] == 1 and negatives
    assert not negatives & {"The river rose again in spring.", "The farmers sold their wheat at the market."}
    with pytest.raises(ConfigError, match="at least 2 sentences besides the triples' own"):
        mine(triples, list(triples["anchor"]) + ["only one other sentence."], tiny_model,
             MiningSettings(num_negatives=2), seed=0)


def test_mined_columns_feed_infonce_in_the_chosen_combination():
    triples, pairs, _ = synthetic_data()
    triples = triples.assign(mined_negative_1=[f"m{i}" for i in range(len(triples))], mined_negative_2="x")
    triples.loc[0, "mined_negative_2"] = None  # too few candidates passed: left out when mined negatives are used
    data = split_data(triples, pairs, 0.0, 0)
    mined = ["mined_negative_1", "mined_negative_2"]
    for negatives, columns, infonce in (
            ("generated", [], ["anchor", "positive", "negative"]),
            ("mined", mined, ["anchor", "positive", *mined]),
            ("both", mined, ["anchor", "positive", "negative", *mined])):
        sets = training_datasets(data, LossSettings(negatives=negatives))
        cols = sets["hierarchical"].column_names
        assert cols == ["anchor", "positive", "negative", "intermediate", *columns]  # mined ones only when used
        assert len(sets["hierarchical"]) == len(triples) - (negatives != "generated")
        assert [cols[i] for i in infonce_columns(LossSettings(negatives=negatives), len(cols), 4)] == infonce
    with pytest.raises(ValueError, match="mined negatives are used only with"):
        TrainSettings(losses=LossSettings(negatives="both"))
    with pytest.raises(ValueError, match="mined negatives are used only with"):
        TrainSettings(mining=MiningSettings(num_negatives=2))  # mined but never used
    TrainSettings(losses=LossSettings(negatives="both"), mining=MiningSettings(num_negatives=2))


def test_mining_keeps_clear_of_stsb_test_and_the_eval_sets_and_its_checkpoints_are_keyed_by_them():
    from tasks.core.decontamination import collect_eval_sentences
    from tasks.train.stage import TrainJob, mining_eval_sets

    assert mining_eval_sets(TrainSettings()) == ["stsb-dev", "stsb-test"]  # test too, though not evaluated
    assert mining_eval_sets(TrainSettings(eval_sets=["my_sts", "stsb-test"])) == ["stsb-dev", "stsb-test", "my_sts"]

    def train_key(eval_sources: list[str], mining_sources: list[str] | None) -> str:
        evals = None if mining_sources is None else collect_eval_sentences(mining_sources)
        return TrainJob(TrainSettings(), None, [], None if evals is None else [], {"sha256": "b"}, "cpu", eval_sources,
                        evals).train_key

    assert train_key(["stsb-dev"], None) == train_key(["stsb-dev", "stsb-test"], None)  # reported only: no retraining
    assert train_key(["stsb-dev"], ["stsb-dev"]) != train_key(["stsb-dev"], ["stsb-dev", "stsb-test"])
