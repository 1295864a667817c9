"""Validation rules on real examples of what small instruction models return."""

from __future__ import annotations

import pytest

from tasks.core.config import ValidationSettings
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
    assert check(longer, kind="intermediate", base=POSITIVE, intermediate_must_be_shorter=False).ok


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
