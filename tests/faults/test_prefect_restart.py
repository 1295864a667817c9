"""(c) The Prefect server (SQLite) is SIGKILLed and restarted while a deployment run is in flight on the local
stack. The flow-run process keeps its work (its API calls are retried by Prefect's client), the run ends Completed
in the restarted server, and its outputs are complete with every LLM request sent once."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pyarrow.parquet as pq
import pytest

from flows import stack
from tests.conftest import prefect_cli

pytestmark = pytest.mark.slow


def flow_run_state(settings, run_id: str) -> str:
    inspected = prefect_cli(settings, "flow-run", "inspect", run_id, "--output", "json", timeout=60)
    return json.loads(inspected.stdout)["state"]["type"] if inspected.returncode == 0 else "UNREACHABLE"


def test_prefect_server_restart_during_a_deployment_run(shared_stack, tiny_corpus, tmp_path):
    """On the session's shared stack (a stack costs ~50 s to start): the tests that use it after this one run on the
    restarted server, so a restart that loses state fails them too."""
    settings, _, llm = shared_stack
    llm.latency_s = 1.0  # 4 sources × 3 kinds at concurrency 4: ≥ 3 s of LLM calls, spanning the outage
    try:
        restart_during_a_run(settings, llm, tiny_corpus, tmp_path)
    finally:
        llm.latency_s = 0.0


def restart_during_a_run(settings, llm, tiny_corpus, tmp_path):
    sent_before = len(llm.chat_requests())
    out = tmp_path / "outputs"
    # seed 7: other requests than the session's adhoc run (seed 13), which the shared LLM cache would answer.
    stage1 = json.dumps({"n": 4, "seed": 7, "corpus": {"source": str(tiny_corpus)}})
    started = prefect_cli(settings, "deployment", "run", "generate-sts-triples/adhoc", "-p", f"settings={stage1}",
                          "-p", f"output_dir={out}")
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout).group(1)

    deadline = time.monotonic() + 240
    while len(llm.chat_requests()) == sent_before:  # the worker picked the run up and the flow is calling the LLM
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.2)
    assert not (out / "latest").exists()  # still in flight: no run under out has finished
    os.killpg(int((settings.dir / "prefect-server.pid").read_text()), signal.SIGKILL)
    time.sleep(3)
    stack.start_prefect_server(settings)  # same port, same SQLite database

    deadline = time.monotonic() + 240  # the run's own time from here (pickup and restart may have used most of it)
    state = "PENDING"
    while state not in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
        assert time.monotonic() < deadline, f"run still {state}"
        time.sleep(1)
        state = flow_run_state(settings, run_id)
    assert state == "COMPLETED"
    folder = (out / "latest").resolve() / "generate-sts-triples"  # the deployment's run folder (run: auto)
    manifest = json.loads((folder / "manifest.json").read_text())
    triples = pq.read_table(folder / "triples.parquet").to_pandas()
    rejected = pq.read_table(folder / "rejected.parquet").to_pandas()
    assert triples["source_id"].is_unique and len(triples) + manifest["counts"]["incomplete_sources"] == 4
    assert rejected["reason"].ne("llm_error").all()
    assert manifest["llm_stats"]["requests_sent"] == len(llm.chat_requests()) - sent_before  # nothing sent twice
