"""A real local stack: Prefect server (SQLite), process work pool, the prefect.yaml deployments and a worker;
a run triggered with `prefect deployment run … --watch` from another process, against the scripted LLM server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows import stack
from tasks.llm.server import free_port
from tests.conftest import PROJECT
from tests.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.slow


@pytest.fixture
def local_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_WORKER_QUERY_SECONDS", "2")
    with ScriptedOpenAI() as llm:
        settings = stack.StackSettings(prefect_port=free_port(), llm_base_url=llm.base_url,
                                       llm_model="scripted-model", home=tmp_path / "home")
        try:
            info = stack.up(settings)
            yield settings, info, llm
        finally:
            stopped = stack.down(settings)
            assert "worker" in stopped and "prefect-server" in stopped


def prefect_cli(settings, *args, timeout=240):
    exe = Path(sys.executable).with_name("prefect")
    return subprocess.run([str(exe), *args], env=stack.prefect_env(settings), cwd=PROJECT, capture_output=True,
                          text=True, timeout=timeout)


def test_deployment_run_via_worker(local_stack, tiny_corpus, tmp_path):
    settings, info, llm = local_stack
    listed = prefect_cli(settings, "deployment", "ls")
    assert "generate-sts-triples/adhoc" in listed.stdout and "generate-sts-triples/nightly" in listed.stdout
    # The ls table truncates long names: inspect each.
    for name in ("retrieve-contexts/retrieve-adhoc", "label-pairs/label-adhoc", "sts-pipeline/pipeline-adhoc",
                 "sts-pipeline/pipeline-nightly", "train-surrogate/train-adhoc"):
        inspected = prefect_cli(settings, "deployment", "inspect", name)
        assert inspected.returncode == 0 and name.split("/")[1] in inspected.stdout, (name, inspected.stderr[-500:])
    assert "0 3 * * *" in prefect_cli(settings, "deployment", "inspect", "sts-pipeline/pipeline-nightly").stdout
    nightly = prefect_cli(settings, "deployment", "inspect", "generate-sts-triples/nightly")
    assert "0 2 * * *" in nightly.stdout

    out = tmp_path / "outputs"
    run = prefect_cli(settings, "deployment", "run", "generate-sts-triples/adhoc", "-p", "n=4",
                      "-p", f"corpus={tiny_corpus}", "-p", f"output_dir={out}", "--watch")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Completed" in run.stdout
    triples = pq.read_table(out / "generate-sts-triples" / "triples.parquet")
    assert triples.num_rows == 4 and len(llm.chat_requests()) == 12
    manifest = json.loads((out / "generate-sts-triples" / "manifest.json").read_text())
    assert manifest["parameters"]["llm"]["model"] == "scripted-model"
