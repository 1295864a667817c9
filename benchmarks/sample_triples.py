"""Print a seeded sample of triples (and the quarantine summary) from a generate-sts-triples output, for hand-checking.

    .venv/bin/python -m benchmarks.sample_triples data/outputs/generate-sts-triples --k 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    manifest = json.loads((args.folder / "manifest.json").read_text())
    print("per kind:", json.dumps(manifest["counts"]["per_kind"]))
    print("rejections by reason:", json.dumps(manifest["counts"]["rejected_by_reason"]))
    print("llm:", json.dumps(manifest["llm_stats"]), "timings:", json.dumps(manifest["timings"]))
    triples = pq.read_table(args.folder / "triples.parquet").to_pandas()
    sample = triples.sample(n=min(args.k, len(triples)), random_state=args.seed)
    for i, row in enumerate(sample.itertuples(), start=1):
        print(f"\n[{i}] A: {row.anchor}\n    +: {row.positive}\n    m: {row.intermediate}\n    -: {row.negative}")


if __name__ == "__main__":
    main()
