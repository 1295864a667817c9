"""Run-scoped outputs (tasks/core/runs.py): every run writes its own version under output_dir, a folder has one
owner at a time, `latest` moves only when a run finishes, and an unchanged stage is reused across run folders by its
content key (hard links), with no LLM request. Real Prefect flows (the session's test API), real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.core.config import ConfigError, LLMSettings
from tasks.core.runs import RunFolderBusy, list_runs, open_run, prune_runs
from tasks.generate.settings import VerifierSettings
from tests.conftest import PROJECT, generate_settings

# A stage-like flow: writes a committed folder (outputs, then the manifest), optionally waiting in between.
CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from prefect import flow
from tasks.core.runs import run_scoped
from tasks.core.store import write_manifest, write_parquet, fingerprint
import pyarrow as pa

@flow(name="toy-stage")
@run_scoped
def toy(output_dir: str, run: str | None = None, wait_s: float = 0.0, flag: str = "", release: str = "") -> str:
    folder = Path(output_dir) / "toy-stage"
    folder.mkdir(parents=True, exist_ok=True)
    digest = write_parquet(folder / "rows.parquet", pa.table({{"x": [1, 2, 3]}}))
    if flag:
        Path(flag).write_text(str(folder))
    time.sleep(wait_s)
    deadline = time.time() + 600
    while release and not Path(release).exists() and time.time() < deadline:  # held until the test says so
        time.sleep(0.1)
    write_manifest(folder, {{"stage": "toy-stage", "cache_key": fingerprint("toy")}}, {{"rows.parquet": digest}})
    return str(folder)

print(toy(output_dir={out!r}, run={run!r}, wait_s={wait_s}, flag={flag!r}, release={release!r}), flush=True)
"""


def toy_process(out: Path, run: str | None, wait_s: float = 0.0, flag: Path | None = None,
                env: dict | None = None, release: Path | None = None) -> subprocess.Popen:
    code = CHILD.format(root=str(PROJECT), out=str(out), run=run, wait_s=wait_s, flag=str(flag or ""),
                        release=str(release or ""))
    return subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert path.exists(), proc.stderr.read()[-3000:] if proc.poll() is not None else "timed out"


def test_a_second_run_into_a_busy_folder_fails_at_start_and_the_first_completes(tmp_path, child_env):
    out, flag, release = tmp_path / "out", tmp_path / "first-is-writing", tmp_path / "release-the-first"
    first = toy_process(out, "nightly", flag=flag, release=release, env=child_env)  # mid-stage until released
    wait_for(flag, first)
    second = toy_process(out, "nightly", env=child_env)
    _, err = second.communicate(timeout=180)
    release.write_text("")
    assert second.returncode != 0 and "RunFolderBusy" in err and "is in use by another run (pid" in err
    assert "give another run name" in err
    stdout, err = first.communicate(timeout=180)
    assert first.returncode == 0, err[-3000:]
    assert Path(stdout.strip()) == out / "nightly" / "toy-stage"
    assert os.readlink(out / "latest") == "nightly"
    assert [r["status"] for r in list_runs(out)] == ["finished"]


def test_runs_one_after_the_other_keep_both_versions_and_latest_points_at_the_later(tmp_path, child_env):
    out = tmp_path / "out"
    for _ in range(2):
        done = toy_process(out, "auto", env=child_env)
        stdout, err = done.communicate(timeout=180)
        assert done.returncode == 0, err[-3000:]
    runs = list_runs(out)
    assert len(runs) == 2 and all(r["stages"] == ["toy-stage"] and r["status"] == "finished" for r in runs)
    assert os.readlink(out / "latest") == runs[1]["name"] and runs[1]["latest"]
    assert (out / "latest" / "toy-stage" / "rows.parquet").is_file()
    assert all((Path(r["path"]) / "toy-stage" / "manifest.json").is_file() for r in runs)  # neither overwritten


def test_a_run_killed_mid_stage_leaves_latest_untouched(tmp_path, child_env, capsys):
    out, flag = tmp_path / "out", tmp_path / "writing"
    done = toy_process(out, "monday", env=child_env)
    assert done.wait(timeout=180) == 0
    killed = toy_process(out, "tuesday", wait_s=600, flag=flag, env=child_env)
    wait_for(flag, killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert os.readlink(out / "latest") == "monday"
    status = {r["name"]: r["status"] for r in list_runs(out)}
    assert status == {"monday": "finished", "tuesday": "interrupted"}
    with open_run(out / "tuesday", None):  # the kernel released the dead run's lock: the folder is free again
        pass
    from flows.cli import main

    assert main(["runs", "list", "--output-dir", str(out)]) == 0
    listed = capsys.readouterr().out
    assert "| monday | finished | toy-stage | yes |" in listed and "| tuesday | interrupted | - |" in listed
    assert main(["runs", "prune", "--keep", "0", "--output-dir", str(out)]) == 0  # never latest
    assert "removed 1 run(s): tuesday" in capsys.readouterr().out
    assert not (out / "tuesday").exists() and (out / "monday").is_dir()


def test_unchanged_generation_is_reused_across_run_folders_without_llm_requests(prefect_harness, scripted,
                                                                                 tiny_corpus, tmp_path):
    from flows.generate_sts_triples import generate_sts_triples

    generate = partial(generate_sts_triples, settings=generate_settings(tiny_corpus, n=6,
                                                                        verifier=VerifierSettings(judge=False)),
                       llm=LLMSettings(base_url=scripted.base_url, model="scripted-model",
                                       cache_path=str(tmp_path / "llm.sqlite")), output_dir=str(tmp_path / "out"))
    first = generate(run="scheduled")
    sent = len(scripted.chat_requests())
    assert sent > 0
    (tmp_path / "llm.sqlite").unlink()  # not even the response cache: the stage itself is reused
    second = generate(run="adhoc")
    assert len(scripted.chat_requests()) == sent  # no LLM request
    assert Path(first["triples"]).parent.parent.name == "scheduled"
    assert Path(second["triples"]).parent.parent.name == "adhoc"
    assert Path(first["triples"]).samefile(second["triples"])  # hard-linked, not copied or regenerated
    manifest = json.loads(Path(second["manifest"]).read_text())
    assert manifest["counts"]["triples"] == pq.read_table(second["triples"]).num_rows
    assert os.readlink(tmp_path / "out" / "latest") == "adhoc"


def test_bad_run_names_are_refused_before_anything_is_written(tmp_path):
    for name in ("latest", "../x", ".hidden", ""):
        with pytest.raises(ConfigError, match="not a usable run name"):
            with open_run(tmp_path / "out", name):
                pass
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="keep = -1"):
        prune_runs(tmp_path / "out", -1)
    assert issubclass(RunFolderBusy, ConfigError)
