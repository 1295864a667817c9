"""End to end on the real embedded LLM: the CLI starts llama.cpp's server with SmolLM2-135M on 127.0.0.1, runs the
flow (on the session's Prefect API server), writes valid Parquet and stops the server; each server engine starts on
loopback only and stops."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pyarrow.parquet as pq
import pytest

from tasks.contracts import REJECTED_SCHEMA, TRIPLES_SCHEMA
from tasks.generate.validation import RULES
from tasks.generate.verification import REASONS as JUDGE_REASONS
from tasks.llm.server import server_binary
from tests.conftest import PROJECT

pytestmark = pytest.mark.slow


def llama_servers() -> list[psutil.Process]:
    def is_server(cmdline: list[str]) -> bool:
        return bool(cmdline) and ("llama_cpp.server" in cmdline or cmdline[0].endswith("/llama-server"))

    return [p for p in psutil.process_iter(["cmdline"]) if is_server(p.info["cmdline"] or [])]


def test_cli_run_on_smollm2_writes_valid_parquet(tmp_path, child_env):
    before = {p.pid for p in llama_servers()}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "flows.cli", "generate", "--n", "4", "--local-model", "smollm2-135m-instruct",
           "--output-dir", str(out), "--max-attempts", "2",
           "--corpus", "data/examples/docs",  # the CLI and the local model under test, not the 730k-sentence default
           "--candidates", "1"]  # one choice: n > 1 is tested over HTTP (test_best_of_n.py)
    # The session's Prefect API server (child_env): an ephemeral one per CLI run costs ~25 s, and its start and stop
    # are tested in tests/core/test_prefect_ephemeral.py.
    proc = subprocess.run(cmd, cwd=PROJECT, env=child_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = (out / "latest").resolve() / "generate-sts-triples"  # the run folder the CLI made
    ui = child_env["PREFECT_API_URL"].removesuffix("/api")
    assert str(folder / "triples.parquet") in proc.stdout and f"Prefect UI: {ui}/runs" in proc.stdout
    triples = pq.read_table(folder / "triples.parquet")
    rejected = pq.read_table(folder / "rejected.parquet")
    assert triples.schema.equals(TRIPLES_SCHEMA) and rejected.schema.equals(REJECTED_SCHEMA)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["llm"]["served_models"] == ["smollm2-135m-instruct"]
    assert manifest["llm"]["model_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert manifest["llm"]["server_engine"] == ("llama-server" if server_binary() else "llama-cpp-python")
    stats = manifest["llm_stats"]
    assert stats["requests_sent"] >= 4 and stats["failures"] == 0 and stats["completion_tokens"] > 0
    # Every source sentence is accounted for: a complete triple or quarantine rows with a known reason.
    reasons = set(rejected.column("reason").to_pylist())
    assert reasons <= set(RULES) | set(JUDGE_REASONS) | {"base_rejected", "not_chosen"}
    assert set(triples.column("positive_candidates").to_pylist()) <= {1}
    anchors = set(triples.column("anchor").to_pylist()) | set(rejected.column("anchor").to_pylist())
    assert len(anchors) == 4
    # The server was stopped with the run.
    assert {p.pid for p in llama_servers()} - before == set()


@pytest.mark.parametrize("engine", ["llama-server", "llama-cpp-python"])
def test_each_engine_serves_on_loopback_only_and_stops(engine):
    import openai

    from tasks.llm.server import local_server

    if engine == "llama-server" and server_binary() is None:
        pytest.fail("llama-server is not built: ./stsgen setup compiles it (tasks/llm/llama_build.py)")
    with local_server("smollm2-135m-instruct", engine=engine, n_ctx=256, threads=2, parallel=2) as server:
        assert server.engine == engine and server.base_url.startswith("http://127.0.0.1:")
        process = psutil.Process(server.process.pid)
        listening = {c.laddr for p in (process, *process.children(recursive=True))
                     for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN}
        assert listening and {addr.ip for addr in listening} == {"127.0.0.1"}, listening
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-none")
        assert [m.id for m in client.models.list().data] == ["smollm2-135m-instruct"]
        answer = client.chat.completions.create(model=server.model, max_tokens=4, temperature=0,
                                                messages=[{"role": "user", "content": "Say hi."}])
        assert answer.choices[0].message.content and answer.usage.completion_tokens >= 1
    assert process.is_running() is False or process.status() == psutil.STATUS_ZOMBIE
    assert server.process.poll() is not None


def test_a_missing_llama_server_build_is_a_clear_error(monkeypatch):
    from tasks.core.config import ConfigError
    from tasks.llm import server

    monkeypatch.setattr(server, "server_binary", lambda: None)
    assert server.resolve_engine("auto") == "llama-cpp-python"  # the fallback
    with pytest.raises(ConfigError, match="llama-server is not built.*./stsgen setup"):
        server.resolve_engine("llama-server")
