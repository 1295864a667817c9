"""Processes the fault-injection tests can kill: the scripted OpenAI server on a fixed port, and the tiny
sts-pipeline run as its own Python process.

    python -m tests.faults.processes server PORT LATENCY_S LOG [ANSWERS]  # one line per chat request: its body's digest;
                                                                          # ANSWERS: answer that many, hold the rest
    python -m tests.faults.processes pipeline SPEC_JSON               # runs sts-pipeline, prints its outputs as JSON
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import PROJECT


class ScriptedServerProcess:
    """The scripted server in a child process, so that a test can SIGKILL it and start it again on the same port."""

    def __init__(self, port: int, log: Path, latency_s: float = 0.05, answers: int | None = None):
        """`answers`: answer only the first that many requests and hold every later one unanswered (until the
        test kills the server), so a test that kills it "after N answers" cuts at exactly N however slow the
        machine is."""
        self.port, self.log, self.latency_s, self.answers = port, log, latency_s, answers
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ScriptedServerProcess":
        limit = [] if self.answers is None else [str(self.answers)]
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.faults.processes", "server", str(self.port),
                                      str(self.latency_s), str(self.log), *limit], cwd=PROJECT, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == b"ready"
        return self

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def bodies(self) -> list[str]:
        """A digest of each chat request body received, in arrival order (a retried request appears again)."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def requests(self) -> int:
        return len(self.bodies())

    def settled_bodies(self, quiet_s: float = 0.5) -> list[str]:
        """bodies() once nothing new has been logged for `quiet_s`: a request a just-killed client had sent is logged
        when the server answers it (after its latency), so reading at once could count it in the next run."""
        bodies, since = self.bodies(), time.monotonic()
        while time.monotonic() - since < quiet_s:
            time.sleep(0.05)
            now = self.bodies()
            if now != bodies:
                bodies, since = now, time.monotonic()
        return bodies

    def __enter__(self) -> "ScriptedServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill()


def pipeline_process(spec: dict, env: dict | None = None) -> subprocess.Popen:
    """Start the tiny sts-pipeline (tests.pipeline.test_pipeline.tiny_pipeline_kwargs(**spec)) in a child process."""
    env = dict(env or os.environ, STSGEN_TEST_CHILD="1")  # keep these homes (tests.conftest would replace them)
    return subprocess.Popen([sys.executable, "-m", "tests.faults.processes", "pipeline", json.dumps(spec)],
                            cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own process group: see kill_group


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a child started with start_new_session=True together with its own children: the ephemeral Prefect
    API server a flow process starts would otherwise outlive it (an orphan that keeps a core busy for the rest of
    the session, until later children time out starting their own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass
    proc.wait()


def run_until(proc: subprocess.Popen, done, timeout_s: float = 300) -> None:
    """SIGKILL `proc` as soon as `done()` is true (fails if the process ends first)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert proc.poll() is None, "finished before the fault: " + proc.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "fault point never reached"
        time.sleep(0.01)
    kill_group(proc)


def finish(proc: subprocess.Popen, timeout_s: float = 600) -> dict:
    output, _ = proc.communicate(timeout=timeout_s)
    text = output.decode()
    assert proc.returncode == 0, text[-4000:]
    return json.loads(text.strip().splitlines()[-1])


def _serve(port: int, latency_s: float, log: str, answers: int | None = None) -> None:
    import threading

    from tasks.llm.scripted_server import ScriptedOpenAI, default_responder

    budget, never = threading.Semaphore(answers or 0), threading.Event()

    def responder(messages, body):
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        with open(log, "a") as fh:
            fh.write(digest + "\n")
        # One unit per request (its first choice); past the budget, held open until the test kills the server.
        if answers is not None and "choice" not in body and not budget.acquire(blocking=False):
            never.wait()
        return default_responder(messages, body)

    server = ScriptedOpenAI(responder=responder, latency_s=latency_s, port=port)
    print("ready", flush=True)
    server.httpd.serve_forever()


def _pipeline(spec: dict) -> None:
    """The tiny sts-pipeline with the spec's plain values in its stage settings: `max_workers` shards at once in
    stages 2 and 3, `label_shard_size` units per label shard, `train` false: stop after labeling, `stage1_only`: run
    stage 1's flow alone with the settings the pipeline would give it (a test that reads only stage 1's outputs)."""
    from flows.generate_sts_triples import generate_sts_triples
    from flows.sts_pipeline import sts_pipeline
    from tasks.core.runners import ExecutionSettings
    from tasks.pipeline import plan_pipeline
    from tests.pipeline.test_pipeline import tiny_pipeline_kwargs

    kwargs = tiny_pipeline_kwargs(spec.pop("base_url"), Path(spec.pop("work")), Path(spec.pop("corpus")),
                                  Path(spec.pop("lm")), Path(spec.pop("encoder")), llm=spec.pop("llm", None))
    label = kwargs["label"]
    execution = ExecutionSettings(max_workers=spec.pop("max_workers", None))
    kwargs["retrieve"] = kwargs["retrieve"].model_copy(update={"execution": execution})
    kwargs["label"] = label.model_copy(update={"execution": execution,
                                               "shard_size": spec.pop("label_shard_size", label.shard_size)})
    if not spec.pop("train", True):
        kwargs["train"] = None
    stage1_only = spec.pop("stage1_only", False)
    kwargs.update(spec)
    if stage1_only:
        plan = plan_pipeline(kwargs["generate"], kwargs["retrieve"], kwargs["label"], kwargs["train"], None)
        outputs = {"generate-sts-triples": generate_sts_triples(settings=plan.generate, llm=kwargs["llm"],
                                                                output_dir=kwargs["output_dir"])}
    else:
        outputs = sts_pipeline(**kwargs)
    print(json.dumps(outputs), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        _serve(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else None)
    else:
        _pipeline(json.loads(sys.argv[2]))
