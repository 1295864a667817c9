"""Validation rules on real examples of what small instruction models return."""

from __future__ import annotations

import pytest

from tasks.generate.settings import ValidationSettings
from tasks.generate.validation import RULES, Verdict, added_words, char_jaccard, normalize, similarity, validate

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


def test_verdict_lists_the_rules_passed_before_the_failure():
    assert check(POSITIVE) == Verdict(True, None, "", RULES)  # a pass carries no failure detail
    verdict = check("Sentence 2: The Bering Sea largely shapes the weather of western Alaska.")
    assert verdict.ok is False and verdict.passed == ("empty", "multiline", "refusal_or_meta")
    # a one-letter answer in quotes is still reported as quoted output, not merely as too short
    assert check('"A"').reason == "leftover_label"


def test_length_bounds_are_inclusive():
    # a negative, so that only the length rule decides (no fact rules, nothing like the anchor)
    assert check("Alaska is cold.", kind="negative", base=POSITIVE, min_words=3, max_words=3).ok
    # against its base: at most max_length_ratio (3) times its words, a one-word base counting as one word
    assert check("Heavy rain fell on the town.", kind="negative", base="Rain fell.").ok  # 6 = 3 x 2 words
    assert check("Heavy rain fell on the old town.", kind="negative", base="Rain fell.").reason == "length"
    assert check("Heavy rain fell.", kind="negative", base="Rain.").ok  # 3 = 3 x 1 word
    assert check("Heavy rain fell today.", kind="negative", base="Rain.").reason == "length"


def test_intermediate_as_long_as_its_base_is_not_shorter():
    base = "Nearby seas shape the weather of Alaska."
    assert check("The seas decide what Alaska's weather is.", kind="intermediate", base=base).reason == "not_shorter"


def test_copy_names_the_sentence_it_copies():
    assert check(ANCHOR, kind="negative", base=POSITIVE).detail.endswith("the anchor")
    assert check(POSITIVE.upper(), kind="negative", base=POSITIVE).detail.endswith("the base")
    # one phrase reworded: not identical after normalization, but a near-copy (similarity ~0.95)
    near = check("The climate of Western Alaska is determined largely by the Bering Sea and the Gulf of Alaska.")
    assert near.reason == "copy" and near.detail.startswith("near-copy of the anchor")


def test_near_copy_threshold_is_inclusive():
    # "cats eat " (9 of 13 characters) is shared and "fish"/"meat" have no letter in common: ratio 2*9/26 = 9/13
    assert similarity("Cats eat fish.", "Cats eat meat.") == 9 / 13
    verdict = validate("Cats eat fish.", kind="negative", base="Dogs sleep all day.", anchor="Cats eat meat.",
                       settings=ValidationSettings(near_copy_threshold=9 / 13))
    assert verdict.reason == "copy"


def test_one_word_changed_in_a_long_sentence_is_a_near_copy():
    # over 200 characters: difflib's "autojunk" heuristic would drop its frequent letters and call it dissimilar
    anchor = ("The committee that oversees the public library in the northern part of the county voted on Tuesday "
              "evening to extend its opening hours on weekends, to hire two more librarians, and to buy new books "
              "for the children who visit after school.")
    text = anchor.replace("public", "city")
    assert similarity(text, anchor) > 0.95  # 4 of ~235 characters differ
    assert validate(text, kind="positive", base=anchor, anchor=anchor).reason == "copy"


def test_copied_example_threshold_is_inclusive():
    example = "A group of children are playing in the park."
    verdict = validate(example, kind="negative", base=POSITIVE, anchor=ANCHOR, examples=(example,),
                       settings=ValidationSettings(copy_jaccard=1.0))
    assert verdict.reason == "copied_example"


def test_char_jaccard_of_five_grams():
    # "planet" {plane, lanet} vs "planes" {plane, lanes}: 1 shared of 3
    assert char_jaccard("planet", "planes") == pytest.approx(1 / 3)
    # texts shorter than 5 characters are compared whole
    assert char_jaccard("hi", "Hi!") == 1.0
    assert char_jaccard("cat", "bat") == 0.0


def test_added_words_are_what_a_deletion_could_not_produce():
    assert added_words("It was there.", "The dog was there.") == []  # function words only
    # the words before the common part are added, the common part is not
    assert added_words("Tall old trees.", "Trees.") == ["tall", "old"]
    assert added_words("Very tall trees fell.", "Trees fell.") == ["very", "tall"]
    assert added_words("Big dogs bark.", "Cats sleep.") == ["big", "dogs", "bark"]  # nothing in common
    assert added_words("Rain and more rain.", "Rain.") == ["more", "rain"]  # the source's one "rain" counts once
    # "storm hit" is in order in the source, after an earlier "hit"
    assert added_words("The storm hit.", "Hit by floods, the storm hit again.") == []


def test_not_deletion_counts_against_the_closer_source():
    anchor = "The old farmer sold his sheep at the busy market."
    base = "The elderly farmer sold his sheep at the crowded market."
    text = "The elderly farmer quickly sold sheep."  # adds "quickly" to the base; "elderly" and "quickly" to the anchor
    verdict = validate(text, kind="intermediate", base=base, anchor=anchor,
                       settings=ValidationSettings(deletion_allowance=1))
    assert verdict.ok
    verdict = validate(text, kind="intermediate", base=base, anchor=anchor,
                       settings=ValidationSettings(deletion_allowance=0))
    assert verdict.reason == "not_deletion" and "quickly" in verdict.detail
