"""A real local stack: Prefect server (SQLite), process work pool, the prefect.yaml deployments and a worker;
a run triggered with `prefect deployment run … --watch` from another process, against the scripted LLM server."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tasks.llm.scripted_server import is_judge_request
from tests.conftest import prefect_cli

pytestmark = pytest.mark.slow


def test_deployment_run_via_worker(shared_stack, adhoc_generate_run):
    settings, info, llm = shared_stack
    listed = prefect_cli(settings, "deployment", "ls")
    assert "generate-sts-triples/adhoc" in listed.stdout and "generate-sts-triples/nightly" in listed.stdout
    # The ls table truncates long names: inspect each.
    for name in ("retrieve-contexts/retrieve-adhoc", "label-pairs/label-adhoc", "sts-pipeline/pipeline-adhoc",
                 "sts-pipeline/pipeline-nightly", "train-surrogate/train-adhoc", "build-dataset/build-adhoc",
                 "train-on-dataset/weekly"):
        inspected = prefect_cli(settings, "deployment", "inspect", name)
        assert inspected.returncode == 0 and name.split("/")[1] in inspected.stdout, (name, inspected.stderr[-500:])
    assert "0 3 * * *" in prefect_cli(settings, "deployment", "inspect", "sts-pipeline/pipeline-nightly").stdout
    nightly = prefect_cli(settings, "deployment", "inspect", "generate-sts-triples/nightly")
    assert "0 2 * * *" in nightly.stdout and "'avoid_used_sources': True" in nightly.stdout  # grows one dataset
    assert "0 4 * * 0" in prefect_cli(settings, "deployment", "inspect", "train-on-dataset/weekly").stdout

    # The run `prefect deployment run generate-sts-triples/adhoc -p settings='{"n": 4, …}' … --watch`
    # (tests/conftest.py) started: the worker picked it up, ran it in its own process against the scripted LLM
    # server, and it completed.
    out, requests = adhoc_generate_run["out"], adhoc_generate_run["requests"]
    triples = pq.read_table(out / "latest" / "generate-sts-triples" / "triples.parquet")
    judged = sum(is_judge_request(r["body"]["messages"]) for r in requests)
    assert triples.num_rows == 4 and (len(requests) - judged, judged) == (12, 12)  # each one judged
    manifest = json.loads((out / "latest" / "generate-sts-triples" / "manifest.json").read_text())
    assert manifest["parameters"]["llm"]["model"] == "scripted-model"
