"""The role check (issue 34, "who does what"): does a positive keep the anchor's actions and who does them?

No maintained dependency parser installs offline here (spaCy's PyPI model mirrors stop at spaCy 2.2, which does not
build on Python 3.11; stanza, UDPipe and trankit download their models at run time; TextBlob's copy of pattern ships
the chunker without its relation finder), so the LLM lists them: one request per positive asks for
"subject | verb | object" lines of the anchor (A) and of the positive (B) (prompts/templates/roles.v1.j2), and
`role_verdict` compares the two lists with the run's encoder:

- each of the anchor's actions is matched to the positive's action most like it: the mean cosine of subject to
  subject, verb to verb and object to object (an action without object on either side: subject and verb only);
- the positive keeps the actions when every anchor action has a match at or above `min_match`, and no match is a
  swap — the anchor's subject closer to the positive's object and its object closer to the positive's subject than
  each to its own role ("Whig and Tory positions swapped", "who told whom").

A positive that fails is quarantined as `role_changed` with the action it lost; an answer with no list for A or B
is asked again (sampled) up to `attempts` times, then quarantined as `role_unparsed`; a failed call as
`role_llm_error` (the slot ends there, like the judge's). Answers go through the response cache like every call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Callable

import numpy as np

from tasks.generate.verification import JudgeTemplate
from tasks.llm.client import CallResult
from tasks.llm.local_models import load_encoder

ROLE_TEMPLATE = "roles.v1"
NO_OBJECT = "-"
_SECTION = re.compile(r"^\s*\**\s*(?:sentence\s+)?([AB])\s*\**\s*:\s*(.*)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

Action = tuple[str, str, str]  # (subject, verb, object or "-")


@dataclass(frozen=True)
class RoleVerdict:
    reason: str | None  # None (kept), role_changed, role_unparsed, role_llm_error
    detail: str
    score: float | None  # the weakest anchor action's best match (None: no lists)
    calls: int


def role_template() -> JudgeTemplate:
    """The role question, as a judge's question is held (its {{ anchor }} / {{ candidate }} messages and sha256)."""
    source = resources.files("prompts").joinpath("templates", f"{ROLE_TEMPLATE}.j2").read_text(encoding="utf-8")
    return JudgeTemplate("roles", ROLE_TEMPLATE, source)


def role_params(attempt: int, seed: int) -> dict:
    # Greedy first; a re-ask after an answer without lists samples (else the cache would return the same answer).
    return {"temperature": 0.0 if attempt == 0 else 0.7, "max_tokens": 160, "seed": seed + attempt}


def _action(line: str) -> Action | None:
    fields = [f.strip(" .`*\"'") for f in _BULLET.sub("", line).split("|")]
    if len(fields) == 2:
        fields.append(NO_OBJECT)
    if len(fields) != 3 or fields[0] in ("", NO_OBJECT) or fields[1] in ("", NO_OBJECT):
        return None  # an action needs a doer and a verb
    return fields[0].lower(), fields[1].lower(), (fields[2] or NO_OBJECT).lower()


def parse_roles(text: str | None) -> tuple[list[Action], list[Action]] | None:
    """The answer's (A's actions, B's actions), or None when either list is empty. Lines before the first "A:" and
    after the lists (explanations) are ignored; an action may follow its section's "A:" on the same line."""
    lists: dict[str, list[Action]] = {"A": [], "B": []}
    section = None
    for line in (text or "").splitlines():
        head = _SECTION.match(line)
        if head:
            section, line = head.group(1).upper(), head.group(2)
        if section is None or "|" not in line:
            continue
        action = _action(line)
        if action is not None:
            lists[section].append(action)
    return (lists["A"], lists["B"]) if lists["A"] and lists["B"] else None


def role_verdict(anchor_actions: list[Action], candidate_actions: list[Action],
                 encode: Callable[[list[str]], np.ndarray], min_match: float) -> tuple[bool, str, float]:
    """(the positive keeps the anchor's actions, the detail, the weakest anchor action's best match). `encode` gives
    unit-norm embeddings (the run's encoder); every phrase is encoded once, in one batch."""
    phrases = sorted({p for action in (*anchor_actions, *candidate_actions) for p in action if p != NO_OBJECT})
    vectors = np.asarray(encode(phrases), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sim = dict(zip(phrases, range(len(phrases))))
    gram = vectors @ vectors.T

    def cos(a: str, b: str) -> float:
        return float(gram[sim[a], sim[b]])

    def match(x: Action, y: Action) -> tuple[float, float]:
        """(straight, crossed): roles compared in place, and with subject and object exchanged."""
        if NO_OBJECT in (x[2], y[2]):
            straight = (cos(x[0], y[0]) + cos(x[1], y[1])) / 2
            return straight, -1.0
        straight = (cos(x[0], y[0]) + cos(x[1], y[1]) + cos(x[2], y[2])) / 3
        crossed = (cos(x[0], y[2]) + cos(x[1], y[1]) + cos(x[2], y[0])) / 3
        return straight, crossed

    weakest, detail = 1.0, ""
    for action in anchor_actions:
        scores = [match(action, other) for other in candidate_actions]
        best = max(range(len(scores)), key=lambda j: scores[j][0])
        straight, crossed = scores[best]
        if crossed > straight:  # the best match has the anchor's doer and undergoer exchanged
            return False, (f"roles swapped: A '{' | '.join(action)}' vs B '{' | '.join(candidate_actions[best])}'"), \
                round(min(weakest, straight), 4)
        if straight < weakest:
            weakest, detail = straight, f"A '{' | '.join(action)}' best matched by B " \
                                        f"'{' | '.join(candidate_actions[best])}' ({straight:.2f})"
    kept = weakest >= min_match
    return kept, (detail if not kept else f"every action kept (weakest match {weakest:.2f})"), round(weakest, 4)


def verdict_of(results: list[CallResult], encode, min_match: float, attempts: int) -> RoleVerdict | None:
    """The verdict after the calls so far; None when the last answer had no lists and attempts remain."""
    last = results[-1]
    if not last.ok:
        return RoleVerdict("role_llm_error", last.error or "", None, len(results))
    lists = parse_roles(last.text)
    if lists is None:
        if len(results) < attempts:
            return None
        return RoleVerdict("role_unparsed", f"{len(results)} answers without both lists, last "
                           f"{(last.text or '')[:120]!r}", None, len(results))
    try:
        kept, detail, score = role_verdict(*lists, encode, min_match)
    except (KeyError, ValueError, IndexError) as exc:  # lists the comparison cannot read: as good as none
        return RoleVerdict("role_unparsed", f"lists not comparable ({type(exc).__name__}: {exc})", None, len(results))
    return RoleVerdict(None if kept else "role_changed", detail, score, len(results))


async def check_roles(call, template: JudgeTemplate, anchor: str, candidate: str, encode, min_match: float,
                      attempts: int, seed: int) -> RoleVerdict:
    """Ask until both lists come back (or `attempts` calls); `call` is an LLMClient.open() caller."""
    messages, results = template.messages(anchor, candidate), []
    while True:
        results.append(await call(messages, role_params(len(results), seed)))
        verdict = verdict_of(results, encode, min_match, attempts)
        if verdict is not None:
            return verdict


@dataclass(frozen=True)
class RoleCheck:
    """The role check of positives (tasks/generate/roles.py): its question, the encoder that compares the lists, the
    match it needs, the asks per positive and the run's seed. It goes to the judge's endpoint."""

    template: JudgeTemplate
    encoder: str
    min_match: float
    attempts: int
    seed: int

    async def verdict(self, call, anchor: str, candidate: str) -> RoleVerdict:
        model = load_encoder(self.encoder)  # loaded before the request loop (stage.generate_triples)
        return await check_roles(call, self.template, anchor, candidate,
                                 lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True),
                                 self.min_match, self.attempts, self.seed)
