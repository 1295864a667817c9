"""sts-pipeline checks the links between its stages before stage 1 starts: every column a stage declares it reads
(`IO.reads`) is written by a stage before it in the pipeline's order, or one error names the stage and the column —
before any LLM call, with nothing written."""

from __future__ import annotations

import dataclasses

import pytest

from tasks import pipeline
from tasks.core.config import ConfigError, LLMSettings
from tasks.generate.settings import GenerateSettings
from tasks.pipeline import PIPELINE_STAGES, check_links


def with_io(stage: str, **changes) -> tuple:
    """The pipeline's stages, `stage`'s IO changed (dataclasses.replace)."""
    return tuple((name, dataclasses.replace(io, **changes) if name == stage else io) for name, io in PIPELINE_STAGES)


def test_the_pipelines_stages_link():
    assert [name for name, _ in PIPELINE_STAGES] == ["generate-sts-triples", "retrieve-contexts", "label-pairs",
                                                     "report-patterns", "build-dataset", "train-surrogate"]
    check_links()


def test_a_read_column_no_earlier_stage_writes_is_named():
    reads = dict(PIPELINE_STAGES[2][1].reads)
    reads["generate-sts-triples/triples.parquet"] += ("rationale",)
    stages = with_io("label-pairs", reads=reads)
    with pytest.raises(ConfigError, match=r"stage label-pairs reads generate-sts-triples/triples\.parquet column\(s\) "
                                          r"rationale \(generate-sts-triples writes no such column\)"):
        check_links(stages)


def test_a_table_read_before_its_stage_runs_is_named():
    label, retrieve = PIPELINE_STAGES[2], PIPELINE_STAGES[1]
    stages = (PIPELINE_STAGES[0], label, retrieve, *PIPELINE_STAGES[3:])  # label before the contexts are written
    with pytest.raises(ConfigError, match=r"stage label-pairs reads retrieve-contexts/contexts\.parquet .*no stage "
                                          r"before label-pairs writes retrieve-contexts/contexts\.parquet"):
        check_links(stages)


def test_the_pipeline_refuses_a_broken_link_before_stage_1(prefect_harness, scripted, tmp_path, monkeypatch):
    from flows.sts_pipeline import sts_pipeline

    broken = with_io("train-surrogate", reads={**PIPELINE_STAGES[5][1].reads,
                                               "build-dataset/pairs.parquet": ("s1", "s2", "label", "weight")})
    monkeypatch.setattr(pipeline, "PIPELINE_STAGES", broken)
    out = tmp_path / "outputs"
    with pytest.raises(ConfigError, match=r"stage train-surrogate reads build-dataset/pairs\.parquet column\(s\) weight"):
        sts_pipeline(generate=GenerateSettings(n=2), llm=LLMSettings(base_url=scripted.base_url, model="scripted-model",
                                                                     cache_path=str(tmp_path / "llm.sqlite")),
                     output_dir=str(out), run="auto")
    assert scripted.chat_requests() == [] and not out.exists() and not (tmp_path / "llm.sqlite").exists()
