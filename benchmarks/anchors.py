"""Anchors before and after the anchor filter and the source mix (issue 32): 100 anchors drawn as stage 1 drew them
before (the gensim corpus, any usable sentence) and 100 as it draws them now (the default corpus, the filter, every
source the same share), written side by side for reading; the filter's counts per reason on the whole corpus.

    .venv/bin/python -m benchmarks.anchors [--n 100] [--seed 13]
Writes benchmarks/data/anchors_before.csv, anchors_after.csv; the reading is benchmarks/anchors.verdicts.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.core.config import CorpusSettings  # noqa: E402
from tasks.core.corpus import load_corpus  # noqa: E402
from tasks.generate.anchors import AnchorSettings, sample_anchors  # noqa: E402

OUT = Path(__file__).resolve().parent / "data"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    before_corpus = load_corpus(CorpusSettings(source="gensim"))
    before, before_counts = sample_anchors(before_corpus, args.n, args.seed,
                                           AnchorSettings(filter=False, exclude_eval=[]))
    started = time.perf_counter()
    corpus = load_corpus(CorpusSettings())
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    after, counts = sample_anchors(corpus, args.n, args.seed, AnchorSettings())
    sampled = time.perf_counter() - started
    OUT.mkdir(exist_ok=True)
    suffix = "" if args.seed == 13 else f"_seed{args.seed}"  # another seed: a confirmation draw beside the first
    before[["source", "doc_id", "text"]].to_csv(OUT / f"anchors_before{suffix}.csv", index_label="i")
    after[["source", "doc_id", "text"]].to_csv(OUT / f"anchors_after{suffix}.csv", index_label="i")
    print(json.dumps({"before": before_counts, "after": counts, "load_s": round(loaded, 1),
                      "filter_and_sample_s": round(sampled, 1)}, indent=1))


if __name__ == "__main__":
    main()
