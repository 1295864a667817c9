"""Corpus sources: each format, filters, reproducible sampling, and clear errors for bad inputs."""

from __future__ import annotations

import json
import zipfile

import pandas as pd
import pytest

from tasks.core.config import ConfigError, CorpusSettings
from tasks.corpus.sentences import document_sentences, load_corpus
from tasks.generate.anchors import AnchorSettings, sample_anchors
from tests.conftest import shared


def test_folder_of_text_files(tiny_corpus):
    corpus = load_corpus(CorpusSettings(source=str(tiny_corpus)))
    assert corpus.stats["documents"] == 3 and corpus.stats["sentences"] == 11
    first = corpus.sentences[corpus.sentences["doc_id"] == "a.txt"]
    assert list(first["position"]) == list(range(5))
    assert first.iloc[3]["text"] == "Engineers inspected the old stone bridge on Monday morning."


def test_zip_parquet_jsonl_equivalent(tiny_corpus, tmp_path):
    texts = {p.name: p.read_text() for p in sorted(tiny_corpus.iterdir())}
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as zf:
        for name, text in texts.items():
            zf.writestr(f"docs/{name}", text)
    pd.DataFrame({"doc_id": list(texts), "text": list(texts.values())}).to_parquet(tmp_path / "c.parquet")
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps({"doc_id": k, "text": v}) for k, v in texts.items()))
    counts = {fmt: load_corpus(CorpusSettings(source=str(tmp_path / f"c.{fmt}"))).stats["sentences"]
              for fmt in ("zip", "parquet", "jsonl")}
    assert counts == {"zip": 11, "parquet": 11, "jsonl": 11}


def test_gensim_source_is_the_old_default():
    corpus = load_corpus(CorpusSettings(source="gensim"))
    assert corpus.stats["documents"] > 400 and corpus.stats["usable"] == 19_278  # the old default: 18,664 until its heading lines were dropped (readers v2)
    assert corpus.inputs[0]["path"].startswith("gensim:") and len(corpus.inputs[0]["sha256"]) == 64
    usable = corpus.usable["text"]
    assert not usable.str.contains(r"\{\{|\[\[|''", regex=True).any()


def test_sampling_is_seeded_distinct_and_prefix_stable(tiny_corpus):
    corpus = load_corpus(CorpusSettings(source=str(tiny_corpus)))
    every = AnchorSettings(filter=False, exclude_eval=[])  # any usable sentence: the sampling alone
    small, _ = sample_anchors(corpus, 3, 7, every)
    big, _ = sample_anchors(corpus, 6, 7, every)
    other, _ = sample_anchors(corpus, 6, 8, every)
    assert list(big["text"][:3]) == list(small["text"]) and big["text"].is_unique
    assert list(other["text"]) != list(big["text"])
    with pytest.raises(ConfigError, match="only .* usable distinct sentences"):
        sample_anchors(corpus, 500, 7, every)


def test_rows_without_text_are_quarantined(tmp_path):
    rows = [{"text": "The harbor reopened after the storm passed over the coast."}, {"text": None}, {"text": ""}]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    corpus = load_corpus(CorpusSettings(source=str(tmp_path / "rows.jsonl")))
    assert corpus.stats["sentences"] == 1
    assert [r["reason"] for r in corpus.rejected] == ["no_text", "no_text"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.txt", None, "does not exist"),
        ("bad.jsonl", '{"text": "ok"}\n{not json\n', r"bad.jsonl, line 2: not valid JSON"),
        ("bad.parquet", "this is not parquet", "not readable Parquet"),
        ("bad.zip", "PK not a zip", "not a valid zip"),
        ("empty.txt", "", "yielded no sentences"),
    ],
)
def test_bad_corpus_files_fail_with_clear_errors(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_corpus(CorpusSettings(source=str(path)))


def test_wrong_text_field(tmp_path):
    pd.DataFrame({"body": ["A sentence here."]}).to_parquet(tmp_path / "x.parquet")
    with pytest.raises(ConfigError, match="no column 'text' .*body.*corpus.text_field"):
        load_corpus(CorpusSettings(source=str(tmp_path / "x.parquet")))


def test_latin1_corpus_is_decoded_and_counted():
    corpus = load_corpus(CorpusSettings(source=str(shared("corpora/abc.zip"))))
    assert corpus.stats.get("latin1_fallback_files", 0) >= 1 and corpus.stats["sentences"] > 20_000


def test_sentence_splitter_keeps_abbreviations():
    text = "Dr. Smith arrived at 5 p.m. on Monday. He met Mr. Jones in the U.S. embassy."
    assert document_sentences(text) == ["Dr. Smith arrived at 5 p.m. on Monday.",
                                        "He met Mr. Jones in the U.S. embassy."]
