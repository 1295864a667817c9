"""docker-compose.yml describes the stack (Postgres-backed Prefect, deploy, worker, LLM profile). No Docker engine
runs here, so it is validated with `docker-compose config`."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import PROJECT

pytestmark = pytest.mark.skipif(shutil.which("docker-compose") is None,
                                reason="docker-compose client not installed (./stsgen test installs it as root)")


def config(*args: str) -> dict:
    proc = subprocess.run(["docker-compose", "-f", str(PROJECT / "docker-compose.yml"), *args, "config"],
                          capture_output=True, text=True, cwd=PROJECT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def test_compose_stack_is_valid_and_postgres_backed():
    cfg = config()
    assert {"postgres", "prefect-server", "deploy", "worker"} <= set(cfg["services"])
    assert cfg["services"]["llm"]["profiles"] == ["llm"]  # only started with --profile llm
    server = cfg["services"]["prefect-server"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith("postgresql+asyncpg://")
    assert server["image"].endswith(":3.8.8-python3.11")
    worker = cfg["services"]["worker"]
    assert worker["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert "stsgen-process" in " ".join(worker["command"] if isinstance(worker["command"], list)
                                        else [worker["command"]])
    for service in cfg["services"].values():  # published ports bind loopback only
        for port in service.get("ports", []):
            assert str(port.get("host_ip", port) if isinstance(port, dict) else port).startswith("127.0.0.1")


def test_llm_profile_and_endpoint_override(monkeypatch):
    monkeypatch.setenv("STSGEN_LLM_BASE_URL", "http://vllm.internal:8000/v1")
    cfg = config("--profile", "llm")
    assert "llm" in cfg["services"]
    assert cfg["services"]["worker"]["environment"]["STSGEN_LLM_BASE_URL"] == "http://vllm.internal:8000/v1"


def test_gpu_profile_adds_vllm_and_a_cuda_worker_on_the_gpu(monkeypatch):
    monkeypatch.setenv("STSGEN_LLM_BASE_URL", "http://vllm:8000/v1")
    cfg = config("--profile", "gpu")
    vllm, worker = cfg["services"]["vllm"], cfg["services"]["worker-gpu"]
    assert vllm["profiles"] == worker["profiles"] == ["gpu"]  # only started with --profile gpu
    assert "--enable-prefix-caching" in vllm["command"] and not vllm.get("ports")  # reached inside the network only
    for service in (vllm, worker):
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"] and devices[0]["driver"] == "nvidia"
    assert "/whl/cu" in worker["build"]["args"]["TORCH_INDEX"]
    assert worker["environment"]["STSGEN_LLM_BASE_URL"] == "http://vllm:8000/v1"
