"""The embedded LLM: a llama.cpp server on 127.0.0.1, as a child process.

Two engines over the same GGUF: llama.cpp's own `llama-server` (compiled at setup, tasks/llm/llama_build.py; its
slots serve requests in flight at its full rate) and llama-cpp-python's server (the fallback where llama-server was
not built, and the one that echoes prompt log-probs, which the served stage-3 scorer needs). `auto` picks
llama-server when it is there. Used by the CLI (`./stsgen run`, `./stsgen llm-server`), the local stack and the
tests. The server announces the model under its registry name, so `LLMSettings.model` is the string users pass in.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

from tasks.core.config import ConfigError, stsgen_home
from tasks.core.defaults import DEFAULT_GENERATOR
from tasks.llm.llama_build import server_binary
from tasks.llm.local_models import LOCAL_MODELS, resolve_gguf

Engine = Literal["auto", "llama-server", "llama-cpp-python"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _detach_but_die_with_parent() -> None:
    """Own process group (a Ctrl-C reaches the run, which stops the server in order), and SIGTERM from the kernel
    if the process that started the server dies (even by SIGKILL): no orphaned servers holding the cores."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class LocalServer:
    process: subprocess.Popen
    base_url: str
    model: str
    gguf: Path
    sha256: str
    log_path: Path
    engine: str  # "llama-server" or "llama-cpp-python"

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def resolve_engine(engine: Engine) -> str:
    if engine == "auto":
        return "llama-server" if server_binary() else "llama-cpp-python"
    if engine == "llama-server" and not server_binary():
        raise ConfigError("llama-server is not built in this environment: run ./stsgen setup (it compiles it), or "
                          "use engine 'llama-cpp-python'.")
    return engine


def server_command(engine: str, gguf: Path, alias: str, host: str, port: int, n_ctx: int, threads: int,
                   parallel: int) -> list[str]:
    if engine == "llama-server":
        return [str(server_binary()), "--model", str(gguf), "--alias", alias, "--host", host, "--port", str(port),
                # n_ctx per slot: the context is split between the slots.
                "--ctx-size", str(n_ctx * parallel), "--parallel", str(parallel),
                "--threads", str(threads), "--threads-batch", str(threads),
                "--no-webui",  # an API server only
                "--cache-ram", "1024"]  # prompt cache shared by the slots, bounded (default 8 GiB)
    return [sys.executable, "-m", "llama_cpp.server",
            "--model", str(gguf), "--model_alias", alias,
            "--host", host, "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
            # No `--cache true`: its RAM state cache grew without bound here (22 GB, OOM-killed after ~300
            # requests). Prefix reuse does not need it: the context's KV cache already matches the shared few-shot
            # prefix of consecutive requests of one kind ("prefix-match hit" in the server log).
            ]


def start_server(
    model: str = DEFAULT_GENERATOR,
    port: int | None = None,
    host: str = "127.0.0.1",
    n_ctx: int = 2048,
    threads: int | None = None,
    startup_timeout_s: float = 180.0,
    die_with_parent: bool = True,
    engine: Engine = "auto",
    parallel: int = 4,
) -> LocalServer:
    """Start a llama.cpp OpenAI-compatible server and wait until it answers /v1/models. `parallel`: llama-server's
    slots (requests decoded together; match it to the client's max_concurrency)."""
    engine = resolve_engine(engine)
    gguf, sha = resolve_gguf(model)
    alias = model if model in LOCAL_MODELS else gguf.stem
    port = port or free_port(host)
    threads = threads or max(1, min(os.cpu_count() or 1, 8))
    log_dir = stsgen_home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{engine}-{port}.log"
    cmd = server_command(engine, gguf, alias, host, port, n_ctx, threads, max(1, parallel))
    log = open(log_path, "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=_detach_but_die_with_parent if die_with_parent else os.setsid)
    base_url = f"http://{host}:{port}/v1"
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise ConfigError(f"{engine} exited with code {proc.returncode}; log {log_path}:\n{tail}")
        if _healthy(base_url):
            return LocalServer(proc, base_url, alias, gguf, sha, log_path, engine)
        time.sleep(0.5)
    proc.kill()
    raise ConfigError(f"{engine} did not become healthy in {startup_timeout_s}s; see {log_path}")


@contextmanager
def local_server(model: str = DEFAULT_GENERATOR, **kwargs) -> Iterator[LocalServer]:
    """Run a local server for the duration of a block; it is stopped on exit, errors and Ctrl-C included."""
    server = start_server(model, **kwargs)
    try:
        yield server
    finally:
        server.stop()
