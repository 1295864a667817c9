"""Anchors that read as one sentence: each filter reason on the lines that showed it, sentences that pass, the mix
across sources (shares, prefix stability, a source left out), evaluation sentences never sampled."""

from __future__ import annotations

import pandas as pd
import pytest

from tasks.core.config import ConfigError
from tasks.core.sts_data import read_sts_source
from tasks.corpus.sentences import Corpus
from tasks.generate.anchors import REASONS, AnchorSettings, anchor_rejections, sample_anchors

REJECTED = {
    "too_short": "It was nice talking.",
    "too_long": " ".join(["The committee met again"] * 11) + ".",
    "encoding": "Members that tomorrow is â€œwear your uniform to workâ€ day, a celebration of our reserve forces.",
    "markup": "File:View from Park Güell Terrace.jpg| View from the main terrace of the park.",
    "list_debris": "- Increased spending on primary education to 71.56bn rupees this year.",
    "lost_words": "The average depth of the Atlantic with its adjacent seas, is ; without them it is deeper.",
    "transcript": "CAMEROTA: You can see the crowd gathering outside the hall tonight.",
    "caption_fragment": "French troops storming Redoubt during the Siege of Yorktown In 1776, the Count met the king.",
    "verse": "O beautiful for pilgrim feet Whose stern impassioned stress A thoroughfare for freedom beat Across the "
             "wilderness.",
    "header": "Sir Paul Rocks Super Bowl Crowds In Florida Stadium.",
    "several_sentences": "He left the room without a word.Then the phone rang again in the hall.",
    "cut_off": "I had to stop because our landlord told me he was going to kick me out and the family if I.",
    "chat_filler": "lol i was gonna say the same thing about that movie.",
    "not_english": "Parabéns meu amor, você é incrível e merece toda a felicidade do mundo.",
    "no_sentence_end": "The committee met on Tuesday to discuss the new budget proposal",
}
PASSING = [
    "The Senate voted on the nomination this afternoon after a long debate.",
    "A man is playing a guitar on the street corner.",
    '"It is hard to imagine a worse choice," the senator said before the vote.',
    "I definitely wasn't sure about moving to a new city for a while.",
    "Oil prices fell for a third day as supplies grew in the United States.",
]


@pytest.mark.parametrize("reason", list(REJECTED))
def test_each_reason_rejects_what_it_names(reason):
    assert anchor_rejections(pd.Series([REJECTED[reason]]), max_words=40).iloc[0] == reason


@pytest.mark.parametrize("text", ["Replacements: Priscott for Roberts (71), Green for Dowd (71), Skivington for "
                                  "Shaw (71), Birkett for Hart (57).",
                                  "12.16-- Rutte says the elections can send a message to the world."])
def test_lists_and_live_blog_lines_are_debris(text):
    assert anchor_rejections(pd.Series([text])).iloc[0] == "list_debris"


def test_a_filter_change_moves_only_what_it_rejects():
    corpus = _corpus({"news": 200, "chat": 200})
    settings = AnchorSettings(exclude_eval=[], filter=False)
    before, _ = sample_anchors(corpus, 40, seed=2, settings=settings)
    dropped = before["text"].iloc[5]
    fewer = Corpus(corpus.sentences[corpus.sentences["text"] != dropped].reset_index(drop=True), [], [], {})
    after, _ = sample_anchors(fewer, 40, seed=2, settings=settings)
    # the dropped one goes, its source's later candidates move up one place: the sample changes by a sentence or two
    assert dropped not in set(after["text"]) and len(set(before["text"]) & set(after["text"])) >= 38


@pytest.mark.parametrize("text", ["The committee met on Tuesday to discuss the following points:",
                                  "The committee met on Tuesday and then, as the budget was late…",
                                  "The committee met on Tuesday to discuss the budget proposal —"])
def test_a_line_that_stops_before_its_sentence_end_is_no_anchor(text):
    assert anchor_rejections(pd.Series([text])).iloc[0] == "no_sentence_end"
    # the same line ended (a quote or bracket may close it) passes
    for end in (".", ".\"", "?)"):
        assert anchor_rejections(pd.Series([text.rstrip(":…— ") + end])).iloc[0] == "", end


def test_sentences_pass():
    assert anchor_rejections(pd.Series(PASSING)).tolist() == [""] * len(PASSING)


def test_every_reason_is_documented_in_the_module():
    import tasks.generate.anchors as anchors

    assert all(f"`{reason}`" in anchors.__doc__ for reason in REASONS if reason != "no_sentence_end")


def _corpus(per_source: dict[str, int]) -> Corpus:
    rows = [(source, f"{source}/d{i // 5}", i % 5, f"Sentence number {i} from the {source} collection is here.")
            for source, count in per_source.items() for i in range(count)]
    frame = pd.DataFrame(rows, columns=["source", "doc_id", "position", "text"]).assign(usable=True)
    return Corpus(frame, [], [], {})


def test_mix_shares_and_prefix_stability():
    corpus = _corpus({"news": 400, "chat": 400, "wiki": 400})
    settings = AnchorSettings(mix={"news": 2, "chat": 1, "wiki": 1}, exclude_eval=[])
    big, counts = sample_anchors(corpus, 200, seed=5, settings=settings)
    share = big["source"].value_counts(normalize=True)
    assert 0.42 < share["news"] < 0.58 and 0.17 < share["chat"] < 0.33
    small, _ = sample_anchors(corpus, 50, seed=5, settings=settings)
    assert small["text"].tolist() == big["text"].tolist()[:50] and big["text"].is_unique
    assert counts["sampled_by_source"] == big["source"].value_counts().to_dict()
    other, _ = sample_anchors(corpus, 50, seed=6, settings=settings)
    assert other["text"].tolist() != small["text"].tolist()


def test_default_mix_is_equal_and_a_left_out_source_gives_none():
    corpus = _corpus({"news": 300, "chat": 300, "wiki": 30})
    sample, _ = sample_anchors(corpus, 150, seed=1, settings=AnchorSettings(exclude_eval=[]))
    counts = sample["source"].value_counts()
    assert counts["wiki"] == 30 or counts["wiki"] > 25  # a small source gives what it has
    assert abs(counts["news"] - counts["chat"]) < 30
    only, _ = sample_anchors(corpus, 40, seed=1, settings=AnchorSettings(mix={"chat": 1}, exclude_eval=[]))
    assert set(only["source"]) == {"chat"}
    with pytest.raises(ConfigError, match="anchors.mix names bbc, not a source of this corpus"):
        sample_anchors(corpus, 5, seed=1, settings=AnchorSettings(mix={"bbc": 1}, exclude_eval=[]))
    with pytest.raises(ConfigError, match="only 30 usable distinct sentences that pass the anchor filter"):
        sample_anchors(corpus, 31, seed=1, settings=AnchorSettings(mix={"wiki": 1}, exclude_eval=[]))


def test_filtered_lines_are_counted_and_never_sampled():
    texts = list(REJECTED.values()) + PASSING
    frame = pd.DataFrame({"source": "x", "doc_id": "x/d", "position": range(len(texts)), "text": texts,
                          "usable": True})
    sample, counts = sample_anchors(Corpus(frame, [], [], {}), len(PASSING), seed=3,
                                    settings=AnchorSettings(exclude_eval=[]))
    assert sorted(sample["text"]) == sorted(PASSING)
    assert counts["rejected_by_reason"] == {reason: 1 for reason in REJECTED}
    unfiltered, _ = sample_anchors(Corpus(frame, [], [], {}), len(texts), seed=3,
                                   settings=AnchorSettings(filter=False, exclude_eval=[]))
    assert len(unfiltered) == len(texts)


def test_evaluation_sentences_are_never_anchors():
    dev = read_sts_source("stsb-dev")
    leaked = [dev["s1"].iloc[0], dev["s2"].iloc[3].upper()]  # an exact copy and one in other case
    texts = PASSING + leaked
    frame = pd.DataFrame({"source": "x", "doc_id": "x/d", "position": range(len(texts)), "text": texts,
                          "usable": True})
    sample, counts = sample_anchors(Corpus(frame, [], [], {}), len(PASSING), seed=3,
                                    settings=AnchorSettings(filter=False))
    assert sorted(sample["text"]) == sorted(PASSING)
    assert counts["rejected_by_reason"] == {"in_evaluation_set": 2}


def test_verdicts_are_computed_once_per_candidate_list(tmp_path, monkeypatch):
    import tasks.generate.anchors as anchors

    monkeypatch.setenv("STSGEN_HOME", str(tmp_path))
    corpus = _corpus({"news": 50, "chat": 50})
    first, _ = sample_anchors(corpus, 20, seed=4, settings=AnchorSettings(exclude_eval=[]))

    def fail(*args):
        raise AssertionError("computed again")

    monkeypatch.setattr(anchors, "_verdicts", fail)
    again, _ = sample_anchors(corpus, 20, seed=4, settings=AnchorSettings(exclude_eval=[]))
    assert again.equals(first)
    with pytest.raises(AssertionError, match="computed again"):  # other settings: other verdicts
        sample_anchors(corpus, 20, seed=4, settings=AnchorSettings(exclude_eval=[], max_words=30))


@pytest.mark.parametrize("text", ['"well, i never thought i would see the day you came back here."',
                                  "'cause we went home to see the new house on the hill before dark."])
def test_a_lower_case_start_after_quotes_or_punctuation_is_chat(text):
    assert anchor_rejections(pd.Series([text])).iloc[0] == "chat_filler"


@pytest.mark.parametrize("text", ['"Well, I never thought I would see the day you came back here."',
                                  "40 people died when the old bridge collapsed during the storm.",
                                  "2015 was the warmest year on record in much of the country.",
                                  "3rd parties rarely win seats in the national parliament."])
def test_a_capital_after_a_quote_or_a_number_start_passes(text):
    assert anchor_rejections(pd.Series([text])).iloc[0] == ""


def test_a_contexts_only_source_gives_no_anchor():
    # the movie dialogs ship lower-cased: a number-first line passes every text rule, the source's flag stops it
    line = "12000 feet and he still thinks we can land this thing on the river."
    assert anchor_rejections(pd.Series([line])).iloc[0] == ""
    corpus = _corpus({"news": 60, "movie-dialogs": 60})
    sample, counts = sample_anchors(corpus, 30, seed=3, settings=AnchorSettings(exclude_eval=[]))
    assert set(sample["source"]) == {"news"} and counts["rejected_by_reason"] == {"contexts_only_source": 60}
