"""Stage 2's other source of contexts: the LLM writes (c<, c>) around a sentence — contexts the sentence fits by
construction, in genres a fixed corpus may lack (STS-B is ~40 % captions and forums; the default corpus is
Wikipedia and news).

Per sentence: one request per (genre, draw) (`prompts/templates/context-writer.v1.j2`), sampled with a seed of
its own, sent through stage 1's client (response cache, limiter, retries: a re-run pays for nothing twice). Each
answer is parsed (`Before: …` / `After: …`) and checked: a missing or malformed side is `context_garbled`, a side that
repeats the sentence (it contains it, or shares most of its words) is `context_copied`, and the Jaccard diversity
rule of the retrieved contexts (on c<) rejects `context_not_diverse`; a failed call is `llm_error`. Rejected
answers go to the stage's quarantine with their reason and raw text; the accepted ones become rows of the same
contexts.parquet schema (doc_id `generated`, chunk `generated|<genre>|<draw>`, negative context ids from a content
hash so they never meet a corpus context's id).
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from models.coherence import tokenize
from tasks.core.config import LLMSettings
from tasks.core.store import fingerprint
from tasks.llm.client import CallResult, LLMClient
from tasks.llm.prompting import load_template
from tasks.retrieve.contexts import jaccard
from tasks.retrieve.settings import ContextSourceSettings

TEMPLATE = ("context", "writer")
PARSER_VERSION = "context-parser-v2"  # in stage 2's key: a new reading of the same cached answers re-runs the stage
_SIDE = re.compile(r"^\s*\**\s*(before|after)\s*\**\s*:\s*\**\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def writer_template():
    return load_template(*TEMPLATE)


def context_requests(sentences: list[str], settings: ContextSourceSettings) -> list[dict]:
    """One request per (sentence, genre, draw): its messages, sampling parameters and seed."""
    template = writer_template()
    out = []
    for sentence in sentences:
        for genre in settings.genres:
            system = template.render(genre=genre)
            for draw in range(settings.draws_per_genre):
                seed = int(fingerprint([settings.seed, sentence, genre, draw])[:8], 16)
                out.append({"sentence": sentence, "genre": genre, "draw": draw,
                            "messages": [{"role": "system", "content": system}, {"role": "user", "content": sentence}],
                            "params": {"temperature": settings.temperature, "max_tokens": settings.max_tokens,
                                       "seed": seed}})
    return out


def parse_context(text: str | None) -> tuple[str | None, str | None]:
    """(c<, c>) from an answer's `Before:` / `After:` lines (the first of each); None for a side that is missing.
    Small models often drop the first label: an unlabeled first line followed by an `After:` line, or exactly two
    unlabeled lines, are read as (c<, c>)."""
    sides: dict[str, str] = {}
    for name, value in _SIDE.findall(text or ""):
        sides.setdefault(name.lower(), value.strip().strip('"'))
    lines = [line.strip().strip('"') for line in (text or "").splitlines() if line.strip()]
    if "before" not in sides and lines and not _SIDE.match(lines[0]):
        if "after" in sides or (len(lines) == 2 and not _SIDE.match(lines[1])):
            sides["before"] = lines[0]
            sides.setdefault("after", lines[1] if len(lines) > 1 else "")
    return sides.get("before") or None, sides.get("after") or None


def check_context(sentence: str, left: str | None, right: str | None, settings: ContextSourceSettings
                  ) -> tuple[str, str] | None:
    """(reason, detail) when the answer is not a usable context, else None."""
    if left is None or right is None:
        return "context_garbled", f"missing the {'Before' if left is None else 'After'} line"
    words = set(tokenize(sentence))
    for name, side in (("c<", left), ("c>", right)):
        n = len(side.split())
        if not settings.min_words <= n <= settings.max_words:
            return "context_garbled", f"{name} has {n} words (allowed {settings.min_words}–{settings.max_words})"
        norm = " ".join(sentence.lower().split())
        if norm in " ".join(side.lower().split()):
            return "context_copied", f"{name} contains the sentence"
        overlap = jaccard(words, set(tokenize(side)))
        if overlap >= settings.max_copy_jaccard:
            return "context_copied", f"{name} shares {overlap:.2f} of its words with the sentence (max " \
                                     f"{settings.max_copy_jaccard})"
    return None


def context_id(sentence: str, left: str, right: str) -> int:
    """Negative, from a content hash: never equal to a corpus context's id (0, 1, 2, …)."""
    return -int(fingerprint([sentence, left, right])[:15], 16) - 1


def generated_contexts(requests: list[dict], results: list[CallResult], settings: ContextSourceSettings,
                       sentence_ids: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accepted contexts (contexts.parquet columns, rank in request order per sentence) and rejected answers."""
    rows, rejected = [], []
    accepted_left: dict[str, list[set[str]]] = {}
    for req, result in zip(requests, results):
        sentence = req["sentence"]
        base = {"sentence_id": sentence_ids[sentence], "sentence": sentence}
        where = f"genre '{req['genre']}', draw {req['draw']}"
        if not result.ok:
            rejected.append(base | {"reason": "llm_error", "detail": f"{where}: {result.error}"})
            continue
        left, right = parse_context(result.text)
        problem = check_context(sentence, left, right, settings)
        if problem is None:
            tokens = set(tokenize(left))
            if any(jaccard(tokens, other) >= settings.max_jaccard for other in accepted_left.get(sentence, [])):
                problem = ("context_not_diverse", f"c< within Jaccard {settings.max_jaccard} of an accepted one")
        if problem is not None:
            rejected.append(base | {"reason": problem[0], "detail": f"{where}: {problem[1]}; answer: "
                                    f"{(result.text or '')[:300]!r}"})
            continue
        accepted_left.setdefault(sentence, []).append(tokens)
        rows.append(base | {"context_id": context_id(sentence, left, right), "chunk_id":
                            f"generated|{req['genre']}|{req['draw']}", "doc_id": "generated", "position": -1,
                            "left": left, "right": right, "screen_score": np.nan, "coherence_score": np.nan,
                            "rank_score": np.nan})
    frame = pd.DataFrame(rows, columns=["sentence_id", "sentence", "context_id", "chunk_id", "doc_id", "position",
                                        "left", "right", "screen_score", "coherence_score", "rank_score"])
    frame["rank"] = frame.groupby("sentence_id", sort=False).cumcount().astype("int32")
    return frame, pd.DataFrame(rejected, columns=["sentence_id", "sentence", "reason", "detail"])


def interleave(retrieved: pd.DataFrame, generated: pd.DataFrame) -> pd.DataFrame:
    """Both sources in one ranking per sentence: retrieved r0, generated g0, r1, g1, … (then the longer one's rest),
    so a sentence's top candidates hold both kinds."""
    both = pd.concat([retrieved.assign(_key=2 * retrieved["rank"]), generated.assign(_key=2 * generated["rank"] + 1)],
                     ignore_index=True).sort_values(["sentence_id", "_key"], kind="stable")
    both["rank"] = both.groupby("sentence_id", sort=False).cumcount().astype("int32")
    return both.drop(columns="_key").reset_index(drop=True)


@task(name="generate-contexts", cache_policy=NO_CACHE)
def generate_contexts(queries: pd.DataFrame, settings: ContextSourceSettings, llm: LLMSettings
                      ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Every query sentence's generated contexts, the rejected answers, and the client's stats."""
    requests = context_requests(queries["sentence"].tolist(), settings)
    client = LLMClient(llm)
    results = asyncio.run(client.complete_many([(r["messages"], r["params"]) for r in requests])) if requests else []
    frame, rejected = generated_contexts(requests, results, settings,
                                         dict(zip(queries["sentence"], queries["sentence_id"])))
    return frame, rejected, {"requests": len(requests), **client.stats.__dict__}
