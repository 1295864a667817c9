"""Load: ~2,000 stage-1 requests (the generate flow, n sources × 3 kinds) against the scripted OpenAI-compatible
server with injected faults (HTTP 429 with Retry-After and HTTP 500, each on `fault_rate / 2` of all HTTP attempts,
retries included). Reports whether every row is accounted for and whether the configured request rate held,
measured from the arrival times at the server over every 1-s window.

    .venv/bin/python -m benchmarks.load [--n 667] [--fault-rate 0.10] [--rpm 6000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

import benchmarks.prefect_env  # noqa: F401  (sets Prefect's env before Prefect is imported)
from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import LLMSettings
from tasks.core.store import read_manifest
from tasks.generate.settings import GenerateSettings
from tasks.llm.scripted_server import ScriptedOpenAI


def max_in_window(times: list[float], window_s: float) -> int:
    """Most arrivals in any window of `window_s` seconds (two pointers over the sorted times)."""
    times, best, start = sorted(times), 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=667)
    ap.add_argument("--fault-rate", type=float, default=0.10)
    ap.add_argument("--rpm", type=float, default=6000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    script = [("status", 429, {"Retry-After": "0"}) if r < args.fault_rate / 2 else ("status", 500)
              if r < args.fault_rate else "ok" for r in (rng.random() for _ in range(4 * args.n * 3))]
    work = Path(tempfile.mkdtemp(prefix="stsgen-load-"))
    with ScriptedOpenAI(latency_s=0.01) as server:
        server.push(*script)
        llm = LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(work / "llm.sqlite"),
                          requests_per_minute=args.rpm, max_concurrency=args.concurrency, max_retries=6,
                          backoff_base_s=0.05, backoff_max_s=1.0)
        t0 = time.perf_counter()
        paths = generate_sts_triples(settings=GenerateSettings(n=args.n, batch_size=256), llm=llm,
                                     output_dir=str(work / "out"))
        seconds = time.perf_counter() - t0
        requests = server.chat_requests()
    manifest = read_manifest(Path(paths["manifest"]).parent)
    stats, counts = manifest["llm_stats"], manifest["counts"]
    rejected = pq.read_table(paths["rejected"]).to_pandas()
    triples = pq.read_table(paths["triples"]).to_pandas()
    injected = {code: sum(1 for r in requests if isinstance(r["action"], tuple) and r["action"][1] == code)
                for code in (429, 500)}
    incomplete = set(rejected["source_id"].dropna())
    accounted = len(triples) + len(incomplete - set(triples["source_id"])) == args.n
    times = [r["t"] for r in requests]
    rate = args.rpm / 60
    print(f"n={args.n} sources × 3 kinds, fault rate {args.fault_rate:.0%}, limit {args.rpm:.0f} requests/min "
          f"({rate:.0f}/s), concurrency {args.concurrency}, flow wall time {seconds:.1f} s\n")
    print("| measure | value |\n|---|---|")
    rows = [
        ("HTTP attempts received by the server", len(requests)),
        ("… answered 429 (Retry-After: 0) / 500", f"{injected[429]} / {injected[500]}"),
        ("logical requests (attempts − retries)", stats["requests_sent"] - stats["retries"]),
        ("retries (client)", stats["retries"]),
        ("requests failed after all retries (→ quarantine llm_error)", stats["failures"]),
        ("complete triples", len(triples)),
        ("quarantine rows by reason", dict(counts["rejected_by_reason"])),
        ("every source accounted for (triple or quarantine rows)", accounted),
        ("client-counted attempts = server-received attempts", stats["requests_sent"] == len(requests)),
        (f"max attempts in any 1-s window (limiter bound {rate + 1:.0f})", max_in_window(times, 1.0)),
        (f"max attempts in any 10-s window (limiter bound {10 * rate + 1:.0f})", max_in_window(times, 10.0)),
        ("mean rate over the run (attempts/s)", f"{(len(times) - 1) / (max(times) - min(times)):.1f}"),
    ]
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
