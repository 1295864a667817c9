"""build-dataset's evaluation sets read as decontamination needs them (tasks/dataset/eval_sets.py): every
format a user may pass, each sentence with the id of its first occurrence, duplicates and blanks out, a bad set
refused by name before anything is built."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.core.config import ConfigError
from tasks.core.store import sha256_path
from tasks.core.sts_data import read_stsb, stsb_version
from tasks.dataset.eval_sets import load_eval_sentences

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


@pytest.fixture
def sick(tmp_path):
    path = tmp_path / "SICK_trial.txt"
    path.write_text(SICK_HEADER + "1\t A dog runs in the park. \tA cat sleeps.\t2.5\tNEUTRAL\n"
                    "2\tA man plays a guitar.\tA dog runs in the park.\t1.0\tNEUTRAL\n", encoding="utf-8")
    return path


def test_a_sick_file_gives_each_distinct_sentence_once_with_its_first_id(sick):
    evals = load_eval_sentences([str(sick)])
    # s1 of every row first, then s2 (stacked by column); the repeated sentence keeps its first id; stripped
    assert evals.texts == ["A dog runs in the park.", "A man plays a guitar.", "A cat sleeps."]
    assert evals.ids == ["SICK_trial.txt:0:s1", "SICK_trial.txt:1:s1", "SICK_trial.txt:0:s2"]
    assert evals.sources == [{"source": str(sick), "sentences": 4, "sha256": sha256_path(sick)}]


def test_text_and_parquet_sets_are_one_sentence_each_and_blanks_are_dropped(tmp_path, sick):
    text = tmp_path / "held_out.txt"
    text.write_text("First held-out sentence here.\n\nA man plays a guitar.\n", encoding="utf-8")
    table = tmp_path / "more.parquet"
    pd.DataFrame({"sentence": ["Another sentence of the set.", "First held-out sentence here."]}).to_parquet(table)
    evals = load_eval_sentences([str(sick), str(text), str(table)])
    assert evals.texts == ["A dog runs in the park.", "A man plays a guitar.", "A cat sleeps.",
                           "First held-out sentence here.", "Another sentence of the set."]
    assert evals.ids[3:] == ["held_out.txt:0:sentence", "more.parquet:0:sentence"]  # blank line: no sentence
    assert [s["sentences"] for s in evals.sources] == [4, 2, 2]
    assert evals.sources[2]["sha256"] == sha256_path(table)


def test_stsb_dev_is_read_from_the_installed_package_with_its_version():
    evals = load_eval_sentences(["stsb-dev"])
    dev = read_stsb("dev")
    expected = list(dict.fromkeys(s for s in [*dev["s1"].str.strip(), *dev["s2"].str.strip()] if s))
    assert evals.texts == expected and len(dev) == 1500
    assert evals.ids[0] == "stsb-dev:0:s1" and evals.sources == [
        {"source": "stsb-dev", "sentences": 3000, "version": stsb_version()}]


def test_stsb_test_is_read_from_the_installed_package_like_stsb_dev():
    evals = load_eval_sentences(["stsb-test"])
    # 1379 pairs in the STS-B test split; its first pair's first sentence, by hand from the package's file
    assert evals.ids[0] == "stsb-test:0:s1" and evals.texts[0] == "A girl is styling her hair."
    assert evals.sources == [{"source": "stsb-test", "sentences": 2758, "version": stsb_version()}]


def test_sts_b_layout_tsv_and_csv_sets_are_read_as_pairs_and_blank_sentences_dropped(tmp_path):
    # STS-B layout: genre, file, year, id, score, s1, s2 — a tab-separated file whichever of the two suffixes,
    # the suffix in any case. Read as lines of text instead, each whole line would be one "sentence".
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
                   "main-news\tMSRpar\t2012test\t0002\t1.000\tStocks fell sharply today.\t  \n", encoding="utf-8")
    csv = tmp_path / "more.CSV"
    csv.write_text("main-forums\tdeft\t2014\t0003\t3.000\tA woman is slicing onions.\tA woman cuts an onion.\n",
                   encoding="utf-8")
    evals = load_eval_sentences([str(tsv), str(csv)])
    # the blank s2 of row 1 is no sentence (but counted among the set's read sentences)
    assert evals.texts == ["A plane is taking off.", "Stocks fell sharply today.", "An air plane is taking off.",
                           "A woman is slicing onions.", "A woman cuts an onion."]
    assert evals.ids == ["pairs.tsv:0:s1", "pairs.tsv:1:s1", "pairs.tsv:0:s2", "more.CSV:0:s1", "more.CSV:0:s2"]
    assert [s["sentences"] for s in evals.sources] == [4, 2]


def test_a_missing_or_unreadable_set_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="no_such.tsv: no such file or folder"):
        load_eval_sentences([str(tmp_path / "no_such.tsv")])
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    # the message names the decoding error, so the user knows it is the encoding, not the layout
    with pytest.raises(ConfigError, match=r"latin1.txt cannot be read as UTF-8 text \(UnicodeDecodeError\)"):
        load_eval_sentences([str(latin)])
