"""(b) The pipeline process is SIGKILLed mid-stage — during stage 1 (LLM calls in flight) or stage 3 (contexts being
scored) — and re-run: it resumes, redoes no finished work (LLM requests and scored sentence–context pairs are
counted), and ends with the undisturbed run's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.llm.server import free_port
from tests.faults.conftest import cached_answers, spec, stage_table
from tests.faults.processes import ScriptedServerProcess, finish, pipeline_process, run_until


def label_manifest(outputs: dict) -> dict:
    return json.loads(Path(outputs["label-pairs"]["manifest"]).read_text())


def shard_scores(work: Path) -> int:
    """Sentence–context scores held by the finished label shards (each shard's marker records its count)."""
    return sum(json.loads(p.read_text())["counts"]["sentence_context_scores"]
               for p in (work / "out" / "label-pairs").glob(".shards/*/*.json"))


@pytest.mark.parametrize("stage", ["generate", "label"])
def test_sigkill_mid_stage_then_rerun_redoes_nothing(stage, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,
                                                     child_env, reference_run):
    shards = tmp_path / "out" / "label-pairs"
    kill_point = {"generate": lambda s: s.requests() >= 7,
                  "label": lambda s: any(shards.glob(".shards/*/*.json"))}[stage]
    with ScriptedServerProcess(free_port(), tmp_path / "requests.log", latency_s=0.05) as server:
        run_spec = spec(server, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir)
        run_until(pipeline_process(run_spec, child_env), lambda: kill_point(server))
        sent_before = server.settled_bodies()
        answered = cached_answers(tmp_path)
        scored_before = shard_scores(tmp_path)
        assert not (shards / "manifest.json").exists()  # killed before the stage committed

        outputs = finish(pipeline_process(run_spec, child_env))
        resent = server.bodies()[len(sent_before):]

    # LLM: only requests without a cached answer are sent again (the cache holds every answered request). A request
    # may reach the server twice only as a retry the client counted (a slow machine can time out a connection).
    retries = json.loads(Path(outputs["generate-sts-triples"]["manifest"]).read_text())["llm_stats"]["retries"]
    assert len(set(resent)) == reference_run["requests"] - answered, (len(resent), retries)
    assert len(resent) - len(set(resent)) <= retries
    assert set(resent) | set(sent_before) == reference_run["bodies"]
    if stage == "label":
        assert resent == []
    # Labeling: the shards finished before the kill are reused, not re-scored.
    counts = label_manifest(outputs)["counts"]
    total = label_manifest(reference_run["outputs"])["counts"]["sentence_context_scores"]
    assert counts["sentence_context_scores"] == total
    assert counts["sentence_context_scores_this_run"] == total - scored_before
    if stage == "label":
        assert counts["shards_reused"] >= 1 and scored_before > 0
    for name, table in (("generate-sts-triples", "triples"), ("label-pairs", "pairs")):
        assert stage_table(outputs, name, table).equals(stage_table(reference_run["outputs"], name, table))
