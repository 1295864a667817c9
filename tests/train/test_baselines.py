"""The data-value baselines (tasks/train/baselines.py) build their rows from the same anchors as the triples: SimCSE
pairs each anchor with itself, corpus neighbours with the next (or previous) sentence of its document and a negative
from another document."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.core.config import ConfigError
from tasks.train.baselines import (
    anchor_corpus,
    ensure_dropout,
    neighbour_rows,
    same_anchor_rows,
    simcse_rows,
    with_extra_negative,
)
from tasks.train.trainer import training_datasets
from tasks.train.training import LossSettings, TrainingData

SENTENCES = pd.DataFrame({
    "doc_id": ["a", "a", "a", "b", "b", "c", "d"],
    "position": [0, 1, 2, 0, 1, 0, 0],
    "text": ["A zero.", "A one.", "A two.", "B zero.", "B one.", "C alone.", "- list debris"],
    "usable": [True, True, True, True, True, True, False],
})
TRIPLES = pd.DataFrame({
    "anchor": ["A zero.", "A two.", "B one.", "C alone.", "Elsewhere."],
    "doc_id": ["a", "a", "b", "c", "x"],
    "position": [0, 2, 1, 0, 0],
    "positive": ["p"] * 5, "intermediate": ["m"] * 5, "negative": ["n"] * 5,
})


def test_simcse_rows_are_each_anchor_against_itself():
    rows = simcse_rows(TRIPLES)
    assert rows["anchor"].tolist() == TRIPLES["anchor"].tolist() == rows["positive"].tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_neighbour_rows_take_the_next_sentence_and_a_negative_of_another_document(seed):
    rows = neighbour_rows(TRIPLES, SENTENCES, seed)
    # The same anchors in the same order; a one-sentence document and a document not in the corpus have no neighbour.
    assert rows["anchor"].tolist() == ["A zero.", "A two.", "B one."]
    assert rows["positive"].tolist() == ["A one.", "A one.", "B zero."]  # the last sentence takes the previous one
    doc_of = dict(zip(SENTENCES["text"], SENTENCES["doc_id"]))
    for anchor, negative in zip(rows["anchor"], rows["negative"]):
        assert doc_of[negative] != doc_of[anchor] and negative != "- list debris"  # another document, usable


def test_neighbour_rows_train_as_the_trainers_contrastive_dataset():
    rows = neighbour_rows(TRIPLES, SENTENCES, 0)
    sets = training_datasets(TrainingData(rows, pd.DataFrame(columns=["s1", "s2", "label"]), rows.iloc[:0]),
                             LossSettings(hierarchical_triplet=0.0))
    assert list(sets) == ["contrastive"] and sets["contrastive"]["anchor"] == rows["anchor"].tolist()


def test_another_patterns_triples_are_taken_for_the_same_anchors_in_their_order(tmp_path):
    """The NLI pattern's row of the data-value table trains on the same anchors as the STS triples: a run over
    `anchor_corpus` (each anchor its own document) gives triples that `same_anchor_rows` puts back in the STS
    triples' order; an anchor without a complete NLI triple, or one the STS triples lack, is not trained on."""
    from tasks.core.config import CorpusSettings
    from tasks.corpus.sentences import load_corpus

    corpus = anchor_corpus(TRIPLES)
    assert corpus["text"].tolist() == TRIPLES["anchor"].tolist() and corpus["doc_id"].is_unique
    corpus.to_parquet(tmp_path / "anchors.parquet", index=False)  # readable as stage 1's corpus, one sentence each
    sentences = load_corpus(CorpusSettings(source=str(tmp_path / "anchors.parquet"))).sentences
    assert sorted(sentences["text"]) == sorted(TRIPLES["anchor"])
    nli = pd.DataFrame({  # a run's order, a failed triple, a repeat and an anchor of no STS triple
        "anchor": ["B one.", "Elsewhere.", "A zero.", "C alone.", "A zero.", "Not an STS anchor."],
        "positive": ["B entailed", "E entailed", "A entailed", None, "A again", "x"],
        "intermediate": [None] * 6,
        "negative": ["B contradicted", "E contradicted", "A contradicted", "C contradicted", "A again", "y"]})
    rows = same_anchor_rows(TRIPLES, nli)
    assert rows["anchor"].tolist() == ["A zero.", "B one.", "Elsewhere."]  # the STS triples' order
    assert rows["positive"].tolist() == ["A entailed", "B entailed", "E entailed"]  # the first complete triple
    assert rows["intermediate"].isna().all()
    sets = training_datasets(TrainingData(rows, pd.DataFrame(columns=["s1", "s2", "label"]), rows.iloc[:0]),
                             LossSettings())
    assert list(sets) == ["contrastive"]  # InfoNCE only: the hierarchical loss needs an intermediate


def test_another_runs_negative_trains_as_a_second_hard_negative_beside_the_triples_own():
    nli = pd.DataFrame({"anchor": ["B one.", "A zero.", "C alone."], "positive": ["b", "a", None],
                        "intermediate": [None] * 3, "negative": ["B contradicted", "A contradicted", "C x"]})
    rows = with_extra_negative(TRIPLES, nli)
    assert rows["anchor"].tolist() == ["A zero.", "B one."]  # C's NLI triple is incomplete, the others have none
    assert rows["negative"].tolist() == ["n", "n"] and rows["mined_negative_1"].tolist() == ["A contradicted",
                                                                                            "B contradicted"]
    data = TrainingData(rows, pd.DataFrame(columns=["s1", "s2", "label"]), rows.iloc[:0])
    sets = training_datasets(data, LossSettings(negatives="both"))
    assert sets["hierarchical"].column_names == ["anchor", "positive", "negative", "intermediate", "mined_negative_1"]
    assert sets["hierarchical"]["mined_negative_1"] == ["A contradicted", "B contradicted"]
    # An anchor held twice on both sides keeps its two triples, each with one extra negative (not four rows).
    twice = with_extra_negative(pd.concat([TRIPLES, TRIPLES.iloc[:1]]), pd.concat([nli, nli.iloc[:1]]))
    assert twice["anchor"].tolist() == ["A zero.", "B one.", "A zero."]  # the triples' order


def test_neighbours_need_the_anchors_corpus_positions():
    with pytest.raises(ConfigError, match="doc_id, position.*stage 1's"):
        neighbour_rows(TRIPLES.drop(columns=["doc_id", "position"]), SENTENCES, 0)


def test_simcse_dropout_is_given_to_a_decoder_without_it_and_an_encoders_own_is_kept():
    """SmolLM2-style decoders ship with attention_dropout 0: SimCSE's two views would be identical without it."""
    import torch
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel

    decoder = LlamaModel(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1))
    assert ensure_dropout(decoder, 0.1) == 2  # one attention module per layer
    assert {layer.self_attn.attention_dropout for layer in decoder.layers} == {0.1}
    decoder.train()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    assert not torch.equal(decoder(ids).last_hidden_state, decoder(ids).last_hidden_state)  # two views differ

    encoder = BertModel(BertConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2))
    assert ensure_dropout(encoder, 0.1) == 0
    assert {m.p for m in encoder.modules() if isinstance(m, torch.nn.Dropout)} == {0.2}
