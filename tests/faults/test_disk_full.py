"""(e) Disk full while writing an output: the write fails with an error naming the file, no half-written file is
left in place (outputs are written to a temp name, then renamed), an older version of the file survives intact,
and a re-run after space is freed completes without redoing finished work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.core.store import sha256_path, write_parquet
from tests.conftest import PROJECT, generate_settings

FILE_SIZE_LIMITED_WRITE = """
import resource, signal, sys
import pyarrow as pa
from tasks.core.store import write_parquet
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
import numpy as np
table = pa.table({"x": np.random.default_rng(0).random(200_000)})
write_parquet(sys.argv[1], table)
"""


def test_size_limited_write_fails_clearly_and_keeps_the_previous_file(tmp_path):
    target = tmp_path / "pairs.parquet"
    write_parquet(target, pa.table({"x": [1.0, 2.0]}))
    before = sha256_path(target)
    proc = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMITED_WRITE, str(target)], cwd=PROJECT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "OutputWriteError" in proc.stderr and f"Could not write {target}" in proc.stderr
    assert "nothing half-written" in proc.stderr
    assert sha256_path(target) == before and pq.read_table(target).num_rows == 2  # the old version, intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.parquet"]  # no temp file left behind


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (root only); skipped where mounting is not permitted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk, leave_bytes: int) -> None:
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * max(free - leave_bytes, 0))


def test_disk_full_during_a_stage_leaves_no_partial_output(prefect_harness, scripted, tiny_corpus, tmp_path,
                                                           small_disk):
    from flows.generate_sts_triples import generate_sts_triples
    from tasks.core.store import OutputWriteError
    from tasks.llm.scripted_server import is_judge_request
    from tests.generate.test_generate_flow import llm

    fill(small_disk, leave_bytes=2048)  # room for the folder, not for the outputs
    with pytest.raises(OutputWriteError, match="No space left on device") as raised:
        generate_sts_triples(settings=generate_settings(tiny_corpus, n=5), llm=llm(scripted, tmp_path),
                             output_dir=str(small_disk / "out"))
    assert "Could not write" in str(raised.value) and str(small_disk / "out") in str(raised.value)
    stage = small_disk / "out" / "generate-sts-triples"
    assert not stage.exists() or not any(stage.iterdir())  # nothing half-written, no temp file
    sent = len(scripted.chat_requests())
    judged = sum(is_judge_request(r["body"]["messages"]) for r in scripted.chat_requests())
    assert (sent - judged, judged) == (15, 15)  # 5 triples: 15 generations, each judged once

    (small_disk / "filler").unlink()
    paths = generate_sts_triples(settings=generate_settings(tiny_corpus, n=5), llm=llm(scripted, tmp_path),
                                 output_dir=str(small_disk / "out"))
    assert len(scripted.chat_requests()) == sent  # every answer came from the cache
    assert pq.read_table(paths["triples"]).num_rows == 5
