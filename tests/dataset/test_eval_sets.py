"""build-dataset's evaluation sets read as decontamination needs them (tasks/dataset/decontamination.py): every
format a user may pass, each sentence with the id of its first occurrence, duplicates and blanks out, a bad set
refused by name before anything is built."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.core.config import ConfigError
from tasks.core.store import sha256_path
from tasks.core.sts_data import read_stsb, stsb_version
from tasks.dataset.decontamination import load_eval_sentences

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


def test_a_missing_or_unreadable_set_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="no_such.tsv: no such file or folder"):
        load_eval_sentences([str(tmp_path / "no_such.tsv")])
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.txt cannot be read as UTF-8"):
        load_eval_sentences([str(latin)])
