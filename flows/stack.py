"""The local stack: Prefect server (SQLite), a `process` work pool, the deployments of prefect.yaml, a worker and
the embedded LLM server — each a background process with a pid file under $STSGEN_HOME/stack.

    ./stsgen stack up        # then, from any shell:
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    prefect deployment run 'generate-sts-triples/adhoc' -p settings='{"n": 20}' --watch
    ./stsgen stack down
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tasks.core.config import ConfigError, stsgen_home
from tasks.core.defaults import DEFAULT_GENERATOR
from tasks.llm.server import start_server

PROJECT_DIR = Path(__file__).resolve().parents[1]
POOL = "stsgen-process"


@dataclass(frozen=True)
class StackSettings:
    prefect_port: int = 4200
    llm_port: int = 8765
    llm_model: str = DEFAULT_GENERATOR
    llm_base_url: str | None = None  # an existing endpoint: no local LLM server is started
    home: Path | None = None
    # The Prefect server's database (`postgresql+asyncpg://user:pw@host:port/db`); None = SQLite under the stack
    # folder. Prefect global concurrency limits (llm.prefect_limit) need Postgres.
    database_url: str | None = None

    @property
    def dir(self) -> Path:
        return (self.home or stsgen_home()) / "stack"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.prefect_port}/api"


def prefect_env(settings: StackSettings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PREFECT_HOME=str(settings.dir / "prefect-home"),
        PREFECT_API_URL=settings.api_url,
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT="false",
        STSGEN_PROJECT_DIR=str(PROJECT_DIR),
    )
    return env


def server_env(settings: StackSettings) -> dict[str, str]:
    """`prefect_env` plus the server's database (only the server needs it; it holds the password)."""
    env = prefect_env(settings)
    if settings.database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = settings.database_url
    return env


def _prefect(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("prefect")
    proc = subprocess.run([str(exe), *args], env=env, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise ConfigError(f"`prefect {' '.join(args)}` failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                          f"\n{proc.stderr[-2000:]}")
    return proc


def _spawn(name: str, cmd: list[str], env: dict[str, str], settings: StackSettings) -> int:
    settings.dir.mkdir(parents=True, exist_ok=True)
    log = open(settings.dir / f"{name}.log", "ab")
    proc = subprocess.Popen(cmd, env=env, cwd=PROJECT_DIR, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    (settings.dir / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_healthy(url: str, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _healthy(url):
            return
        time.sleep(0.5)
    raise ConfigError(f"{what} did not answer {url} within {timeout_s:.0f}s; see the logs in the stack folder.")


def start_prefect_server(settings: StackSettings) -> None:
    """Start the Prefect server in the background unless one answers on the port; wait until it is healthy."""
    if not _healthy(f"{settings.api_url}/health"):
        exe = str(Path(sys.executable).with_name("prefect"))
        _spawn("prefect-server", [exe, "server", "start", "--host", "127.0.0.1", "--port",
                                  str(settings.prefect_port)], server_env(settings), settings)
        wait_healthy(f"{settings.api_url}/health", 120, "Prefect server")


def up(settings: StackSettings = StackSettings()) -> dict[str, str]:
    env = prefect_env(settings)
    exe = str(Path(sys.executable).with_name("prefect"))
    start_prefect_server(settings)
    if settings.llm_base_url:
        base_url, model = settings.llm_base_url, settings.llm_model
    else:
        llm = start_server(settings.llm_model, port=settings.llm_port, die_with_parent=False)  # outlives `up`
        (settings.dir / "llm-server.pid").write_text(str(llm.process.pid))
        base_url, model = llm.base_url, llm.model
        env["STSGEN_LLM_MODEL_SHA256"] = llm.sha256
        env["STSGEN_LLM_SERVER_ENGINE"] = llm.engine
    env.update(STSGEN_LLM_BASE_URL=base_url, STSGEN_LLM_MODEL=model)
    # The pool must exist before deploying: a deploy naming a missing pool creates nothing.
    pools = _prefect(["work-pool", "ls"], env).stdout
    if POOL not in pools:
        _prefect(["work-pool", "create", POOL, "--type", "process"], env)
    _prefect(["--no-prompt", "deploy", "--all"], env)
    _spawn("worker", [exe, "worker", "start", "--pool", POOL, "--name", "stsgen-local"], env, settings)
    return {"api_url": settings.api_url, "ui": f"http://127.0.0.1:{settings.prefect_port}", "llm_base_url": base_url,
            "llm_model": model, "llm_engine": env.get("STSGEN_LLM_SERVER_ENGINE"), "logs": str(settings.dir)}


def down(settings: StackSettings = StackSettings()) -> list[str]:
    """Stop worker, LLM server and Prefect server (SIGINT, then SIGKILL); returns what was stopped."""
    stopped = []
    for name in ("worker", "llm-server", "prefect-server"):
        pid_file = settings.dir / f"{name}.pid"
        if not pid_file.exists():
            continue
        pid = int(pid_file.read_text())
        for sig, wait in ((signal.SIGINT, 10), (signal.SIGINT, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.2)
            if not _alive(pid):
                break
        pid_file.unlink(missing_ok=True)
        stopped.append(name)
    return stopped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # reap if it is our child
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True
