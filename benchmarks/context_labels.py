"""Context-vector labels as the pipeline computes them, on STS-B dev: choose on sample A, confirm on B (issue 23).

Each *pass* retrieves contexts for every sentence of a sample with the `retrieve-contexts` flow (corpus, self-
exclusion) and scores every pair's union of top-`--candidates` contexts once with the label stage's own functions
(`score_terms`: the transformers scorer unless the pass names llama.cpp, λ2 with the pass's prompt, λ1 from the
coherence model); the matrices are stored (`<out>/<sample>/scores/<pass>.pkl`) and every variant below is computed
from them:

- k (|C_s|) nested in the candidates; C_s chosen by the stage-2 rank or by S(s, c) (Eq. 3, `select_contexts`);
- the similarity (centred cosine, contrast); λ1 (`--disc-weights`: 0 and 0.25 — the BiLSTM's λ1 and the recorded
  variants — unless given; the encoder head's default is 2);
- per variant: Spearman ×100 with a 95% bootstrap CI, the Δ to the first row with its paired CI, and the **partial
  Spearman against gold controlling for the TF-IDF cosine** (does the label carry what word overlap does not?);
- the LLM rating (1.5B, plain prompt, probability-weighted, through the response cache) alone, mixed with the
  context label, and the control mixed with the TF-IDF cosine at the same weights;
- `--teacher`: the teacher's cosine (all-mpnet-base-v2, `tasks/llm/teacher.py`) alone and as the rating's partner in
  place of TF-IDF (word overlap ranks a deletion above a paraphrase: docs/results.md, "After intermediates from the
  anchor").

    .venv/bin/python -m benchmarks.context_labels --sample A --passes six-right,six-left,default-right
    .venv/bin/python -m benchmarks.context_labels --sample B --passes six-right --rows '…;…'   # confirm, read once

STS-B test is never read.
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
from scipy.stats import rankdata  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpora import CORPORA  # noqa: E402
from benchmarks.held_out import held_out_pairs  # noqa: E402
from benchmarks.labeling import (  # noqa: E402
    baselines,
    bootstrap_rho,
    nested,
    ratings,
    samples,
    server,
    spearman,
    stop_server,
)
from tasks.contracts import load_trained_cached, read_contexts  # noqa: E402
from tasks.core.config import CorpusSettings  # noqa: E402
from tasks.core.store import read_manifest  # noqa: E402
from tasks.label.label_similarity import similarity_matrix  # noqa: E402
from tasks.label.labeling import (  # noqa: E402
    LabelSettings,
    context_label_01,
    reference_sentences,
    score_terms,
    select_contexts,
)
from tasks.label.pair_units import Unit, context_sets, pair_units  # noqa: E402
from tasks.label.scorer import load_scorer, resolve_lm  # noqa: E402
from tasks.retrieve.coherence import CoherenceSettings  # noqa: E402
from tasks.retrieve.retrieval import SelectionSettings  # noqa: E402

TFIDF = "baseline: TF-IDF cosine (uni+bigram)"
RATING = "LLM rating [plain], probability-weighted"
TEACHER = "baseline: all-mpnet-base-v2 cosine (teacher)"


@dataclass(frozen=True)
class Pass:
    name: str
    corpus: str = "six"  # six: gensim default + the five shared corpora; default: the main job's corpus
    prompt: str = "right_first"
    exclude_self: bool = True
    scorer: str = "transformers"
    source: str = "retrieved"  # contexts.source: retrieved | generated | both (the LLM writes contexts)
    ranker: str = "bilstm"  # coherence.encoder: the passes before the encoder ranker became stage 2's default keep it


PASSES = {p.name: p for p in (
    Pass("six-right"), Pass("six-left", prompt="left"), Pass("default-right", corpus="default"),
    Pass("six-right-noexcl", exclude_self=False), Pass("six-right-llama", scorer="llama_cpp"),
    Pass("six-left-both", prompt="left", source="both"), Pass("generated-left", prompt="left", source="generated"),
    Pass("default-left", corpus="default", prompt="left"),
    Pass("default-left-encoder", corpus="default", prompt="left", ranker="all-minilm-l6-v2"),  # today's stage 2
)}


def other_dataset(name: str, n: int) -> pd.DataFrame:
    """A seeded sample of n pairs (s1, s2, gold) of SICK trial or the STS12 train files (`held_out_pairs`)."""
    frame = held_out_pairs(name)
    return frame.iloc[np.sort(np.random.default_rng(0).permutation(len(frame))[:n])].reset_index(drop=True)


def retrieve(frame: pd.DataFrame, out: Path, p: Pass, candidates: int, tag: str = "") -> Path:
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.core.config import LLMSettings
    from tasks.retrieve.generated_contexts import ContextSourceSettings
    from tasks.retrieve.settings import RetrieveSettings

    source = ContextSourceSettings(source=p.source)
    ranker = "" if p.ranker == "bilstm" else f"-{Path(p.ranker).name}"
    folder = out / f"contexts-{p.corpus}-{candidates}-{'excl' if p.exclude_self else 'noexcl'}-{p.source}{ranker}{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    pairs_path = folder / "pairs.parquet"
    pq.write_table(pa.Table.from_pandas(frame[["s1", "s2"]], preserve_index=False), pairs_path)
    llm = LLMSettings(base_url=server()[0], model=server()[1]) if source.generates else None
    t = time.perf_counter()
    settings = RetrieveSettings(corpora=CORPORA if p.corpus == "six" else [CorpusSettings()], source=source,
                                selection=SelectionSettings(contexts_per_sentence=candidates,
                                                            exclude_self=p.exclude_self),
                                # the default corpus: the model prepare-corpus builds with the pass's ranker (its
                                # defaults); the six corpora: the quick BiLSTM the earlier rounds measured with
                                coherence=CoherenceSettings(encoder=p.ranker) if p.corpus == "default" else
                                CoherenceSettings(encoder="bilstm", max_train_contexts=10_000, epochs=1, hidden=300,
                                                  batch_size=128, lr=1e-3, word2vec_epochs=0))
    paths = retrieve_contexts(sentences=str(pairs_path), settings=settings, llm=llm, output_dir=str(folder),
                              run="bench")
    print(f"retrieve-contexts ({p.corpus}, exclude_self={p.exclude_self}, source={p.source}): "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    return Path(paths["contexts"])


def settings_for(p: Pass, candidates: int, **update) -> LabelSettings:
    # float32: the passes are pickled by name, and the recorded verdicts were measured in float32
    return LabelSettings(method="context", lm_prompt=p.prompt, scorer=p.scorer, threads=2, dtype="float32",
                         contexts_per_sentence=candidates, candidates_per_sentence=candidates, **update)


def score_pass(p: Pass, frame: pd.DataFrame, both: pd.DataFrame, out: Path, folder: Path, candidates: int,
               limit: int | None) -> dict:
    """Contexts for both samples' sentences (one retrieval), then this sample's pairs scored."""
    path = folder / f"{p.name}{'' if limit is None else f'-first{limit}'}.pkl"
    if path.is_file():
        result = pickle.loads(path.read_bytes())
        if len(result["units"]) != (len(frame) if limit is None else min(limit, len(frame))):
            # the stored scores are of another sample size (--pairs): never read them as this one's
            raise SystemExit(f"{path} holds {len(result['units'])} pairs, this sample {len(frame)}: give another "
                             "--out for another --pairs")
        return result
    whole = folder / f"{p.name}.pkl"
    if limit is not None and whole.is_file():  # the first pairs of a pass over the whole sample (same scores)
        result = pickle.loads(whole.read_bytes())
        share = limit / len(result["units"])
        return result | {"units": result["units"][:limit], "terms": result["terms"][:limit],
                         "seconds": result["seconds"] * share}
    # Written contexts cost an LLM request each: only the scored pairs' sentences get them.
    contexts = retrieve(both, out, p, candidates) if p.source == "retrieved" else \
        retrieve(frame.iloc[:limit], folder.parent, p, candidates, f"-first{len(frame.iloc[:limit])}")
    coherence = read_manifest(contexts.parent)["coherence_model"]["folder"]
    trained = load_trained_cached(coherence, read_manifest(Path(coherence))["outputs"]["model.pt"]["sha256"])
    units = pair_units(frame.iloc[:limit].reset_index(drop=True), context_sets(read_contexts(contexts), candidates))
    settings = settings_for(p, candidates)
    reference = reference_sentences(units, settings.reference_sentences, settings.seed)
    lm = load_scorer(settings, *map(str, resolve_lm(settings)))
    t = time.perf_counter()
    scorable = [u for u in units if u.context_ids]  # as label_units: a unit without contexts is not scored
    scored = iter(score_terms(scorable, settings, trained, lm, reference))
    empty = lambda u: {"lm_sentence": np.zeros((len(u.sentences), 0)), "disc": np.zeros((len(u.sentences), 0))}  # noqa: E731
    terms = [next(scored) if u.context_ids else empty(u) for u in units]
    seconds = time.perf_counter() - t
    result = {"units": units, "terms": terms, "seconds": seconds,
              "scores": sum(len(u.sentences) * len(u.context_ids) for u in units)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(result))
    print(f"{p.name}: {result['scores']} (sentence, context) scores in {seconds:.0f} s "
          f"({seconds / max(len(units), 1):.2f} s per pair)", flush=True)
    return result


def context_labels(units: list[Unit], terms: list[dict], k: int, selection: str, similarity: str, disc: float,
                   candidates: int) -> np.ndarray:
    """One label per pair from the stored matrices, as label_units computes it (selection, similarity)."""
    settings = LabelSettings(method="context", contexts_per_sentence=k, candidates_per_sentence=candidates,
                             context_selection=selection, similarity=similarity, lambda_disc=disc)
    out = []
    for u, t in zip(units, terms):
        if len(u.context_ids) < 3:
            out.append(np.nan)
            continue
        s = t["lm_sentence"] + disc * t["disc"]
        if selection == "rank":  # nested: each sentence's top-k of its rank-ordered candidates
            keep, own = nested(u, k)
        else:
            own, keep = select_contexts(s, u.own_mask(), settings)
        out.append(similarity_matrix(s[:, keep], similarity, own)[0, 1] if len(keep) >= 3 else np.nan)
    return np.array(out)


def partial_spearman(x: np.ndarray, gold: np.ndarray, control: np.ndarray, idx: np.ndarray | None = None
                     ) -> np.ndarray:
    """Spearman of x with gold controlling for `control` (partial correlation of the ranks), on each resample."""
    x = np.where(np.isfinite(x), x, np.nanmedian(x))
    idx = np.arange(len(x))[None, :] if idx is None else idx

    def r(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ra, rb = rankdata(a[idx], axis=1), rankdata(b[idx], axis=1)
        ra -= ra.mean(1, keepdims=True)
        rb -= rb.mean(1, keepdims=True)
        return (ra * rb).sum(1) / np.sqrt((ra ** 2).sum(1) * (rb ** 2).sum(1))

    rxy, rxz, ryz = r(x, gold), r(x, control), r(gold, control)
    return (rxy - rxz * ryz) / np.sqrt((1 - rxz ** 2) * (1 - ryz ** 2))


def report(values: dict[str, np.ndarray], gold: np.ndarray, tfidf: np.ndarray, title: str, notes: dict) -> None:
    boots = bootstrap_rho(values, gold)
    idx = np.random.default_rng(1).integers(0, len(gold), size=(1000, len(gold)))
    first = next(iter(values))
    print(f"\n## {title}\n")
    print("| variant | Spearman ×100 | 95% CI | Δ vs first row [95% paired CI] | partial Spearman given TF-IDF "
          "[95% CI] | undefined |")
    print("|---|---|---|---|---|---|")
    for name, v in values.items():
        lo, hi = np.percentile(boots[name], [2.5, 97.5])
        d = boots[name] - boots[first]
        dlo, dhi = np.percentile(d, [2.5, 97.5])
        part = partial_spearman(v, gold, tfidf)[0]
        plo, phi = np.percentile(partial_spearman(v, gold, tfidf, idx), [2.5, 97.5])
        print(f"| {name}{notes.get(name, '')} | {spearman(v, gold):.1f} | {lo:.1f}–{hi:.1f} | "
              f"{spearman(v, gold) - spearman(values[first], gold):+.1f} [{dlo:+.1f}, {dhi:+.1f}] | "
              f"{part:.3f} [{plo:.3f}, {phi:.3f}] | {int((~np.isfinite(v)).sum())} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200, help="pairs per sample (A: selection, B: confirmation)")
    ap.add_argument("--sample", default="A", choices=("A", "B"))
    ap.add_argument("--passes", default="six-right", help=f"comma-separated: {', '.join(PASSES)}")
    ap.add_argument("--candidates", type=int, default=32, help="stage-2 contexts per sentence scored (largest k)")
    ap.add_argument("--ks", default="16,32")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pairs (expensive passes)")
    ap.add_argument("--rows", default="", help="only these variants (';'-separated names as printed; B)")
    ap.add_argument("--weights", default="0.5,0.6,0.7,0.8,0.9", help="rating weights of the mixes")
    ap.add_argument("--disc-weights", default="0.0,0.25", help="λ1 values of the context-label variants")
    ap.add_argument("--mix", default="", help="context variants to mix with the rating (';'-separated)")
    ap.add_argument("--rating-url", help="an endpoint serving the 1.5B model (default: a local server)")
    ap.add_argument("--no-rating", action="store_true")
    ap.add_argument("--teacher", action="store_true", help="the teacher's cosine alone and as the rating's partner")
    ap.add_argument("--out", default="data/outputs/benchmarks/context-labels")
    ap.add_argument("--dataset", default="stsb-dev", choices=("stsb-dev", "sick-trial", "sts12-train"),
                    help="held-out domains to confirm a labeler on: a seeded sample of --pairs pairs (--sample A)")
    ap.add_argument("--reference", default=None, help="the row every Δ is measured against (default: the first)")
    args = ap.parse_args()
    out = Path(args.out) if args.dataset == "stsb-dev" else Path(args.out) / args.dataset
    a, b = samples(args.pairs) if args.dataset == "stsb-dev" else (other_dataset(args.dataset, args.pairs), None)
    frame = {"A": a, "B": b}[args.sample]
    if b is None:
        b = a.iloc[:0]
    n = len(frame) if args.limit is None else args.limit
    gold = frame["gold"].to_numpy()[:n]
    values: dict[str, np.ndarray] = {}
    timing = []
    for name in [x for x in args.passes.split(",") if x]:
        p = PASSES[name]
        result = score_pass(p, frame, pd.concat([a, b], ignore_index=True), out, out / args.sample / "scores",
                            args.candidates, args.limit)
        timing.append(f"{name} {result['seconds'] / len(result['units']):.2f} s/pair")
        for k in [int(k) for k in args.ks.split(",")]:
            for selection in ("rank", "score"):
                if selection == "score" and k == args.candidates:
                    continue  # choosing all candidates is the rank row
                for similarity in ("centered_cosine", "contrast"):
                    for disc in [float(w) for w in args.disc_weights.split(",")]:
                        key = f"[{name}] k={k}, {selection}, {similarity}, λ1={disc}"
                        values[key] = context_labels(result["units"], result["terms"], k, selection, similarity,
                                                     disc, args.candidates)
    base = {k: v[:n] for k, v in baselines(frame).items()}
    if args.teacher:
        from tasks.llm.teacher import teacher_labels

        base[TEACHER] = teacher_labels(frame.iloc[:n])[0]
    if not args.no_rating:
        endpoint = (args.rating_url, "qwen2.5-coder-1.5b-instruct") if args.rating_url else server()
        score, _, sec = ratings(frame.iloc[:n], *endpoint, "plain")
        values[RATING] = score
        print(f"LLM rating: {sec:.2f} s per uncached pair", flush=True)
        weights = [float(w) for w in args.weights.split(",")]
        tfidf01 = base[TFIDF]
        for w in weights:
            values[f"control: {w}·rating/5 + {1 - w:.1f}·TF-IDF cosine"] = w * score / 5 + (1 - w) * tfidf01
            if args.teacher:
                values[f"{w}·rating/5 + {1 - w:.1f}·teacher cosine"] = w * score / 5 + (1 - w) * base[TEACHER]
        for key in [k for k in args.mix.split(";") if k]:
            c01 = context_label_01(values[key], "contrast" if ", contrast," in key else "centered_cosine")
            for w in weights:
                values[f"{w}·rating/5 + {1 - w:.1f}·{key}"] = w * score / 5 + (1 - w) * c01
                # all three: the rest split evenly between the context label and word overlap
                values[f"{w}·rating/5 + {(1 - w) / 2:.2f}·{key} + {(1 - w) / 2:.2f}·TF-IDF cosine"] = \
                    w * score / 5 + (1 - w) / 2 * (c01 + tfidf01)
    values |= base
    if args.rows:
        keep = set(args.rows.split(";"))
        values = {k: v for k, v in values.items() if k in keep or k.startswith("baseline")}
    if args.reference:
        values = {args.reference: values.pop(args.reference)} | values
    report(values, gold, base[TFIDF], f"{args.dataset} sample {args.sample}: {n} pairs ({', '.join(timing)})", {})


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_server()
