"""benchmarks/corpora.py caption_corpus: SICK train's sentences as the genre lever's corpus (anchors_curve.sh genre)."""

from __future__ import annotations

from benchmarks.corpora import caption_corpus
from tasks.core.decontamination import EvalSentences

HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def test_each_caption_once_with_a_full_stop_and_none_an_evaluation_sentence(tmp_path):
    sick = tmp_path / "SICK_train.txt"
    sick.write_text(HEADER
                    + "1\tA man is playing a guitar on the stage\tA woman is slicing an onion in the kitchen\t1.2\tNEUTRAL\n"
                    + "2\tA man is playing a guitar on the stage\tTwo dogs are running through a field of grass!\t1.0\t"
                      "NEUTRAL\n")
    evals = EvalSentences(ids=["sick-trial:1:s1"], texts=["A woman is slicing an onion in the kitchen."],
                          sources=[{"source": "SICK_trial.txt", "sentences": 1}])
    corpus, removed = caption_corpus(sick, evals)
    assert corpus["text"].tolist() == ["A man is playing a guitar on the stage.",  # once, a full stop added
                                       "Two dogs are running through a field of grass!"]  # its own end mark kept
    assert removed == 1 and corpus["doc_id"].is_unique  # the trial sentence is no anchor, whatever its full stop
