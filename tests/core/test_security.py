"""Security: the API key never lands in any output of a run (outputs, manifests, caches, Prefect's database of logs
and artifacts, console output, exceptions); servers bind loopback by default; LLM output is data (no eval/exec
anywhere in the project); oversized inputs are refused with a clear error."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.llm.scripted_server import ScriptedOpenAI
from tests.conftest import PROJECT, generate_settings
from tests.faults.conftest import spec
from tests.faults.processes import pipeline_process

CANARY = "sk-canary-3b9e41d7c2f0a8"


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


def test_api_key_never_lands_in_any_output(tmp_path, topic_corpus, tiny_lm_dir, tiny_encoder_dir, child_env):
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    # The session's Prefect API server receives the child runs' logs (at DEBUG), artifacts and parameters: its
    # SQLite database is searched too.
    database_dir = Path(PREFECT_SERVER_DATABASE_CONNECTION_URL.value().split(":///", 1)[1]).parent
    stsgen_home = tmp_path / "stsgen-home"
    env = dict(child_env, OPENAI_API_KEY=CANARY, STSGEN_HOME=str(stsgen_home), PREFECT_LOGGING_LEVEL="DEBUG")
    with ScriptedOpenAI() as server:
        server.push(("status", 500), ("status", 429, {"Retry-After": "0"}), "malformed")  # error paths too
        work = tmp_path / "run"
        proc = pipeline_process(spec(server, work, topic_corpus, tiny_lm_dir, tiny_encoder_dir, train=True,
                                     llm={"backoff_base_s": 0.01}), env)
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output.decode()[-3000:]
        assert {r["authorization"] for r in server.chat_requests()} == {f"Bearer {CANARY}"}  # the key was used
    # A failing run: its exception and traceback must not carry the key either.
    failing = pipeline_process(spec(server, tmp_path / "failed", topic_corpus, tiny_lm_dir, tiny_encoder_dir), env)
    failed_output, _ = failing.communicate(timeout=300)
    assert failing.returncode != 0 and b"unreachable" in failed_output

    written = files_under(work, tmp_path / "failed", Path(child_env["PREFECT_HOME"]), stsgen_home, database_dir)
    names = {p.name for p in written}
    assert {"llm.sqlite", "manifest.json", "triples.parquet", "pairs.parquet", "model.safetensors"} <= names
    assert any(p.suffix == ".db" for p in written)  # Prefect's database: logs, artifacts, parameters
    for path in written:
        assert CANARY.encode() not in path.read_bytes(), path
    assert CANARY.encode() not in output and CANARY.encode() not in failed_output


def test_servers_bind_loopback_by_default():
    from flows import stack
    from tasks.core.runners import task_runner
    from tasks.llm.server import start_server

    assert inspect.signature(start_server).parameters["host"].default == "127.0.0.1"
    assert '"--host", "127.0.0.1"' in inspect.getsource(stack.start_prefect_server)
    runner = task_runner("dask", None, 1)
    assert runner.cluster_kwargs["host"] == "127.0.0.1" and runner.cluster_kwargs["dashboard_address"] is None


def test_no_eval_or_exec_in_the_project():
    """LLM output is parsed as data: nothing in the project evaluates strings as code."""
    banned = {"eval", "exec", "compile", "__import__"}
    for folder in ("flows", "tasks", "models", "prompts", "benchmarks"):
        for path in (PROJECT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in banned, f"{path}:{node.lineno} calls {node.func.id}"


def test_llm_output_that_looks_like_code_is_only_text(prefect_harness, tiny_corpus, tmp_path):
    import pyarrow.parquet as pq

    from flows.generate_sts_triples import generate_sts_triples
    from tests.generate.test_generate_flow import llm

    payload = "__import__('os').system('touch PWNED') or 1"
    with ScriptedOpenAI(responder=lambda messages, body: payload) as server:
        paths = generate_sts_triples(settings=generate_settings(tiny_corpus, n=2), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "out"))
    rejected = pq.read_table(paths["rejected"]).to_pandas()
    assert (rejected["text"] == payload).any()  # kept verbatim, with the reason it was rejected
    assert not any(p.name == "PWNED" for p in files_under(tmp_path, PROJECT))


def test_oversized_input_is_refused_with_the_fix(tmp_path, monkeypatch):
    import pyarrow as pa

    from tasks.core.config import ConfigError
    from tasks.core.store import read_input_table, write_parquet

    path = tmp_path / "pairs.parquet"
    write_parquet(path, pa.table({"s1": ["a"] * 1000, "s2": ["b"] * 1000}))
    monkeypatch.setenv("STSGEN_MAX_INPUT_BYTES", "100")
    with pytest.raises(ConfigError, match="above the input limit of 100 bytes.*STSGEN_MAX_INPUT_BYTES") as raised:
        read_input_table(path, "Pairs file", "give a smaller file")
    assert str(path) in str(raised.value)


def test_cli_never_prints_the_key_on_errors(tmp_path, child_env):
    env = dict(child_env, OPENAI_API_KEY=CANARY)  # the session's Prefect API server: no ephemeral one to start
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "generate", "--n", "2", "--base-url",
                           "http://127.0.0.1:9/v1", "--model", "m", "--output-dir", str(tmp_path),
                           "--corpus", "data/examples/docs"],  # a small corpus: the key is what is under test
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "unreachable" in (proc.stdout + proc.stderr)
    assert CANARY not in proc.stdout + proc.stderr
