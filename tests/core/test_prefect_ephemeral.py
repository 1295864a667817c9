"""The ephemeral Prefect API server dies with the process that started it (tasks/core/prefect_ephemeral.py): the patched
Popen of Prefect's server module forks from a long-lived thread with the parent-death signal set, so a child
started from a short-lived thread outlives that thread, and dies when its parent process is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import PROJECT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

PARENT = """
import sys, threading, time
sys.path.insert(0, {root!r})
from tasks.core.prefect_ephemeral import popen_dying_with_parent
started = []
# Started from a thread that ends at once, as a Prefect client call on a worker thread may start the server.
worker = threading.Thread(target=lambda: started.append(popen_dying_with_parent([{python!r}, "-c",
                                                                                  "import time; time.sleep(600)"])))
worker.start(); worker.join()
print(started[0].pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie no one reaps (no init in a container) is dead too


def test_a_child_started_from_a_short_lived_thread_dies_with_its_parent_process():
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(root=str(PROJECT), python=sys.executable)],
                              stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.5)
        assert alive(child)  # the starting thread has ended: the child lives on with its process
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 10
        while alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(child), "the child outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_patch_is_installed_in_prefects_server_module_only_without_an_api_url(monkeypatch):
    from prefect.server.api import server as prefect_server
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tasks.core import prefect_ephemeral

    monkeypatch.setattr(prefect_server, "subprocess", subprocess)
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        assert not prefect_ephemeral.ephemeral_server_dies_with_parent()  # a server of its own: nothing to guard
    assert prefect_server.subprocess is subprocess
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert prefect_ephemeral.ephemeral_server_dies_with_parent()
    assert prefect_server.subprocess.Popen is prefect_ephemeral.popen_dying_with_parent
    assert prefect_server.subprocess.TimeoutExpired is subprocess.TimeoutExpired  # the rest is the real module's
    assert subprocess.Popen is not prefect_ephemeral.popen_dying_with_parent  # no other Popen changed


# A process outside the test session (its environment lacks the session's marker) that adopts orphans of its
# descendants (PR_SET_CHILD_SUBREAPER), as a CI sandbox's reaper or init does: bash, started with the marker, puts a
# fake "llama-server" in the background and exits, so the server's parent is gone and this process adopts it.
# Which process adopts an orphan otherwise depends on the machine (init, a sandbox's subreaper): this fixes it.
REAPER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
subprocess.run(["bash", "-c", "(exec -a llama-server sleep 60) & echo $! > pid"],
               env=dict(os.environ, STSGEN_HOME=sys.argv[1]), check=True)
pid = open("pid").read().strip()
# Told once the background subshell has exec'd: mid-exec, /proc/<pid>/cmdline reads empty for a moment (the
# orphan would be missed by a scan that lands there).
while not open(f"/proc/{pid}/cmdline", "rb").read().startswith(b"llama-server"):
    time.sleep(0.01)
print(pid, flush=True)
time.sleep(60)
"""


def test_the_suites_leak_check_finds_an_orphaned_server(tmp_path, monkeypatch):
    """The check the suite runs at its end (tests/conftest.py) sees a server whose parent is gone."""
    from tests import conftest
    from tests.conftest import servers_left_behind

    marker = str(tmp_path / "session-home")
    env = {k: v for k, v in os.environ.items() if k != "STSGEN_HOME"}
    reaper = subprocess.Popen([sys.executable, "-c", REAPER, marker], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              text=True)
    pid = None
    try:
        pid = int(reaper.stdout.readline())
        stat = open(f"/proc/{pid}/stat").read()
        assert stat.rsplit(")", 1)[1].split()[1] == str(reaper.pid), stat  # adopted by the reaper: an orphan
        left = servers_left_behind(marker)
        assert [line.split(":")[0] for line in left] == [str(pid)], (left, stat)
        assert servers_left_behind(str(tmp_path / "another-session")) == []
        # An adopter whose environment cannot be read (another user's, or non-dumpable, as a sandbox's reaper may
        # be) is outside the session too: the orphan is still reported, not skipped.
        real_proc = conftest._proc

        def unreadable_reaper(p, name):
            if str(p) == str(reaper.pid) and name == "environ":
                raise PermissionError(13, "Permission denied")
            return real_proc(p, name)

        monkeypatch.setattr(conftest, "_proc", unreadable_reaper)
        assert [line.split(":")[0] for line in servers_left_behind(marker)] == [str(pid)]
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        reaper.kill()
        reaper.wait()
