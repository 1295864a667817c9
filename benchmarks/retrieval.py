"""Stage-2 retrieval, measured side by side in one run on all corpora together (gensim default + the five corpora in
../shared/data/corpora, ~200k sentences).

1. Screening speed and agreement: our vectorized TF-IDF and BM25 screeners vs rank-bm25's `BM25Okapi.get_scores`
   scoring the same corpus for the same queries: queries/s, top-K overlap, peak memory (RSS).
2. Intrinsic quality: sentences drawn from held-out documents of the corpus; the rank of their true context
   (c<, c>) after screening alone and after coherence ranking (recall@1, recall@10, MRR); the coherence model's
   held-out accuracy and ROC AUC. Contexts that contain the query sentence itself are excluded.

    .venv/bin/python -m benchmarks.retrieval [--queries 300] [--bm25-queries 30] [--screen-k 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpora import CORPORA  # noqa: E402
from tasks.core.store import fingerprint  # noqa: E402
from tasks.retrieve.coherence import CoherenceSettings, train_or_load  # noqa: E402
from tasks.retrieve.contexts import context_windows  # noqa: E402
from tasks.retrieve.prepared_corpus import load_corpora  # noqa: E402
from tasks.retrieve.retrieval import CandidateScorer, combine_scores  # noqa: E402
from tasks.retrieve.screening import build_index, top_k  # noqa: E402


def rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean([len(set(x[x >= 0]) & set(y[y >= 0])) / max(1, len(set(y[y >= 0]))) for x, y in zip(a, b)]))


def rank_metrics(ranks: list[int | None]) -> dict:
    r = np.array([x if x is not None else 10**9 for x in ranks])
    return {"recall@1": float((r == 0).mean()), "recall@10": float((r < 10).mean()),
            "mrr": float(np.mean([1.0 / (x + 1) if x < 10**9 else 0.0 for x in r]))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--bm25-queries", type=int, default=30)
    parser.add_argument("--screen-k", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100, help="top-K compared with rank-bm25")
    parser.add_argument("--train-contexts", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--skip-screening", action="store_true", help="only the intrinsic-quality part")
    args = parser.parse_args()
    corpora = [c for c in CORPORA if c.source == "default" or Path(c.source).exists()]
    t = time.perf_counter()
    sentences, inputs, _ = load_corpora(corpora)
    contexts = context_windows(sentences, k=1)
    print(f"corpus: {len(corpora)} sources, {len(sentences)} sentences, {len(contexts)} contexts "
          f"(load + windows {time.perf_counter() - t:.1f} s)")
    rng = np.random.default_rng(0)
    texts = (contexts["left"] + " " + contexts["right"]).tolist()

    tfidf = screening_part(args, contexts, texts, rng)
    intrinsic_part(args, contexts, sentences, inputs, tfidf, rng)


def screening_part(args, contexts, texts, rng):
    """1. screening speed and agreement with rank-bm25."""
    t = time.perf_counter()
    tfidf = build_index(texts, "tfidf")
    t_tfidf_build = time.perf_counter() - t
    t = time.perf_counter()
    bm25 = build_index(texts, "bm25", ngram_range=(1, 1))
    t_bm25_build = time.perf_counter() - t
    if args.skip_screening:
        return tfidf
    query_rows = rng.choice(len(contexts), size=args.queries, replace=False)
    queries = contexts["centre"].to_numpy()[query_rows].tolist()
    t = time.perf_counter()
    idx_tfidf, _ = top_k(tfidf, queries, args.k)
    qps_tfidf = len(queries) / (time.perf_counter() - t)
    t = time.perf_counter()
    idx_bm25, _ = top_k(bm25, queries, args.k)
    qps_bm25 = len(queries) / (time.perf_counter() - t)
    from rank_bm25 import BM25Okapi

    analyzer = bm25.vectorizer.build_analyzer()
    t = time.perf_counter()
    reference = BM25Okapi([analyzer(x) for x in texts])
    t_ref_build = time.perf_counter() - t
    sub = queries[: args.bm25_queries]
    t = time.perf_counter()
    ref_top = []
    for q in sub:
        scores = reference.get_scores(analyzer(q))
        top = np.argsort(-scores, kind="stable")[: args.k]
        ref_top.append(np.where(scores[top] > 0, top, -1))
    qps_ref = len(sub) / (time.perf_counter() - t)
    ref_top = np.array(ref_top)
    print("\n## Screening (top-%d, %d contexts)" % (args.k, len(contexts)))
    print("| screener | index build s | queries/s | top-K overlap with rank-bm25 |\n|---|---|---|---|")
    print(f"| rank-bm25 BM25Okapi (reference) | {t_ref_build:.1f} | {qps_ref:.2f} | 1.000 |")
    print(f"| stsgen bm25 (sparse, batched) | {t_bm25_build:.1f} | {qps_bm25:.1f} | "
          f"{overlap(idx_bm25[: len(sub)], ref_top):.3f} |")
    print(f"| stsgen tfidf uni+bigram (paper) | {t_tfidf_build:.1f} | {qps_tfidf:.1f} | "
          f"{overlap(idx_tfidf[: len(sub)], ref_top):.3f} |")
    print(f"speed-up bm25 vs rank-bm25: {qps_bm25 / qps_ref:.0f}x; peak RSS so far {rss_peak_mb():.0f} MB")
    return tfidf


def intrinsic_part(args, contexts, sentences, inputs, tfidf, rng):
    """2. intrinsic quality on held-out documents."""
    rng = np.random.default_rng(1)  # own stream: the same queries whether or not part 1 ran
    corpus_key = fingerprint({"inputs": [i["sha256"] for i in inputs], "benchmark": "retrieval"})
    settings = CoherenceSettings(encoder="bilstm", max_train_contexts=args.train_contexts, epochs=args.epochs)
    t = time.perf_counter()
    trained = train_or_load(contexts, sentences, corpus_key, settings, 1)
    print(f"\ncoherence model: {'reused' if trained.reused else 'trained'} in {time.perf_counter() - t:.0f} s; "
          f"held-out {json.dumps(trained.metrics['heldout'])}")
    heldout = set(json.loads((trained.folder / "heldout_docs.json").read_text()))
    pool = np.flatnonzero(contexts["doc_id"].isin(heldout).to_numpy())
    rows = rng.choice(pool, size=min(args.queries, len(pool)), replace=False)
    docs, pos = contexts["doc_id"].to_numpy(), contexts["position"].to_numpy()
    key_to_row = {(d, p): i for i, (d, p) in enumerate(zip(docs, pos))}
    exclude = [np.array([key_to_row[(docs[r], pos[r] + o)] for o in (-1, 1) if (docs[r], pos[r] + o) in key_to_row])
               for r in rows]
    q_texts = contexts["centre"].to_numpy()[rows].tolist()
    cand, screen = top_k(tfidf, q_texts, args.screen_k, exclude=exclude)
    t = time.perf_counter()
    scorer = CandidateScorer(trained, contexts, q_texts, cand)
    t_encode = time.perf_counter() - t
    screen_ranks, coh_ranks, mixed_ranks = [], [], []
    t = time.perf_counter()
    for i, r in enumerate(rows):
        c = cand[i][cand[i] >= 0]
        hit = np.flatnonzero(c == r)
        screen_ranks.append(int(hit[0]) if len(hit) else None)
        logits = scorer.logits(i, c)
        for scores, ranks in ((logits, coh_ranks), (combine_scores(logits, screen[i][cand[i] >= 0], 1.0),
                                                     mixed_ranks)):
            order = c[np.lexsort((c, -scores))]
            hit = np.flatnonzero(order == r)
            ranks.append(int(hit[0]) if len(hit) else None)
    t_rank = time.perf_counter() - t
    print(f"\n## Intrinsic: rank of the true context ({len(rows)} held-out sentences, screen top-{args.screen_k})")
    print("| after | recall@1 | recall@10 | MRR |\n|---|---|---|---|")
    for name, ranks in (("TF-IDF screening", screen_ranks), ("coherence ranking alone (paper)", coh_ranks),
                        ("z(coherence) + z(screening) (default)", mixed_ranks)):
        m = rank_metrics(ranks)
        print(f"| {name} | {m['recall@1']:.3f} | {m['recall@10']:.3f} | {m['mrr']:.3f} |")
    print(f"recall@{args.screen_k} (in the screened set): "
          f"{np.mean([x is not None for x in screen_ranks]):.3f}; encoding {scorer.texts_encoded} texts "
          f"{t_encode:.1f} s, ranking {t_rank:.2f} s ({len(rows) * args.screen_k / max(t_rank, 1e-9):.0f} "
          f"candidates/s); peak RSS {rss_peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
