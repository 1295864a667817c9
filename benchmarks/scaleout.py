"""The CPU stages on a Dask cluster, measured side by side with the default thread pool in one run.

retrieve-contexts and label-pairs run with the thread pool, then on a loopback Dask LocalCluster (worker processes
joined over TCP, started by the flow: `workers="dask"`), on the same inputs. Reports wall time per arm and whether
the outputs agree. (Workers of an external cluster need PREFECT_API_URL of the Prefect server the flow uses.)

    .venv/bin/python -m benchmarks.scaleout --triples data/outputs/latest/generate-sts-triples/triples.parquet \\
        [--max-triples 40] [--dask-workers 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import benchmarks.prefect_env  # noqa: F401  (sets Prefect's env before Prefect is imported)
from flows.label_pairs import label_pairs
from flows.retrieve_contexts import retrieve_contexts
from tasks.core.runners import ExecutionSettings
from tasks.core.store import write_parquet
from tasks.label.settings import LabelSettings
from tasks.retrieve.settings import RetrieveSettings


def same(a: Path, b: Path, floats: tuple[str, ...]) -> str:
    x, y = pq.read_table(a).to_pandas(), pq.read_table(b).to_pandas()
    cols = [c for c in x.columns if c.startswith(floats)]
    exact = x.drop(columns=cols).equals(y.drop(columns=cols))
    close = np.allclose(x[cols].fillna(9).to_numpy(float), y[cols].fillna(9).to_numpy(float), atol=1e-4)
    return f"{'identical' if exact else 'DIFFERENT'} rows; scores within 1e-4: {close}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    ap.add_argument("--max-triples", type=int, default=40)
    ap.add_argument("--dask-workers", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="stsgen-scaleout-"))
    triples = work / "triples.parquet"
    write_parquet(triples, pq.read_table(args.triples).slice(0, args.max_triples))
    # the shards that scale out (the rating: a request a pair); float32 as the recorded timings were
    label = LabelSettings(method="context", shard_size=4, dtype="float32")
    # Index, sentence tables and the coherence model are built (or reused from $STSGEN_HOME) before timing.
    retrieve_contexts(sentences=str(triples), output_dir=str(work / "warm"))
    rows = []
    for arm, execution in (("thread pool (2 threads)", ExecutionSettings(workers="threads", max_workers=2)),
                           (f"Dask LocalCluster ({args.dask_workers} worker processes over TCP on 127.0.0.1)",
                            ExecutionSettings(workers="dask", max_workers=args.dask_workers))):
        out = work / arm.split()[0].lower()
        t = time.perf_counter()
        r = retrieve_contexts(sentences=str(triples), output_dir=str(out),
                              settings=RetrieveSettings(shard_size=32, execution=execution))
        t_retrieve = time.perf_counter() - t
        t = time.perf_counter()
        lab = label_pairs(contexts=r["contexts"], triples=str(triples),
                          settings=label.model_copy(update={"execution": execution}), output_dir=str(out))
        rows.append((arm, t_retrieve, time.perf_counter() - t, r["contexts"], lab["pairs"]))
    n = pq.read_table(triples).num_rows
    print(f"{n} triples ({4 * n} sentences), default corpus, 2 cores\n")
    print("| arm | retrieve-contexts s | label-pairs s |\n|---|---|---|")
    for arm, tr, tl, _, _ in rows:
        print(f"| {arm} | {tr:.1f} | {tl:.1f} |")
    print(f"\ncontexts: {same(Path(rows[0][3]), Path(rows[1][3]), ('screen_score', 'coherence_score', 'rank_score'))}")
    print(f"pairs: {same(Path(rows[0][4]), Path(rows[1][4]), ('label', 'context_label'))}")


if __name__ == "__main__":
    main()
