"""Prefect's ephemeral API server dies with the process that started it.

Without PREFECT_API_URL, the first Prefect client call of a process starts `uvicorn prefect.server.api.server` as a
child (`SubprocessASGIServer`) and stops it at interpreter exit. A process killed by SIGKILL (a user's `kill -9`, the
fault tests) never reaches that exit, and the server (~250 MB, a busy core while it migrates) lives on, orphaned.

Prefect has no option for this, so its server module's `subprocess` name is given a `Popen` that starts the child
with PR_SET_PDEATHSIG (SIGTERM from the kernel when the parent dies, the way the local LLM server is started). The
kernel sends it when the *thread* that forked exits, so the fork runs on one long-lived daemon thread: the signal
comes when the process ends, however the client call that started the server was threaded.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import types

_requests: queue.Queue = queue.Queue()
_spawner: threading.Thread | None = None
_lock = threading.Lock()


PR_SET_PDEATHSIG = 1
_prctl = None  # resolved in the parent: between fork and exec the child only calls it (no loader work there)


def _set_parent_death_signal() -> None:  # runs in the child between fork and exec
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn_forever() -> None:
    while True:
        args, kwargs, reply = _requests.get()
        try:
            reply.put((subprocess.Popen(*args, preexec_fn=_set_parent_death_signal, **kwargs), None))
        except BaseException as exc:  # handed back to the caller's thread
            reply.put((None, exc))


def popen_dying_with_parent(*args, **kwargs) -> subprocess.Popen:
    """subprocess.Popen, forked from the spawner thread with the parent-death signal set."""
    global _spawner, _prctl
    with _lock:
        if _spawner is None:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
            _spawner = threading.Thread(target=_spawn_forever, name="stsgen-child-spawner", daemon=True)
            _spawner.start()
    reply: queue.Queue = queue.Queue(maxsize=1)
    _requests.put((args, kwargs, reply))
    process, error = reply.get()
    if error is not None:
        raise error
    return process


def _forget_spawner_in_child() -> None:
    global _spawner
    _spawner = None  # a forked child has no spawner thread: it starts its own on first use


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawner_in_child)


def ephemeral_server_dies_with_parent() -> bool:
    """Install the patch (idempotent; Linux only) unless the process talks to a Prefect server of its own
    (PREFECT_API_URL): every flow module calls this at import. Returns whether it is in place."""
    from prefect.settings import get_current_settings

    if not sys.platform.startswith("linux") or get_current_settings().api.url:
        return False
    from prefect.server.api import server as prefect_server

    if getattr(prefect_server.subprocess, "stsgen_dies_with_parent", False):
        return True
    shim = types.SimpleNamespace(**{name: getattr(subprocess, name) for name in dir(subprocess)
                                    if not name.startswith("__")})
    shim.Popen, shim.stsgen_dies_with_parent = popen_dying_with_parent, True
    prefect_server.subprocess = shim  # only that module's name: every other Popen is untouched
    return True
