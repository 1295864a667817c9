"""Rules a generated sentence must pass. Each rule returns a failure reason or None.

Rules, in order (the first failure is the reason recorded):
- `empty`: nothing but whitespace/punctuation;
- `multiline`: more than one non-empty line (explanations, lists, several candidates);
- `refusal_or_meta`: refusals and meta-text ("Sure, here is…", "I'm sorry", "As an AI", "Note:" …);
- `leftover_label`: the prompt's labels ("Sentence 2:", "Hypothesis:", "Example 1") or the whole output in quotes;
- `length`: outside [min_words, max_words] or longer than max_length_ratio × its base;
- `not_shorter`: an intermediate sentence that is not shorter than its base (it must omit details);
- `copy`: equal to, or a near-copy of (similarity ≥ threshold after normalization), the anchor or its base;
- `duplicate`: equal (normalized) to another generation of the same triple;
- `fact_dropped`: a positive that lacks a number, name or date of the anchor (tasks/generate/facts.py);
- `fact_added`: a positive or an intermediate with a number, name or date the anchor does not have.
The two fact rules run when `facts` is on (default); negatives are exempt (changing a fact is their job).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher

from tasks.generate.facts import check_facts
from tasks.generate.settings import ValidationSettings

RULES = ("empty", "multiline", "refusal_or_meta", "leftover_label", "length", "not_shorter", "copy", "duplicate",
         "fact_dropped", "fact_added")

_META = re.compile(
    r"^\s*(sure\b|certainly\b|of course\b|okay\b|ok[,.!]|here(?:'s| is| are)\b|i'?m sorry|i am sorry|"
    r"sorry\b|i can(?:not|'t)\b|i'm unable|i am unable|as an ai\b|as a language model|note\s*:|"
    r"(?:the )?(?:new|revised|generated) (?:sentence|hypothesis)\b|output\s*:|answer\s*:|response\s*:)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"(sentence\s*[12]\s*:|hypothesis\s*:|premise\s*:|\bexample\s*\d+\s*:|^\s*-\s)", re.IGNORECASE)
_QUOTED = re.compile(r'^\s*(["“”\'‘’«»]).*(["“”\'‘’«»])\s*$', re.DOTALL)
_NON_WORD = re.compile(r"[^\w\s]", re.UNICODE)
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lowercase, strip accents/punctuation, collapse spaces: the form used for copy and duplicate checks."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return _SPACES.sub(" ", _NON_WORD.sub(" ", text.lower())).strip()


def word_count(text: str) -> int:
    return len(text.split())


def similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, normalize(a), normalize(b), autojunk=False).ratio()


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str | None
    detail: str
    passed: tuple[str, ...]


def validate(
    text: str,
    *,
    kind: str,
    base: str,
    anchor: str,
    siblings: tuple[str, ...] = (),
    settings: ValidationSettings = ValidationSettings(),
) -> Verdict:
    """Check one generation. `base` is the sentence it was derived from, `siblings` the triple's other generations."""
    checks = (
        ("empty", lambda: "no words" if not normalize(text) else None),
        ("multiline", lambda: "several lines" if len([ln for ln in text.splitlines() if ln.strip()]) > 1 else None),
        ("refusal_or_meta", lambda: f"starts with '{m.group(0).strip()}'" if (m := _META.search(text)) else None),
        ("leftover_label", lambda: _leftover_label(text)),
        ("length", lambda: _length(text, base, settings)),
        ("not_shorter", lambda: _not_shorter(text, base, kind, settings)),
        ("copy", lambda: _copy(text, base, anchor, settings)),
        ("duplicate", lambda: _duplicate(text, siblings)),
        ("fact_dropped", lambda: _facts(text, anchor, kind, settings, "dropped")),
        ("fact_added", lambda: _facts(text, anchor, kind, settings, "added")),
    )
    passed = []
    for name, check in checks:
        problem = check()
        if problem:
            return Verdict(False, name, problem, tuple(passed))
        passed.append(name)
    return Verdict(True, None, "", tuple(passed))


def _leftover_label(text: str) -> str | None:
    if m := _LABEL.search(text):
        return f"contains '{m.group(0).strip()}'"
    if _QUOTED.match(text) and len(text.strip()) > 2:
        return "whole output in quotes"
    return None


def _length(text: str, base: str, s: ValidationSettings) -> str | None:
    n = word_count(text)
    if n < s.min_words or n > s.max_words:
        return f"{n} words, bounds [{s.min_words}, {s.max_words}]"
    if n > s.max_length_ratio * max(1, word_count(base)):
        return f"{n} words vs {word_count(base)} in its base (ratio > {s.max_length_ratio})"
    return None


def _not_shorter(text: str, base: str, kind: str, s: ValidationSettings) -> str | None:
    if kind == "intermediate" and s.intermediate_must_be_shorter and word_count(text) >= word_count(base):
        return f"{word_count(text)} words, base has {word_count(base)}: no detail omitted"
    return None


def _copy(text: str, base: str, anchor: str, s: ValidationSettings) -> str | None:
    for name, other in (("anchor", anchor), ("base", base)):
        if normalize(text) == normalize(other):
            return f"identical to the {name}"
        ratio = similarity(text, other)
        if ratio >= s.near_copy_threshold:
            return f"near-copy of the {name} (similarity {ratio:.2f})"
    return None


def _duplicate(text: str, siblings: tuple[str, ...]) -> str | None:
    norm = normalize(text)
    return "same as another generation of this triple" if any(norm == normalize(s) for s in siblings if s) else None


_FACT_KINDS = {"dropped": ("positive",), "added": ("positive", "intermediate")}


def _facts(text: str, anchor: str, kind: str, s: ValidationSettings, which: str) -> str | None:
    if not s.facts or kind not in _FACT_KINDS[which]:
        return None
    found = getattr(check_facts(anchor, text), which)
    return f"{which} {', '.join(found)} (anchor: {anchor[:60]!r})" if found else None
