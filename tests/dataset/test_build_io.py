"""build-dataset goes through the same IO check as the other stages (StageIO.check_written, which run_stage makes):
a build that writes a column its IO does not declare fails before any version is committed; runs written by older
code (a column added or dropped since) still build, in the declared columns."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pyarrow as pa
import pytest

from flows.build_dataset import build_dataset
from tasks.contracts import TRIPLES_SCHEMA
from tasks.dataset import build
from tests.dataset.test_build_dataset import NGRAMS_ONLY, make_run


def test_a_build_writing_an_undeclared_column_fails_and_commits_nothing(prefect_harness, scripted, tiny_corpus,
                                                                        tmp_path, monkeypatch):
    make_run(scripted, tmp_path, tiny_corpus, "r1", 3)
    real_select = build.select

    def select_with_a_debug_column(job):
        chosen = real_select(job)
        note = pa.array(["kept"] * chosen.triples.num_rows, pa.string())
        return dataclasses.replace(chosen, triples=chosen.triples.append_column("debug_note", note))

    monkeypatch.setattr(build, "select", select_with_a_debug_column)
    with pytest.raises(RuntimeError, match=r"build-dataset wrote triples\.parquet with columns its IO\.writes does "
                                           r"not declare \(debug_note\)"):
        build_dataset(runs_dir=str(tmp_path / "runs"), settings=NGRAMS_ONLY, output_dir=str(tmp_path / "ds"))
    assert not list((tmp_path / "ds").glob("ds-*")) and not (tmp_path / "ds" / "latest").exists()


def test_runs_of_older_code_are_united_in_the_declared_columns():
    row = {name: None for name in TRIPLES_SCHEMA.names} | {"source_id": "s1", "anchor": "A."}
    current = pa.Table.from_pylist([row], schema=TRIPLES_SCHEMA)
    older = current.drop_columns(["judge_model"]).append_column("retired", pa.array(["x"]))  # one added, one dropped
    union = build.union_triples([SimpleNamespace(name="old", triples=older),
                                 SimpleNamespace(name="new", triples=current)])
    assert tuple(union.column_names) == build.IO.writes["triples.parquet"]
    assert union.column("run").to_pylist() == ["old", "new"] and union.column("judge_model").null_count == 2
