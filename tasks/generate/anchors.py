"""Which corpus sentences may be anchors: the ones that read as one complete sentence.

The corpus's usable filter (tasks.corpus.sentences.usable_mask: length, letters, a sentence end, no wiki markup) keeps
sentences that are fine as *context*; an anchor is what a reader sees beside its positive, intermediate and negative,
so stage 1 asks more of it. Each candidate gets the first reason that applies (checked in `REASONS` order), or ""
when it passes; the counts per reason go into stage 1's manifest (`counts.anchor_filter`). Every check is one
vectorized pandas string operation over the whole candidate column — no Python loop over the corpus.

Reasons (what a reading of 100 sampled anchors found, docs/guides/corpus.md):
- `encoding`: replacement characters, control characters or mojibake (â€œ) — the text was damaged before it
  reached us;
- `list_debris`: a bullet, enumerator, a run of separators (;, ·, –), a one-word label before a comma list
  ("Replacements: …, …, …,") or a live blog's time stamp — a list item, not a sentence;
- `lost_words`: a space before punctuation or a double space after a word that needs what follows — a number or
  word lost with removed markup ("a girth of about .");
- `transcript`: a `SPEAKER:` or `Q:` prefix, or a bracketed stage direction;
- `markup`: table, template, link, hashtag, e-mail or URL debris, emphasis markers, a start that is no word;
- `verse`: lines of verse or lyrics run together (two or more capitalised line starts inside the sentence);
- `header`: title-cased or upper-cased words throughout (a headline, a caption, a section title);
- `caption_fragment`: a caption glued to the next sentence ("… Siege of Yorktown In 1776, the Count …"), or a
  "See more at …" / "Photo: …" credit;
- `several_sentences`: a sentence end followed by a new sentence inside the text (the splitter missed it);
- `cut_off`: a last word that cannot end a sentence (a message or line cut off: "… and the family if I.");
- `chat_filler`: chat shorthand and filler (lol, haha, omg, u, im, dont), repeated !!/??, emoticons, or a
  lower-case start (after any quotes or punctuation, not a number: a lower-cased corpus such as the movie dialogs);
- `not_english`: letters mostly outside ASCII, or none of the commonest English function words;
- `too_short` / `too_long`: fewer than `min_words` or more than `max_words` words.

By source, not by text: `contexts_only_source` — every sentence of a named source registered as contexts only
(`CorpusSource.anchors = False`: the movie dialogs, shipped lower-cased; the text rules above let through only their
number-first lines, "12000 feet. jesus, i don't believe …").
"""

from __future__ import annotations

import hashlib
import re
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, field_validator

from tasks.core.config import ConfigError, Settings, key_fields
from tasks.core.store import sentence_id
from tasks.corpus.registry import CONTEXT_ONLY_SOURCES
from tasks.corpus.sentences import Corpus

_ENCODING = r"(?:[\ufffd\x00-\x08\x0b-\x1f\x7f]|â€|Ã[\x80-\xbf]|Â[\x80-\xbf ])"  # replacement, control, mojibake
_MARKUP = r"""(?:[|{}<>\[\]=_*#@^~\\]|https?:|www\.|\.com\b|\.org\b|''|&[a-z]+;|^[^\w"'“‘(])"""
_LIST = (r"(?:^\s*(?:[-–•·*]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s|;.*;|\s[·–]\s.*\s[·–]\s|\d+\s*[-–]\s*\d+\s*[-–]\s*\d+"
         r"|^\w+:\s[^.]*,[^.]*,[^.]*,"  # "Replacements: Priscott for Roberts (71), Green for Dowd (71), …"
         r"|^\d{1,2}[.:]\d{2}\b)")  # a live blog's time stamp: "12.16-- Rutte says …"
# A word or number lost with removed markup: a space before punctuation ("a girth of about ."), or two spaces after a
# word that needs what follows ("claimed title to  of Indiana land").
_LOST = (r"(?:\w\s+[.;,:](?:\s|$)|\b(?:about|around|of|to|is|was|are|were|from|by|at|approximately|nearly|over|"
         r"under|than|some|only|reaches|reached)\s{2,})")
_TRANSCRIPT = (r"(?:^(?:[A-Z][A-Z.'\-]+(?: [A-Z][A-Z.'\-]+){0,3}|Q|A)\s?:\s|"  # "CAMEROTA: ", "MR. SMITH: ", "Q: "
               r"\([^()]*\b(?:laughter|laughs|applause|cheers|inaudible|crosstalk)\b[^()]*\))")
_CAPTION = (r"(?:^(?:see more|photo|image|picture|caption|credit|source|file|pictured)\b|"
            r"[a-z0-9)] (?:In|On|At|During|After|Before|When|While|The|His|Her|Its|Their|This|These|It|He|She|They)"
            r" (?:[a-z0-9]))")
# Capitalised line starts inside a sentence: verse or lyrics run together ("… pilgrim feet Whose stern … beat Across").
_VERSE = r"[a-z,;] (?:And|The|A|An|Whose|Who|With|To|Across|In|Of|But|Or|For|From|That|Where|When|Thy|Thee|O)\b"
# A last word that cannot end a sentence: a message or line cut off mid-sentence ("… the family if I.").
_CUT_OFF = (r"(?i)(?:\b(?:a|an|the|and|or|but|if|to|of|in|on|at|for|with|from|by|my|your|our|their|because|than|as)"
            r"|\b(?:if|and|but|because|when|that|so|or) (?:i|we|you|he|she|they))[.!?]$")
_SEVERAL = r"(?:[a-z]{2,}|\b[IVX]{2,})[.!?][\"'”’)]?\s*[A-Z][a-z]"  # "… Edward II. Edward III …" too
# A lower-case start, after any quotes or punctuation ("'cause i …", "\"well, i …"): chat, or a corpus shipped
# lower-cased (the movie dialogs). Not after a number: "40 people died …", "2015 was …" are sentences.
_CHAT = (r"(?:^[^\w\s]*[a-z]|\b(?:lol|lmao|haha\w*|hehe\w*|omg|u|ur|im|dont|cant|wont|didnt|isnt|ya|yeah|yea|gonna|wanna|"
         r"btw|idk|tbh|xd)\b|[!?]{2,}|\.{3}|[:;]-?[)(dpDP]\b)")
# English function words that are no common word of the other languages seen (Portuguese "a", "do"; Spanish "a").
_FUNCTION_WORDS = r"\b(?:the|an|of|to|in|on|and|is|are|was|were|it|for|with|that|this|have|has|had|you|we|he|she|" \
                  r"they|my|at|by|from|not|but|or|will|can|does|did|i|i'm|it's|me|your|be|if|so|there|what|how)\b"
_TERMINAL_ONLY = re.compile(r"[.!?]['\"”’)]*$")


def _header(texts: pd.Series) -> pd.Series:
    capitalised = texts.str.count(r"(?<![\w'’\-])[A-Z]")
    count = texts.str.count(r"(?<![\w'’\-])[A-Za-z]").clip(lower=1)
    return (capitalised / count >= 0.7) | texts.str.fullmatch(r"[^a-z]+")


def _not_english(texts: pd.Series) -> pd.Series:
    # Letters outside ASCII over all letters (counted only where the text has any non-ASCII character: most have none)
    foreign = texts.str.contains(r"[^\x00-\x7f]", regex=True)
    share = pd.Series(0.0, index=texts.index)
    if foreign.any():
        some = texts[foreign]
        share[foreign] = some.str.count(r"[^\W\d_A-Za-z]") / some.str.count(r"[^\W\d_]").clip(lower=1)
    return (share > 0.1) | ~texts.str.contains(_FUNCTION_WORDS, regex=True, case=False)


def reason_checks(min_words: int, max_words: int) -> dict[str, Callable[[pd.Series], pd.Series]]:
    """reason → a vectorized check (a boolean Series: True = rejected for that reason), in the order applied."""
    words = lambda t: t.str.count(r"\S+")  # noqa: E731
    return {
        "too_short": lambda t: words(t) < min_words,
        "too_long": lambda t: words(t) > max_words,
        "encoding": lambda t: t.str.contains(_ENCODING, regex=True),
        "list_debris": lambda t: t.str.contains(_LIST, regex=True),
        "transcript": lambda t: t.str.contains(_TRANSCRIPT, regex=True),
        "markup": lambda t: t.str.contains(_MARKUP, regex=True, case=False),
        "lost_words": lambda t: t.str.contains(_LOST, regex=True),
        "caption_fragment": lambda t: t.str.contains(_CAPTION, regex=True) | t.str.lower().str.contains(
            r"^(?:see more|photo|image|picture|caption|credit|file|pictured)\b", regex=True),
        "verse": lambda t: t.str.count(_VERSE) >= 2,
        "header": _header,
        "several_sentences": lambda t: t.str.contains(_SEVERAL, regex=True),
        "cut_off": lambda t: t.str[-24:].str.contains(_CUT_OFF, regex=True),  # the end is all it reads
        "chat_filler": lambda t: t.str.contains(_CHAT, regex=True),
        "not_english": _not_english,
        "no_sentence_end": lambda t: ~t.str.contains(_TERMINAL_ONLY, regex=True),
    }


REASONS = tuple(reason_checks(1, 1))


def anchor_rejections(texts: pd.Series, min_words: int = 6, max_words: int = 40) -> pd.Series:
    """For each text, the first reason it is not an anchor, or "" when it reads as one sentence."""
    reasons = pd.Series("", index=texts.index, dtype=object)
    pending = pd.Series(True, index=texts.index)
    for reason, check in reason_checks(min_words, max_words).items():
        if not pending.any():
            break
        hit = pd.Series(False, index=texts.index)
        hit[pending] = check(texts[pending]).fillna(True).astype(bool)
        reasons[hit] = reason
        pending &= ~hit
    return reasons


class AnchorSettings(Settings):
    """Which corpus sentences stage 1 samples as anchors, and from which sources in what shares."""

    filter: bool = Field(True, description="Sample only sentences that read as one complete sentence (the rules of "
                         "tasks/generate/anchors.py); False: any usable corpus sentence.")
    min_words: int = Field(6, ge=1, description="Fewer words: too_short.")
    max_words: int = Field(40, ge=1, description="More words: too_long (a long anchor gives long, loose rewrites).")
    mix: dict[str, float] | None = Field(
        None, description="Share of anchors per corpus source (source name → weight, normalised; a source left out "
        "gets none), e.g. {\"news2017\": 2, \"chitchat\": 1}. None: every source of the corpus the same share (a "
        "source with too few candidates gives what it has)")
    exclude_eval: list[str] = Field(
        ["stsb-dev", "stsb-test"], description="Evaluation sets whose sentences are never anchors (exact match after "
        "lower-casing and spacing; build-dataset's n-gram and embedding checks come on top)")

    @field_validator("mix")
    @classmethod
    def _positive_shares(cls, mix):
        if mix is not None and (not mix or any(w < 0 for w in mix.values()) or not any(w > 0 for w in mix.values())):
            raise ValueError("anchor mix needs at least one source with a positive weight and no negative weight")
        return mix


def _normalized(texts: pd.Series) -> pd.Series:
    # Not decontamination's `normalized` ("don't" → "dont", not "don t"): this one picks stage 1's sources, so a change
    # would change which sentences a resumed or re-grown run takes (build-dataset's checks come on top).
    return texts.str.lower().str.replace(r"[^\w\s]", "", regex=True).str.split().str.join(" ")


def evaluation_texts(sources: list[str]) -> frozenset[str]:
    """The normalised sentences of the evaluation sets (stsb-dev / stsb-test / a SICK file / a SemEval folder)."""
    from tasks.core.sts_data import read_sts_source

    texts = [read_sts_source(s)[c] for s in sources for c in ("s1", "s2")]
    return frozenset(_normalized(pd.concat(texts, ignore_index=True).astype(str))) if texts else frozenset()


def seeded_uniform(ids: pd.Series, seed: int, salt: str = "") -> np.ndarray:
    """A uniform draw in [0, 1) per id that depends only on (id, seed): a candidate keeps its draw whatever else is in
    the candidate set, so a filter change moves only the candidates it rejects (pandas' vectorized hash, no loop)."""
    hashed = pd.util.hash_pandas_object(ids.astype(str) + f"|{seed}|{salt}", index=False).to_numpy()
    return (hashed >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def interleave_keys(sources: pd.Series, ids: pd.Series, mix: dict[str, float], seed: int) -> np.ndarray:
    """A sort key per candidate that interleaves the sources in proportion to their weights, independent of how many
    are taken: candidate j (in a seeded order within its source) of a source with weight w gets (j + u) / w,
    u ~ U(0, 1). Sorting by it and taking the first n gives about n·w/Σw of each source, and the sample for n is a
    prefix of the one for any larger n. Weight 0 (or a source not in the mix): never sampled (key inf)."""
    order = pd.Series(seeded_uniform(ids, seed, "order"), index=sources.index)
    rank = order.groupby(sources.to_numpy()).rank(method="first").to_numpy() - 1
    weights = sources.map(mix).fillna(0.0).to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(weights > 0, (rank + seeded_uniform(ids, seed, "jitter")) / weights, np.inf)


def _verdicts(texts: pd.Series, settings: AnchorSettings) -> pd.DataFrame:
    reasons = anchor_rejections(texts, settings.min_words, settings.max_words) if settings.filter else \
        pd.Series("", index=texts.index, dtype=object)
    if settings.exclude_eval:
        in_eval = _normalized(texts).isin(evaluation_texts(settings.exclude_eval))
        reasons = reasons.mask((reasons == "") & in_eval, "in_evaluation_set")
    return pd.DataFrame({"reason": reasons.astype(str), "source_id": texts.map(sentence_id)})


def candidate_verdicts(texts: pd.Series, settings: AnchorSettings) -> tuple[pd.Series, pd.Series]:
    """(reason or "", source id) per candidate text. Computed once per candidate list, filter settings and filter
    code (~30 s over the default corpus's 444k sentences), then read from $STSGEN_HOME/anchors/<key>.parquet (~1 s)."""
    import inspect
    import sys

    from tasks.core.home import stsgen_home
    from tasks.core.store import fingerprint, write_parquet

    content = pd.util.hash_pandas_object(texts, index=False).to_numpy().tobytes()
    key = fingerprint([hashlib.sha256(content).hexdigest(), key_fields(settings),
                       inspect.getsource(sys.modules[__name__])])
    path = stsgen_home() / "anchors" / f"{key[:32]}.parquet"
    if path.is_file():
        try:
            cached = pq.read_table(path).to_pandas()
        except (OSError, pa.ArrowException):
            cached = None  # a damaged cache file is computed again
        if cached is not None and len(cached) == len(texts):
            return pd.Series(cached["reason"].to_numpy(), index=texts.index), \
                pd.Series(cached["source_id"].to_numpy(), index=texts.index)
    verdicts = _verdicts(texts, settings)
    write_parquet(path, pa.Table.from_pandas(verdicts, preserve_index=False))
    return verdicts["reason"], verdicts["source_id"]


def sample_anchors(corpus: Corpus, n: int, seed: int, settings: AnchorSettings,
                   exclude: frozenset[str] = frozenset()) -> tuple[pd.DataFrame, dict]:
    """n distinct anchors: usable corpus sentences that pass the anchor filter and are in no evaluation set, none
    whose id is in `exclude`, drawn across the corpus's sources by `settings.mix`. Returns the sample (source_id,
    source, doc_id, position, text) and the counts for the manifest (candidates, rejected by reason, per source)."""
    usable = corpus.usable.drop_duplicates("text").reset_index(drop=True)
    counts: dict = {"usable_distinct": len(usable), "duplicate_texts": int(len(corpus.usable) - len(usable))}
    reasons, ids = candidate_verdicts(usable["text"], settings)
    # A source registered as contexts only (tasks/corpus/registry.py: shipped lower-cased, so a reader cannot
    # tell a name from a word; the text rules catch all but its number-first lines) gives no anchor.
    reasons = reasons.mask((reasons == "") & usable["source"].isin(CONTEXT_ONLY_SOURCES), "contexts_only_source")
    if exclude:
        reasons = reasons.mask((reasons == "") & ids.isin(exclude), "used_by_earlier_run")
    counts["rejected_by_reason"] = {k: int(v) for k, v in reasons[reasons != ""].value_counts().items()}
    kept = usable[reasons == ""].assign(source_id=ids[reasons == ""]).reset_index(drop=True)
    present = list(dict.fromkeys(kept["source"]))
    mix = settings.mix if settings.mix is not None else {s: 1.0 for s in present}
    unknown = sorted(set(mix) - set(usable["source"]))
    if unknown:
        raise ConfigError(f"anchors.mix names {', '.join(unknown)}, not a source of this corpus (its sources: "
                          f"{', '.join(dict.fromkeys(usable['source']))}); fix the mix or the corpus.")
    keys = interleave_keys(kept["source"], kept["source_id"], mix, seed)
    available = int(np.isfinite(keys).sum())
    if n > available:
        rejected = {k: v for k, v in counts["rejected_by_reason"].items() if k != "used_by_earlier_run"}
        raise ConfigError(
            f"Asked for n={n} anchors but the corpus has only {available} usable distinct sentences that pass the "
            "anchor filter" + (f" (rejected by reason: {rejected})" if rejected else "")
            + (f", in the sources of anchors.mix {settings.mix}" if settings.mix else "")
            + (f" and that earlier runs of this dataset have not used ({len(exclude)} used)" if exclude else "")
            + "; lower n, widen anchors.mix, or use a larger corpus.")
    sample = kept.iloc[np.argsort(keys, kind="stable")[:n]].reset_index(drop=True)
    counts |= {"candidates": available, "sampled_by_source": {k: int(v) for k, v in
                                                              sample["source"].value_counts().items()}}
    columns = ["source_id", "source", "doc_id", "position", "text"]
    return sample[columns], counts
