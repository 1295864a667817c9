"""`stsgen serve` stopped with SIGTERM: it pauses the schedules it served (no runner is left to run them), and where
its Prefect server is already gone it says so and exits at once, instead of Prefect's minute of reconnect retries
ending in a traceback. A real served process against the session's Prefect test API; "gone" is a TCP relay in front
of that API, closed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from prefect.client.orchestration import get_client

from flows.serve import deployment_specs, load_flow
from tests.conftest import PROJECT

SERVED = [f"{load_flow(s['entrypoint']).name}/{s['name']}" for s in deployment_specs()]


class Relay:
    """Forwards 127.0.0.1:<port> to the API's port until closed; closed, new connections are refused."""

    def __init__(self, target_port: int):
        self.target_port, self.conns = target_port, []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            s.close()

    def close(self) -> None:
        for s in [self.listener, *self.conns]:  # shutdown first: a bare close leaves a blocked accept() listening
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def paused_states() -> dict[str, bool | None]:
    """Each served deployment's `paused` on the test API (None: not registered yet)."""
    states = {}
    with get_client(sync_client=True) as client:
        for name in SERVED:
            try:
                states[name] = client.read_deployment_by_name(name).paused
            except Exception:  # noqa: BLE001 — ObjectNotFound until serve registers it
                states[name] = None
    return states


def serve_until_registered(env: dict, api_url: str, log: Path) -> subprocess.Popen:
    """`python -m flows.serve` (what `stsgen serve` runs), returned once every deployment is registered and active;
    its output goes to `log` (a file, not a pipe nobody reads while it runs)."""
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "flows.serve"], cwd=PROJECT,
                                env=dict(env, PREFECT_API_URL=api_url), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    while set(paused_states().values()) != {False}:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"serve never registered its deployments:\n{log.read_text()[-3000:]}")
        time.sleep(1)
    time.sleep(3)  # past registration: into the runner's polling loop
    return proc


def stop(proc: subprocess.Popen, log: Path) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=50)  # Prefect's own pause of a gone server: ≥ 62 s of retries
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"serve still running 50 s after SIGTERM:\n{log.read_text()[-3000:]}") from None
    return log.read_text()


def test_serve_pauses_what_it_served_and_stops_promptly_when_its_server_is_gone(child_env, tmp_path):
    api_url = child_env["PREFECT_API_URL"]
    served = serve_until_registered(child_env, api_url, tmp_path / "serve.log")
    out = stop(served, tmp_path / "serve.log")
    assert served.returncode == 0, out[-3000:]
    assert set(paused_states().values()) == {True}, out[-3000:]
    assert "stopped; paused " + ", ".join(SERVED) in out and "Traceback" not in out, out[-3000:]

    parts = urlsplit(api_url)
    relay = Relay(parts.port)
    try:
        served = serve_until_registered(child_env, urlunsplit(parts._replace(netloc=f"127.0.0.1:{relay.port}")),
                                        tmp_path / "serve-relayed.log")
    finally:
        relay.close()  # the server, as this serve process sees it, is gone
    # Stopped a while after the server went (a SIGTERM landing in the very callback that sees the connection drop is
    # swallowed there: Prefect's handler calls sys.exit inside the event loop).
    time.sleep(3)
    out = stop(served, tmp_path / "serve-relayed.log")
    assert "does not answer" in out and "stay active there" in out and "Traceback" not in out, out[-3000:]
    assert set(paused_states().values()) == {False}  # re-activated by the second serve, left as they were
