"""(a) The LLM server is SIGKILLed mid-run. Restarted within the retry budget: the run completes with the
undisturbed run's triples. Down for longer: the run ends with the failed calls quarantined as `llm_error` (counted,
nothing silently dropped), and a re-run after the restart sends only those calls and completes identically. The runs
that complete run stage 1 alone: the tiny pipeline's later stages send no LLM request (a run resumed through every
stage: tests/faults/test_kill_resume.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from tasks.llm.server import free_port
from tests.faults.conftest import cached_answers, spec, stage_table
from tests.faults.processes import ScriptedServerProcess, finish, pipeline_process

STAGE = "generate-sts-triples"


def kill_after(server: ScriptedServerProcess, ready, down_s: float | None) -> threading.Thread:
    """SIGKILL the server once `ready()` holds; restart it after `down_s` (None: never)."""

    def fault():
        while not ready():
            time.sleep(0.005)
        server.kill()
        if down_s is not None:
            time.sleep(down_s)
            server.start()

    thread = threading.Thread(target=fault, daemon=True)
    thread.start()
    return thread


def manifest(outputs: dict, stage: str = STAGE) -> dict:
    return json.loads(Path(outputs[stage]["manifest"]).read_text())


def test_restart_within_the_retry_budget_completes_unchanged(tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,
                                                             child_env, reference_run):
    with ScriptedServerProcess(free_port(), tmp_path / "requests.log", latency_s=0.1) as server:
        fault = kill_after(server, lambda: server.requests() >= 5, down_s=1.5)
        # Only stage 1 runs: the LLM is stage 1's alone in this pipeline (its labels are context labels).
        outputs = finish(pipeline_process(spec(server, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,
                                               llm={"backoff_base_s": 0.5, "max_retries": 6}, stage1_only=True),
                                          child_env))
        fault.join(timeout=5)
    stats = manifest(outputs)["llm_stats"]
    assert stats["errors_by_kind"].get("connection", 0) >= 1 and stats["retries"] >= 1  # the outage was felt
    assert stats["failures"] == 0
    assert stage_table(outputs, STAGE, "triples").equals(stage_table(reference_run["outputs"], STAGE, "triples"))


def test_long_outage_quarantines_failed_calls_and_a_rerun_completes(tmp_path, fault_corpus, tiny_lm_dir,
                                                                    tiny_encoder_dir, child_env, reference_run):
    port = free_port()
    run_spec = lambda server, **kw: spec(server, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,  # noqa: E731
                                         llm={"backoff_base_s": 0.05, "max_retries": 1}, **kw)
    # (A run that starts while the endpoint is down fails at the endpoint check before any work:
    # tests/generate/test_generate_flow.py's "unreachable" case, and the failing run of tests/core/test_security.py.)
    # Down mid-run: start the run, kill the server once the client holds 11 of its 15 answers (positives,
    # intermediates and one negative: at least one complete triple) and leave it down. The server answers only those
    # 11 (it holds the rest), so however late the kill comes, no 12th answer lands. Only stage 1 runs: what follows
    # reads stage 1's outputs alone (stages 2–3 on the partial triples would cost ~half a minute for nothing).
    with ScriptedServerProcess(port, tmp_path / "requests2.log", latency_s=0.1, answers=11) as server:
        kill_after(server, lambda: cached_answers(tmp_path) >= 11, down_s=None)
        partial = finish(pipeline_process(run_spec(server, stage1_only=True), child_env))
    first = manifest(partial)
    rejected = pq.read_table(partial[STAGE]["rejected"]).to_pandas()
    failed = rejected[rejected["reason"] == "llm_error"]
    assert len(failed) >= 1 and first["counts"]["rejected_by_reason"]["llm_error"] == len(failed)
    assert failed["detail"].str.contains("connection").all()
    # Every source is accounted for: a complete triple, or quarantine rows that say why not.
    triples = pq.read_table(partial[STAGE]["triples"]).to_pandas()
    assert set(triples["source_id"]) | set(rejected["source_id"]) == set(
        stage_table(reference_run["outputs"], STAGE, "triples").column("source_id").to_pylist())
    assert triples["source_id"].is_unique and 1 <= len(triples) < 5
    answered = cached_answers(tmp_path)
    assert answered >= 11

    with ScriptedServerProcess(port, tmp_path / "requests3.log", latency_s=0.1) as server:
        final = finish(pipeline_process(run_spec(server, stage1_only=True), child_env))
        resent = server.bodies()
    # Only what had not been answered is sent again (retries aside, which the client counts): the rest is cached.
    assert len(set(resent)) == reference_run["requests"] - answered
    assert len(resent) - len(set(resent)) <= manifest(final)["llm_stats"]["retries"]
    assert manifest(final)["llm_stats"]["failures"] == 0 and manifest(final)["llm_stats"]["cache_hits"] >= 1
    assert stage_table(final, STAGE, "triples").equals(stage_table(reference_run["outputs"], STAGE, "triples"))


def test_outage_before_any_triple_fails_the_pipeline_clearly(tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,
                                                             child_env):
    # Two answers, then held: no source can complete its three (however late the kill comes).
    with ScriptedServerProcess(free_port(), tmp_path / "requests.log", latency_s=0.1, answers=2) as server:
        kill_after(server, lambda: server.requests() >= 3, down_s=None)
        proc = pipeline_process(spec(server, tmp_path, fault_corpus, tiny_lm_dir, tiny_encoder_dir,
                                     llm={"backoff_base_s": 0.05, "max_retries": 1}), child_env)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0 and b"Stage 1 produced no complete triple" in out and b"llm_error" in out
    rejected = pq.read_table(tmp_path / "out" / STAGE / "rejected.parquet").to_pandas()
    assert (rejected["reason"] == "llm_error").sum() >= 2  # the failed calls are kept, with their reason
    assert not (tmp_path / "out" / "retrieve-contexts").exists()
