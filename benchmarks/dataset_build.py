"""build-dataset measured (issue 25); results in docs/results.md, reading verdicts in dataset_build.verdicts.md.

    # the default corpus against STS-B dev + test: how many of its sentences the decontamination would flag
    .venv/bin/python -m benchmarks.dataset_build contamination [--out data/annotations/corpus_eval_matches.csv]
    # build time: 10 runs × 1,000 triples made from the default corpus (the runs overlap like nightly runs without
    # avoid_used_sources), cold (empty encoder cache) and warm; MinHash LSH vs exact all-pairs Jaccard side by side
    .venv/bin/python -m benchmarks.dataset_build timing [--runs 10 --triples 1000]
    # the pairs a built version flagged (not the exact duplicates), for reading
    .venv/bin/python -m benchmarks.dataset_build flagged data/datasets/latest --out data/annotations/dataset_flagged.csv
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def corpus_sentences() -> list[str]:
    from tasks.core.config import CorpusSettings
    from tasks.corpus.sentences import load_corpus

    return load_corpus(CorpusSettings()).usable["text"].drop_duplicates().tolist()


def contamination(args) -> None:
    """Every usable default-corpus sentence checked as an anchor would be, at the default thresholds."""
    from tasks.core.decontamination import cosine_matches, ngram_containment
    from tasks.dataset.embeddings import encode_cached
    from tasks.dataset.eval_sets import load_eval_sentences
    from tasks.dataset.settings import DatasetSettings

    s = DatasetSettings()
    texts = corpus_sentences()
    evals = load_eval_sentences(s.eval_sets)
    t = time.perf_counter()
    best, share = ngram_containment(texts, evals, s.eval_ngram)
    ngram_s = time.perf_counter() - t
    t = time.perf_counter()
    vectors, encoded = encode_cached(texts + evals.texts, s.encoder)
    embed_s = time.perf_counter() - t
    best_e, cosine = cosine_matches(vectors[:len(texts)], vectors[len(texts):])
    frame = pd.DataFrame({"sentence": texts, "ngram_share": share.round(4), "ngram_match": [evals.texts[i] for i in best],
                          "ngram_match_id": [evals.ids[i] for i in best], "cosine": cosine.round(4),
                          "cosine_match": [evals.texts[i] for i in best_e], "cosine_match_id": [evals.ids[i] for i in best_e]})
    overlap = frame["ngram_share"] >= s.eval_containment
    close = frame["cosine"] >= s.eval_cosine
    print(f"default corpus: {len(texts)} usable distinct sentences; STS-B dev + test: {len(evals.texts)} distinct "
          f"sentences\n| check | threshold | corpus sentences flagged |\n|---|---|---|\n"
          f"| word {s.eval_ngram}-gram containment | ≥ {s.eval_containment} | {int(overlap.sum())} |\n"
          f"| encoder cosine | ≥ {s.eval_cosine} | {int(close.sum())} |\n| either | | {int((overlap | close).sum())} |")
    for lower in (0.6, 0.7, 0.8):
        print(f"  near misses: containment ≥ {lower}: {int((frame['ngram_share'] >= lower).sum())}; "
              f"cosine ≥ {lower + 0.1:.1f}: {int((frame['cosine'] >= lower + 0.1).sum())}")
    print(f"times: n-grams {ngram_s:.1f} s; encoder {embed_s:.1f} s ({encoded} sentences encoded now)")
    # Duplicates inside the corpus itself, at the build's thresholds (every usable sentence as an anchor).
    from tasks.dataset.dedup import dedup_anchors

    found = dedup_anchors(texts, vectors, s, np.ones(len(texts), dtype=bool))
    print("duplicates inside the corpus (as anchors, the first kept): "
          + ", ".join(f"{reason} {len(rows)}" for reason, rows in found.items()))
    if args.out:
        flagged = frame[overlap | close | (frame["cosine"] >= 0.8) | (frame["ngram_share"] >= 0.6)]
        flagged.sort_values("cosine", ascending=False).to_csv(args.out, index=False)
        print(f"{len(flagged)} flagged or near-miss sentences → {args.out}")
        pd.DataFrame([{"reason": reason, "score": score, "text": texts[j], "matched_text": texts[i], "verdict": ""}
                      for reason in ("near_duplicate_anchor", "paraphrase_anchor")
                      for j, (i, score) in found.get(reason, {}).items()]
                     ).to_csv(Path(args.out).with_name("corpus_duplicates.csv"), index=False)


def write_run(root: Path, name: str, triples: pd.DataFrame, started: float) -> None:
    """A committed stage-1 run folder as generate-sts-triples leaves it (the columns the build reads)."""
    from tasks.contracts import TRIPLES_SCHEMA
    from tasks.core.store import write_json, write_manifest, write_parquet

    folder = root / name / "generate-sts-triples"
    table = pa.Table.from_pylist(triples.to_dict("records"), schema=TRIPLES_SCHEMA)  # the other columns null
    digest = write_parquet(folder / "triples.parquet", table)
    write_manifest(folder, {"stage": "generate-sts-triples", "parameters": {"pattern": {"kind": "sts"}}},
                   {"triples.parquet": digest})
    write_json(root / name / ".run.json", {"name": name, "started": started, "status": "finished"})


def synthetic_runs(root: Path, runs: int, per_run: int, seed: int = 0) -> int:
    """`runs` runs of `per_run` triples: anchors sampled from the default corpus (each run independently, so runs
    overlap as nightly runs without avoid_used_sources do), the other slots other corpus sentences."""
    from tasks.contracts import sentence_id

    texts = np.array(corpus_sentences())
    rng = np.random.default_rng(seed)
    for r in range(runs):
        rows = rng.choice(len(texts), size=(per_run, 4), replace=True)
        anchors = texts[rows[:, 0]]
        frame = pd.DataFrame({"source_id": [sentence_id(a) for a in anchors], "anchor": anchors,
                              "positive": texts[rows[:, 1]], "intermediate": texts[rows[:, 2]],
                              "negative": texts[rows[:, 3]], "pattern": "sts"}).drop_duplicates("source_id")
        write_run(root, f"run{r:02d}", frame, started=1_700_000_000 + r)
    return runs * per_run


def exact_jaccard_pairs(texts: list[str], threshold: float, size: int) -> set[tuple[int, int]]:
    """The obvious alternative to MinHash LSH: every pair's exact character-shingle Jaccard (a sparse product)."""
    from sklearn.feature_extraction.text import CountVectorizer

    x = CountVectorizer(analyzer="char", ngram_range=(size, size), lowercase=False, binary=True).fit_transform(texts)
    inter = (x @ x.T).tocoo()
    sizes = np.asarray(x.sum(axis=1)).ravel()
    jac = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = (inter.row < inter.col) & (jac >= threshold)
    return set(zip(inter.row[keep].tolist(), inter.col[keep].tolist()))


def timing(args) -> None:
    from tasks.dataset.build import build_version, prepare_build
    from tasks.dataset.dedup import minhash_pairs, normalized
    from tasks.dataset.settings import DatasetSettings

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["STSGEN_HOME"] = str(tmp / "home")  # an empty encoder cache: the cold build
        total = synthetic_runs(tmp / "runs", args.runs, args.triples)
        print(f"{args.runs} runs × {args.triples} triples ({total} rows) from the default corpus")
        print("| build | runs | triples in | kept | removed by reason | seconds (prepare / encode / eval checks / "
              "dedup, MinHash part / total) |\n|---|---|---|---|---|---|")
        for label, settings in (("cold (empty encoder cache)", DatasetSettings()),
                                ("warm (encoder cache filled; other Jaccard threshold → new version)",
                                 DatasetSettings(near_duplicate_jaccard=0.71)),
                                ("n-gram checks only (no encoder)",
                                 DatasetSettings(paraphrase_cosine=None, eval_cosine=None))):
            t = time.perf_counter()
            job = prepare_build(tmp / "runs", None, settings)
            folder, manifest, _ = build_version(job, tmp / "ds")
            wall = time.perf_counter() - t
            c, tm = manifest["counts"], manifest["timings"]
            if args.flagged_out and label.startswith("cold"):
                write_flagged(folder, Path(args.flagged_out))
            print(f"| {label} | {c['runs']} | {c['triples_in']} | {c['triples']} | "
                  f"{json.dumps(c['removed_by_reason']['triples'])} | {tm['prepare_s']:.1f} / {tm['embed_s']:.1f} / "
                  f"{tm['eval_s']:.1f} / {tm['dedup_s']:.1f}, {tm['minhash_s']:.1f} / {wall:.1f} |", flush=True)
        anchors = normalized(pd.Series(corpus_sentences()[: args.subset])).tolist()
        s = DatasetSettings()
        t = time.perf_counter()
        lsh = {(i, j) for i, j, _ in minhash_pairs(anchors, s.near_duplicate_jaccard, s.shingle_chars, s.num_perm)}
        lsh_s = time.perf_counter() - t
        t = time.perf_counter()
        exact = exact_jaccard_pairs(anchors, s.near_duplicate_jaccard, s.shingle_chars)
        exact_s = time.perf_counter() - t
        print(f"\nnear-duplicate anchors among {len(anchors)} corpus sentences, Jaccard ≥ {s.near_duplicate_jaccard}: "
              f"MinHash LSH {lsh_s:.2f} s, {len(lsh)} pairs; exact all pairs (sparse product) {exact_s:.2f} s, "
              f"{len(exact)} pairs; LSH recall {len(lsh & exact) / max(len(exact), 1):.3f}, "
              f"precision {len(lsh & exact) / max(len(lsh), 1):.3f}; time ratio exact/LSH {exact_s / lsh_s:.2f}")


def write_flagged(version: Path, out: Path) -> None:
    """Every removed row of a version that is not an exact duplicate, with what it matched, for reading."""
    table = pq.read_table(version / "removed.parquet").to_pandas()
    rows = table[(table["table"] == "triples") & (table["reason"] != "duplicate_source")]
    rows[["reason", "column", "score", "text", "matched_text", "matched_id", "run", "row_id"]].assign(
        verdict="").to_csv(out, index=False)
    print(f"{len(rows)} flagged rows → {out}: {rows['reason'].value_counts().to_dict()}")


def flagged(args) -> None:
    write_flagged(Path(args.version), Path(args.out))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("contamination")
    p.add_argument("--out", default=None)
    p = sub.add_parser("timing")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--triples", type=int, default=1000)
    p.add_argument("--subset", type=int, default=4000, help="corpus sentences for MinHash vs exact Jaccard")
    p.add_argument("--flagged-out", default=None, help="the cold build's flagged rows, for reading")
    p = sub.add_parser("flagged")
    p.add_argument("version")
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    {"contamination": contamination, "timing": timing, "flagged": flagged}[args.what](args)


if __name__ == "__main__":
    main()
