"""A corpus prepared once: the screening index and the coherence model built by the prepare-corpus flow are what
stage 2 then reads (nothing rebuilt, the same folders, files untouched); a change of corpus builds anew; the
per-source table reaches the report."""

from __future__ import annotations

from pathlib import Path

from tasks.core.config import CorpusSettings
from tasks.retrieve.coherence import CoherenceSettings
from tasks.retrieve.prepared_corpus import prepare_corpus, summary
from tasks.retrieve.retrieval import SelectionSettings
from tasks.retrieve.settings import RetrieveSettings
from tests.core.corpus_fixtures import use_fixture_archives
from tests.retrieve.test_retrieval import SMALL_MODEL


def _stamps(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_second_preparation_rebuilds_nothing(topic_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))
    settings = RetrieveSettings(corpora=[CorpusSettings(source=str(topic_corpus))], coherence=SMALL_MODEL,
                                selection=SelectionSettings(screen_k=50))
    first = prepare_corpus(settings)
    assert not first.index_reused and not first.trained.reused
    index_files, model_files = _stamps(first.index_dir), _stamps(first.trained.folder)
    second = prepare_corpus(settings)
    assert second.index_reused and second.trained.reused
    assert (second.index_dir, second.trained.folder) == (first.index_dir, first.trained.folder)
    assert _stamps(second.index_dir) == index_files and _stamps(second.trained.folder) == model_files
    manifest = second.index_manifest
    assert manifest["contexts"] == len(first.contexts) and manifest["peak_memory_mb"] > 0
    assert manifest["build_s"] >= manifest["fit_s"] >= 0

    changed = prepare_corpus(settings.model_copy(update={"coherence": SMALL_MODEL.model_copy(update={"epochs": 2})}))
    assert changed.index_reused and not changed.trained.reused  # another model, the same index


def test_the_stage_reads_what_prepare_corpus_built(topic_corpus, tmp_path, monkeypatch, prefect_harness):
    from flows.prepare_corpus import prepare_corpus as prepare_flow
    from tasks.retrieve.stage import prepare_retrieval

    monkeypatch.setenv("STSGEN_HOME", str(tmp_path / "home"))
    settings = RetrieveSettings(corpora=[CorpusSettings(source=str(topic_corpus))], coherence=SMALL_MODEL,
                                selection=SelectionSettings(screen_k=50))
    report = prepare_flow(settings=settings)
    assert not report["index_reused"] and not report["coherence_reused"]
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("The river flooded the town after the rain.\n")
    job = prepare_retrieval(str(sentences), settings)
    assert str(job.index_dir) == report["index"] and str(job.trained.folder) == report["coherence_model"]
    assert job.trained.reused


def test_per_source_table_in_the_report(tmp_path, monkeypatch):
    use_fixture_archives(monkeypatch, tmp_path / "home")
    settings = RetrieveSettings(corpora=[CorpusSettings(source="news2017+bbc+wiki-leads")],
                                coherence=CoherenceSettings(encoder="bilstm", max_train_contexts=10, epochs=1, hidden=8,
                                                            embedding_dim=8, batch_size=4, word2vec_epochs=1),
                                selection=SelectionSettings(screen_k=5))
    report = summary(prepare_corpus(settings))
    rows = {r["source"]: r for r in report["sources"]}
    assert set(rows) == {"news2017", "bbc", "wiki-leads"}
    assert rows["bbc"]["documents"] == 3 and rows["bbc"]["licence"] == "research dataset, © BBC"
    assert report["coherence_train_examples"] > 0 and 0 <= report["coherence_roc_auc"] <= 1


def test_a_reader_change_on_the_same_archives_builds_anew(tmp_path, monkeypatch):
    """The same package files read into other sentences (here: wiki heading lines kept, as before readers v2) must
    not reuse the index built on the old sentences: its rows would no longer match the context windows."""
    import tasks.corpus.cleaning as cleaning_module
    import tasks.corpus.sentences as sentences_module

    use_fixture_archives(monkeypatch, tmp_path / "home")
    settings = RetrieveSettings(corpora=[CorpusSettings(source="wiki-sections+bbc")],
                                coherence=CoherenceSettings(encoder="bilstm", max_train_contexts=10, epochs=1, hidden=8,
                                                            embedding_dim=8, batch_size=4, word2vec_epochs=1),
                                selection=SelectionSettings(screen_k=5))
    first = prepare_corpus(settings)
    monkeypatch.setattr(cleaning_module, "drop_wiki_headings", lambda text: text)
    monkeypatch.setattr(sentences_module, "READERS_VERSION", "readers-under-test")  # the sentence cache's key moves too
    second = prepare_corpus(settings)
    assert second.inputs == first.inputs  # the same archives …
    assert len(second.sentences) != len(first.sentences) or \
        second.sentences["text"].tolist() != first.sentences["text"].tolist()  # … other sentences
    assert not second.index_reused and not second.trained.reused
    assert second.index_dir != first.index_dir and second.corpus_key != first.corpus_key
