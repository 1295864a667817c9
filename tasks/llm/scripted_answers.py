"""The scripted server's answers: deterministic pseudo-sentences that pass stage 1's rules and depend only on (kind of
prompt, user text, seed), and how it recognises a request's kind (tasks/llm/scripted_server.py serves them)."""

from __future__ import annotations

import hashlib

VOCAB = (
    "river market council winter engine garden signal harbor teacher museum valley station report league "
    "forest bridge captain orchard village theory painter doctor ocean mountain library festival farmer "
    "company program season island railway senate concert planet soldier"
).split()


# The server's own notion of a sentence's facts, deliberately not the production rule (tasks/generate/facts.py): a
# superset — every token with a digit or a capital, every number and calendar word — so the positives it writes keep
# whatever the production rule counts, and a flow test sees that rule's verdicts instead of its own echo.
_FACT_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty "
                        "hundred thousand million billion january february march april may june july august "
                        "september october november december monday tuesday wednesday thursday friday saturday "
                        "sunday".split())


def fact_tokens(text: str) -> list[str]:
    """The tokens of `text` a positive copies so that it keeps the anchor's numbers, names and dates."""
    tokens = [t.strip(".,;:!?()\"'") for t in text.split()]
    return sorted({t for t in tokens if t and (any(c.isdigit() or c.isupper() for c in t) or t.lower() in _FACT_WORDS)})


def is_judge_request(messages: list[dict]) -> bool:
    return messages[-1]["content"].rstrip().endswith("Answer yes or no.")


def prompt_kind(system: str) -> str:
    s = system.lower()
    if "omitting" in s:
        return "intermediate"
    if "distinct or even contradictory" in s or "contradiction" in s or "something different" in s \
            or "nothing to do with" in s:
        return "negative"
    return "positive"


def pseudo_sentence(*parts: object, words: int) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    picked = [VOCAB[b % len(VOCAB)] for b in digest[:words]]
    return " ".join(picked).capitalize() + "."


def default_responder(messages: list[dict], body: dict) -> str:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if is_judge_request(messages):  # the stage-1 verifier's question: every generation passes
        return "no" if "mean the same thing?" in user else "yes"
    kind = prompt_kind(system)
    n_words = {"positive": 10, "intermediate": 5, "negative": 8}[kind]
    choice = [body["choice"]] if body.get("choice") else []  # the 2nd, 3rd … of `n` choices differ
    text = pseudo_sentence(kind, user, body.get("seed"), body.get("temperature"), *choice, words=n_words)
    if kind == "positive":  # a positive keeps the anchor's numbers, names and dates (stage 1's fact rules)
        text = " ".join([text[:-1], *fact_tokens(user)]) + "."
    return text
