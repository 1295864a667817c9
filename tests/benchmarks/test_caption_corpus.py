"""benchmarks/corpora.py caption_corpus: SICK train's sentences as the genre lever's corpus (anchors_curve.sh genre)."""

from __future__ import annotations

from benchmarks.corpora import caption_corpus
from tasks.core.decontamination import EvalSentences

HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def test_each_caption_once_with_a_full_stop_and_none_an_evaluation_sentence(tmp_path):
    sick = tmp_path / "SICK_train.txt"
    rows = [("A man is playing a guitar on the stage", "A woman is slicing an onion in the kitchen"),
            ("A man is playing a guitar on the stage.", "Two dogs are running through a field of grass!")]
    sick.write_text(HEADER + "".join(f"{i}\t{a}\t{b}\t1.0\tNEUTRAL\n" for i, (a, b) in enumerate(rows, start=1)))
    evals = EvalSentences(ids=["sick-trial:1:s1"], texts=["A woman is slicing an onion in the kitchen."],
                          sources=[{"source": "SICK_trial.txt", "sentences": 1}])
    corpus, removed = caption_corpus(sick, evals)
    assert corpus["text"].tolist() == ["A man is playing a guitar on the stage.",  # once, with or without its stop
                                       "Two dogs are running through a field of grass!"]  # its own end mark kept
    assert removed == 1 and corpus["doc_id"].is_unique  # the trial sentence is no anchor, whatever its full stop
