"""Validation rules on real examples of what small instruction models return."""

from __future__ import annotations

import pytest

from tasks.generate.settings import ValidationSettings
from tasks.generate.validation import RULES, normalize, validate

ANCHOR = "The climate of Western Alaska is determined in large part by the Bering Sea and the Gulf of Alaska."
POSITIVE = "The Bering Sea and the Gulf of Alaska largely shape the weather of western Alaska."


def check(text, kind="positive", base=ANCHOR, siblings=(), **kw):
    return validate(text, kind=kind, base=base, anchor=ANCHOR, siblings=siblings,
                    settings=ValidationSettings(**kw))


def test_good_paraphrase_passes_every_rule():
    verdict = check(POSITIVE)
    assert verdict.ok and verdict.passed == RULES


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("  ...  ", "empty"),
        ("Western Alaska's weather depends on nearby seas.\nExplanation: I removed details.", "multiline"),
        ("Sure, here is a similar sentence: Alaska's weather depends on the seas.", "refusal_or_meta"),
        ("Here's the revised sentence: Alaska's weather depends on the seas.", "refusal_or_meta"),
        # the STS negative prompt's instruction echoed before the sentence (2 of 50 accepted negatives, 2026-11-29)
        ("A new sentence with nothing to do with the user's input: A group of children are playing in the park.",
         "refusal_or_meta"),
        ("A new sentence: The President sought to abolish slavery through legislation.", "refusal_or_meta"),
        ("I'm sorry, but I cannot help with that request today.", "refusal_or_meta"),
        ("As an AI language model, I think the weather of Alaska depends on the sea.", "refusal_or_meta"),
        ("Sentence 2: The Bering Sea largely shapes the weather of western Alaska.", "leftover_label"),
        ("- Hypothesis: Alaska has a climate.", "leftover_label"),
        ('"The Bering Sea largely shapes the weather of western Alaska."', "leftover_label"),
        ("Alaska weather.", "length"),
        (" ".join(["word"] * 90), "length"),
        # Verbatim copy as the 1.5B model returns it at low temperature, and a near-copy.
        (ANCHOR, "copy"),
        ("The climate of western Alaska is determined in large part by the Bering sea and the Gulf of Alaska",
         "copy"),
    ],
)
def test_rejections_name_the_rule(text, reason):
    verdict = check(text)
    assert not verdict.ok and verdict.reason == reason and verdict.detail


def test_intermediate_must_omit_details():
    longer = "Every single year, two large bodies of water nearby mostly decide what the weather in western Alaska is."
    assert check(longer, kind="intermediate", base=POSITIVE).reason == "not_shorter"
    assert check("Nearby seas shape the weather of Alaska.", kind="intermediate", base=POSITIVE).ok
    # "two" is a number the anchor does not have: with the fact rules on, the longer one is refused for that.
    assert check(longer, kind="intermediate", base=POSITIVE, intermediate_must_be_shorter=False).reason == "fact_added"
    assert check(longer, kind="intermediate", base=POSITIVE, intermediate_must_be_shorter=False, facts=False).ok


def test_positive_must_keep_the_anchors_names_numbers_and_dates():
    dropped = check("The sea and the gulf largely shape the weather of western Alaska.")
    assert dropped.reason == "fact_dropped" and "bering" in dropped.detail  # "gulf" is there, lower-cased
    added = check("Since 1990 the Bering Sea and the Gulf of Alaska largely shape the weather of western Alaska.")
    assert added.reason == "fact_added" and "1990" in added.detail
    # an intermediate may drop facts, not add them; a negative may do both (changing a fact is its job)
    assert check("The Gulf of Alaska shapes its weather.", kind="intermediate", base=POSITIVE).ok
    assert check("In 1990 Texas had a mild winter.", kind="negative", base=POSITIVE).ok
    assert check("The sea and the gulf largely shape the weather of western Alaska.", facts=False).ok


def test_facts_are_numbers_names_and_dates_however_written():
    from tasks.generate.facts import check_facts, facts

    assert facts("Malaysian police arrested 12 men in Kuala Lumpur on Monday.") == \
        {"malaysian", "twelve", "kuala", "lumpur", "monday"}
    assert facts("Adventures may be dangerous.") == set()  # a capitalised opener and the modal "may" are no facts
    assert facts("It opened in May 2006.") == {"may", "2006"}
    # "7" and "seven", en dash and hyphen, a possessive: the same facts
    assert check_facts("The Baku–Tbilisi pipeline took seven years.", "Baku-Tbilisi's pipeline took 7 years.").errors == 0


def test_length_ratio_against_the_base():
    base = "Prices rose sharply."
    text = "Prices for seed and fertilizer rose sharply in every market of the valley during the spring."
    assert check(text, base=base, min_words=3).reason == "length"


def test_duplicate_of_a_sibling_generation():
    negative = "The weather of western Alaska is not influenced by any sea."
    assert check(negative, kind="negative", base=POSITIVE, siblings=(negative.upper(),)).reason == "duplicate"
    assert check(negative, kind="negative", base=POSITIVE, siblings=(POSITIVE,)).ok


def test_normalize():
    assert normalize("  Café, au  LAIT! ") == "cafe au lait"
