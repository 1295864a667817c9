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
- `fact_added`: a positive or an intermediate with a number, name or date the anchor does not have;
- `copied_example`: equal to, or a near-duplicate of (character 5-gram Jaccard ≥ copy_jaccard: build-dataset's
  near-duplicate rule), a sentence of its prompt's examples (a few-shot example copied verbatim);
- `not_deletion`: an intermediate that adds or substitutes more than `deletion_allowance` words (function words
  aside) with respect to both its base and the anchor — an intermediate leaves details out, it does not rewrite;
- `negative_too_close` (STS pattern): a negative whose encoder cosine to the anchor is ≥ negative_max_cosine (a
  paraphrase, or s⁺ with a word or two changed: the pattern's negatives say something else). It needs the encoder,
  so the best-of-N chooser applies it (tasks/generate/candidates.py, tasks/generate/generation._screen).
The two fact rules run when `facts` is on (default); negatives are exempt (changing a fact is their job).
`not_deletion` is off unless `deletion_allowance` is given; the new checks were measured (issue 34) on the
hand-labeled generations (data/annotations/verifier_generations*.csv).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher

from tasks.core.errors import ConfigError
from tasks.generate.facts import check_facts
from tasks.generate.settings import ValidationSettings

RULES = ("empty", "multiline", "refusal_or_meta", "leftover_label", "length", "not_shorter", "copy", "duplicate",
         "fact_dropped", "fact_added", "copied_example", "not_deletion")  # negative_too_close: the chooser
# Words an intermediate may add when it drops a clause ("…, and he won" → "he won"): they carry no new content.
FUNCTION_WORDS = frozenset(
    "a an the of in on at to for by with from into and or but nor as than that which who whom whose this these those "
    "it its he she they them their his her is are was were be been being has have had do does did will would can "
    "could so also then there".split())  # never "not" / "no" / "nor": a negation is new content

_META = re.compile(
    r"^\s*(sure\b|certainly\b|of course\b|okay\b|ok[,.!]|here(?:'s| is| are)\b|i'?m sorry|i am sorry|"
    r"sorry\b|i can(?:not|'t)\b|i'm unable|i am unable|as an ai\b|as a language model|note\s*:|"
    r"(?:the |an? )?(?:new|revised|generated) (?:sentence|hypothesis)\b|output\s*:|answer\s*:|response\s*:)",
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
    examples: tuple[str, ...] = (),
    settings: ValidationSettings = ValidationSettings(),
) -> Verdict:
    """Check one generation. `base` is the sentence it was derived from, `siblings` the triple's other generations,
    `examples` the sentences of its prompt's few-shot examples."""
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
        ("copied_example", lambda: _copied_example(text, examples, settings)),
        ("not_deletion", lambda: _not_deletion(text, base, anchor, kind, settings)),
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


def char_jaccard(a: str, b: str, size: int = 5) -> float:
    """Jaccard of the character `size`-grams of the normalized texts (build-dataset's near-duplicate measure)."""
    grams = [{t[k:k + size] for k in range(max(len(t) - size + 1, 1))} for t in (normalize(a), normalize(b))]
    return len(grams[0] & grams[1]) / max(len(grams[0] | grams[1]), 1)


def _copied_example(text: str, examples: tuple[str, ...], s: ValidationSettings) -> str | None:
    if not s.copied_example:
        return None
    for example in examples:
        score = char_jaccard(text, example)
        if score >= s.copy_jaccard:
            return f"copy of a prompt example (5-gram Jaccard {score:.2f}): {example[:60]!r}"
    return None


def added_words(text: str, source: str) -> list[str]:
    """The content words of `text` outside its longest common subsequence with `source`'s content words (function
    words aside): what an edit that only deletes from `source` could not have produced. An LCS, not a greedy match:
    a clause moved to the front ("On Tuesday, the mayor …") counts as its own words, not as every word after it."""
    a = [w for w in normalize(text).split() if w not in FUNCTION_WORDS]
    b = [w for w in normalize(source).split() if w not in FUNCTION_WORDS]
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]  # sentences: tens of words, a small table
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if a[i] == b[j] else max(table[i + 1][j], table[i][j + 1])
    added, i, j = [], 0, 0
    while i < len(a):
        if j < len(b) and a[i] == b[j]:
            i, j = i + 1, j + 1
        elif j < len(b) and table[i][j + 1] >= table[i + 1][j]:
            j += 1
        else:
            added.append(a[i])
            i += 1
    return added


def _not_deletion(text: str, base: str, anchor: str, kind: str, s: ValidationSettings) -> str | None:
    if kind != "intermediate" or s.deletion_allowance is None:
        return None
    added = min((added_words(text, base), added_words(text, anchor)), key=len)
    if len(added) > s.deletion_allowance:
        return f"adds or changes {len(added)} word(s) (allowance {s.deletion_allowance}): {', '.join(added[:6])}"
    return None


def prompt_example_sentences(template, examples: list) -> tuple[str, ...]:
    """The sentences of a kind's few-shot examples that its rendered prompt shows: what `copied_example` compares a
    generation with. A template that shows none of them is a ConfigError (the check would compare with nothing)."""
    system = template.system_message([vars(e) for e in examples])
    shown = tuple(s for e in examples for s in (e.sentence1, e.sentence2) if s and s in system)
    if not shown:
        raise ConfigError(f"prompts/templates/{template.name}.j2: the prompt shows none of its {len(examples)} "
                          "examples, so the copied_example check has nothing to compare a generation with; render "
                          "them ({% for e in examples %}…{% endfor %}), or set validation.copied_example to false.")
    return shown
