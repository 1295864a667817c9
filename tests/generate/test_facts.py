"""The fact rules on small sentences whose numbers, names and dates can be read off by eye: which capitalised words
are names, where a sentence's first word is one, and which surface forms count as the same fact."""

from __future__ import annotations

from tasks.generate.facts import check_facts, facts


def test_a_capital_letter_word_opening_a_sentence_is_not_a_name():
    # "A" and "I" are upper case, but one letter: not acronyms, and openers
    assert facts("A man walked home.") == frozenset()
    assert facts("I saw them leave.") == frozenset()


def test_acronyms_are_names_even_as_the_first_word():
    assert facts("UN officials met.") == {"un"}  # two letters are enough
    assert facts("NASA launched it.") == {"nasa"}
    assert facts("Officials of the UN met.") == {"un"}


def test_a_capitalised_word_after_the_first_is_a_name():
    assert facts("The Hague hosted talks.") == {"hague"}  # "The" only opens the sentence


def test_a_first_word_is_a_name_when_a_capitalised_word_follows_it():
    assert facts("John Howard spoke.") == {"john", "howard"}
    assert facts("John Howard") == {"john", "howard"}  # the two words are the whole sentence
    assert facts("Adventures may be long.") == frozenset()  # a capitalised opener alone is just an opener
    # a one-word sentence: nothing follows its first word
    assert facts("Welcome!") == frozenset()
    assert facts("Chinese.") == {"chinese"}  # a nationality stands alone


def test_month_and_weekday_names_are_facts_wherever_they_stand():
    assert facts("Monday was quiet.") == {"monday"}  # an opener, and a date
    assert facts("the deal closed in march") == {"march"}  # lower-case: still a date


def test_a_curly_apostrophe_possessive_is_the_same_fact_as_the_name():
    assert facts("Police in Malaysia’s capital arrested 12 men.") == {"malaysia", "twelve"}
    check = check_facts("Police in Malaysia’s capital arrested 12 men.", "Police in Malaysia's capital held twelve men.")
    assert check.dropped == () and check.added == () and check.errors == 0
