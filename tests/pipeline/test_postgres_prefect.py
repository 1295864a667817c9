"""A Postgres-backed Prefect server (a throwaway PostgreSQL cluster, started with flows/stack.py) and LLM requests
paced by a Prefect global concurrency limit (llm.prefect_limit): the generate-sts-triples flow runs in another
process against the scripted OpenAI server, and the request arrival times show the limit's rate held."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows import stack
from tasks.core.config import ConfigError
from tasks.llm.scripted_server import ScriptedOpenAI, prompt_kind
from tasks.llm.server import free_port
from tests.conftest import PROJECT

pytestmark = pytest.mark.slow

LIMIT, DECAY = 5, 10.0  # burst 5, then 10 requests/s sustained
LIMIT_NAME = "stsgen-llm-test"

EXTRA_DOC = ("The museum opened a new wing for modern paintings last week. Visitors waited in long lines outside the "
             "main entrance. The director said the collection had taken ten years to build. Several paintings "
             "arrived from a private library in the north. The city plans to keep the museum open late on Fridays.")


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found and not shutil.which("initdb"):
        pytest.skip("PostgreSQL server binaries (initdb) are not installed (Debian: apt-get install postgresql)")
    return Path(found[-1] if found else shutil.which("initdb")).parent


@pytest.fixture(scope="module")
def postgres():
    """A temporary PostgreSQL cluster on 127.0.0.1 (trust auth, no fsync), stopped and deleted afterwards.
    Postgres refuses to run as root: as root, initdb/pg_ctl run as the `postgres` user in a folder it owns."""
    bindir = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="stsgen-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", free_port()

    def pg(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=timeout, cwd=root)

    init = pg(str(bindir / "initdb"), "-D", str(data), "-U", "prefect", "-A", "trust", "-E", "UTF8", "--no-sync")
    assert init.returncode == 0, init.stdout[-2000:] + init.stderr[-2000:]
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -F -c synchronous_commit=off -c max_connections=200"
    started = pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "postgres.log"), "-o", options, "-w",
                 "-t", "60", "start")
    try:
        assert started.returncode == 0, started.stderr[-2000:] + (root / "postgres.log").read_text()[-2000:]
        yield {"port": port, "dsn": f"postgresql://prefect@127.0.0.1:{port}/postgres",
               "url": f"postgresql+asyncpg://prefect@127.0.0.1:{port}/postgres"}
    finally:
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_prefect(postgres, tmp_path_factory):
    """A real Prefect server on the Postgres cluster, started and stopped with flows/stack.py."""
    settings = stack.StackSettings(prefect_port=free_port(), home=tmp_path_factory.mktemp("pg-stack"),
                                   database_url=postgres["url"])
    started = time.monotonic()
    try:
        stack.start_prefect_server(settings)
        print(f"\nPrefect server on Postgres healthy after {time.monotonic() - started:.1f} s")
        yield settings
    finally:
        assert "prefect-server" in stack.down(settings)


def prefect_cli(settings, *args, timeout=120):
    exe = Path(sys.executable).with_name("prefect")
    return subprocess.run([str(exe), *args], env=stack.prefect_env(settings), cwd=PROJECT, capture_output=True,
                           text=True, timeout=timeout)


def query(dsn: str, sql: str, *args) -> list[dict]:
    import asyncpg

    async def go():
        conn = await asyncpg.connect(dsn)
        try:
            return [dict(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())


def max_in_window(times: list[float], width: float) -> int:
    return max(sum(1 for t in times if t0 <= t < t0 + width) for t0 in times)


def test_missing_or_unusable_limit_fails_fast(pg_prefect):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tasks.llm.ratelimit import check_prefect_limit

    made = prefect_cli(pg_prefect, "gcl", "create", "stsgen-no-decay", "--limit", "3")
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    with temporary_settings(updates={PREFECT_API_URL: pg_prefect.api_url}):
        with pytest.raises(ConfigError, match="prefect gcl create stsgen-missing --limit N --slot-decay-per-second"):
            check_prefect_limit("stsgen-missing")
        with pytest.raises(ConfigError, match="no slot decay.*prefect gcl update stsgen-no-decay"):
            check_prefect_limit("stsgen-no-decay")
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(ConfigError, match="PREFECT_API_URL"):
            check_prefect_limit("anything")


FLOW_SCRIPT = """
import json, sys, time
from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import CorpusSettings, LLMSettings
from tasks.generate.settings import GenerateSettings, SamplingSettings
a = json.loads(sys.argv[1])
t0 = time.perf_counter()
# One choice per request: this test counts requests and quarantine rows per source (best of N: test_best_of_n.py).
settings = GenerateSettings(n=a["n"], corpus=CorpusSettings(source=a["corpus"]), sampling=SamplingSettings(candidates=1))
paths = generate_sts_triples(settings=settings, llm=LLMSettings(**a["llm"]), output_dir=a["out"])
print(json.dumps({"paths": paths, "seconds": time.perf_counter() - t0}))
"""


def test_flow_requests_paced_by_prefect_global_limit(pg_prefect, postgres, tiny_corpus, tmp_path):
    (tiny_corpus / "d.txt").write_text(EXTRA_DOC)
    n = 15
    made = prefect_cli(pg_prefect, "gcl", "create", LIMIT_NAME, "--limit", str(LIMIT),
                       "--slot-decay-per-second", str(DECAY))
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    # The limit lives in Postgres.
    rows = query(postgres["dsn"], "SELECT \"limit\", slot_decay_per_second FROM concurrency_limit_v2 WHERE name = $1",
                 LIMIT_NAME)
    assert rows == [{"limit": LIMIT, "slot_decay_per_second": DECAY}]

    with ScriptedOpenAI() as llm:
        out = tmp_path / "out"
        args = {"n": n, "corpus": str(tiny_corpus), "out": str(out),
                "llm": {"base_url": llm.base_url, "model": "scripted-model", "prefect_limit": LIMIT_NAME,
                        "max_concurrency": 16, "cache_path": "off"}}
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-c", FLOW_SCRIPT, json.dumps(args)], env=stack.prefect_env(pg_prefect),
                             cwd=PROJECT, capture_output=True, text=True, timeout=400)
        wall = time.monotonic() - started
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
        requests = llm.chat_requests()

    # Every source accounted for: a complete triple or a quarantined row.
    triples = pq.read_table(result["paths"]["triples"])
    rejected = pq.read_table(result["paths"]["rejected"]).to_pylist()
    sources = set(triples.column("source_id").to_pylist()) | {r["source_id"] for r in rejected}
    assert len(sources) == n and triples.num_rows + len({r["source_id"] for r in rejected}) == n
    manifest = json.loads(Path(result["paths"]["manifest"]).read_text())
    assert manifest["llm_stats"]["requests_sent"] == len(requests) >= 3 * n
    assert manifest["parameters"]["llm"]["prefect_limit"] == LIMIT_NAME

    # The rate held. A token bucket of capacity LIMIT refilled at DECAY/s lets at most LIMIT + DECAY*w requests
    # start in any window of w seconds (+1, and w widened by 0.2 s: arrival times at the server carry HTTP and
    # scheduling jitter on a busy machine). Unpaced, a kind's 15 requests arrive within ~0.1 s, so the short windows
    # (bound 10.5 at w = 0.25) still fail without the limit.
    times = sorted(r["t"] for r in requests)
    windows = {w: max_in_window(times, w) for w in (0.25, 0.5, 1.0, 2.0)}
    for w, count in windows.items():
        assert count <= LIMIT + DECAY * (w + 0.2) + 1, (w, count, windows)
    # Within one prompt kind (one batch, all requests queued at once) the limit alone sets the pace:
    # at least (n - LIMIT) / DECAY seconds from the first to the last. Unpaced: ~0.1 s.
    spans = {}
    for kind in ("positive", "intermediate", "negative"):
        kt = sorted(r["t"] for r in requests if prompt_kind(r["body"]["messages"][0]["content"]) == kind)
        spans[kind] = kt[-1] - kt[0]
        assert spans[kind] >= 0.8 * (len(kt) - LIMIT) / DECAY, (kind, spans)
    span = times[-1] - times[0]
    assert span >= 0.8 * (len(times) - 3 * LIMIT) / DECAY  # the burst can refill between the three kinds

    # The server really is on Postgres: the run is in its flow_run table, completed.
    runs = query(postgres["dsn"], "SELECT fr.state_type::text AS state FROM flow_run fr JOIN flow f ON f.id = "
                 "fr.flow_id WHERE f.name = 'generate-sts-triples'")
    assert runs and runs[-1]["state"] == "COMPLETED"
    per_kind = ", ".join(f"{k} {v:.2f}" for k, v in spans.items())
    print(f"\nrequests {len(requests)}, span {span:.2f} s (per kind {per_kind}), max per window {windows}, "
          f"rate_limit_wait_s {manifest['llm_stats']['rate_limit_wait_s']:.1f}, flow {result['seconds']:.1f} s, "
          f"subprocess {wall:.1f} s")
