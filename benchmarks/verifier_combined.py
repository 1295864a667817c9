"""The combined verifier of issue 24: weak signals per generation, each alone and combined by a logistic regression,
cross-validated on the hand-labeled generations (benchmarks/data/verifier_generations*.csv, criteria in
benchmarks/data/README.md), beside today's judge.

    # 1. signals of every labeled generation (LLM calls through the response cache; MiniLM; fact rules)
    .venv/bin/python -m benchmarks.verifier_combined signals --base-url http://127.0.0.1:8093/v1 \
        benchmarks/data/verifier_generations.csv benchmarks/data/verifier_generations_2.csv --out /tmp/signals.csv
    # 2. 5-fold cross-validated precision / recall of "bad" per kind; the model fit on all rows → --model-out
    .venv/bin/python -m benchmarks.verifier_combined cv /tmp/signals.csv --model-out models/verifiers/combined.v1.json

Signals (all in [0, 1] or small counts): `judge` — the kind's own judge question, P(pass); `same` — P("the two
sentences mean the same thing"); `b_in_a` — P(everything the generation says is also said by the anchor); `a_in_b`
— the reverse (together: bidirectional entailment); `rating` — the LLM rating /5 (expected value over the digit
log-probs); `cosine` — all-MiniLM-L6-v2 cosine to the anchor; `dropped` / `added` — anchor facts missing / new facts
(tasks/generate/facts.py); `length` — words of the generation / words of the anchor.
The relative check inside a triple (the LLM ordering s⁺, sᵐ, s⁻) is not among them: the labeled rows are single
generations, not whole triples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.verifier import _pr as verifier_pr
from tasks.core.config import DEFAULT_SEED, LLMSettings
from tasks.generate.combined_verifier import STAGE_SIGNALS
from tasks.generate.facts import check_facts
from tasks.generate.settings import VerifierSettings
from tasks.generate.verification import judge_one, load_judge_template
from tasks.label.llm_rating import RatingSettings, rate_pairs
from tasks.llm.client import LLMClient

KINDS = ("positive", "intermediate", "negative")
SIGNALS = ("judge", "same", "b_in_a", "a_in_b", "rating", "cosine", "dropped", "added", "length")


async def _judged(client: LLMClient, rows: pd.DataFrame) -> dict[str, list[float]]:
    settings = VerifierSettings()
    templates = {k: load_judge_template(k) for k in KINDS}
    asks = {  # name → (template, first, second): the template asks about (A = first, B = second)
        "same": lambda r: (templates["negative"], r.anchor, r.candidate),
        "b_in_a": lambda r: (templates["intermediate"], r.anchor, r.candidate),
        "a_in_b": lambda r: (templates["intermediate"], r.candidate, r.anchor),
    }
    async with client.open() as call:
        async def one(template, a, b):
            verdict = await judge_one(call, template, a, b, settings, DEFAULT_SEED)
            return np.nan if verdict.p_pass is None else verdict.p_pass

        out = {"judge": await asyncio.gather(*(one(templates[r.kind], r.anchor, r.candidate)
                                               for r in rows.itertuples()))}
        for name, ask in asks.items():
            out[name] = await asyncio.gather(*(one(*ask(r)) for r in rows.itertuples()))
    out["same"] = [1.0 - p for p in out["same"]]  # the negative's template passes on "no"
    return out


def signals(args) -> None:
    from sentence_transformers import SentenceTransformer

    from tasks.llm.local_models import encoder_folder

    rows = pd.concat([pd.read_csv(p).assign(source_file=Path(p).name) for p in args.labels], ignore_index=True)
    llm = LLMSettings(base_url=args.base_url, model=args.model, max_concurrency=4)
    client = LLMClient(llm)
    out = rows[["source_file", "kind", "anchor", "candidate", "human"]].copy()
    for name, values in asyncio.run(_judged(client, rows)).items():
        out[name] = values
    ratings, _ = rate_pairs(list(zip(rows["anchor"], rows["candidate"])), llm, RatingSettings(), client=client)
    out["rating"] = [np.nan if r.score is None else r.score / 5 for r in ratings]
    model = SentenceTransformer(str(encoder_folder("all-minilm-l6-v2")), device="cpu")
    a = model.encode(rows["anchor"].tolist(), normalize_embeddings=True)
    c = model.encode(rows["candidate"].tolist(), normalize_embeddings=True)
    out["cosine"] = np.sum(a * c, axis=1)
    checks = [check_facts(x, y) for x, y in zip(rows["anchor"], rows["candidate"])]
    out["dropped"] = [len(f.dropped) for f in checks]
    out["added"] = [len(f.added) for f in checks]
    out["length"] = [len(y.split()) / max(1, len(x.split())) for x, y in zip(rows["anchor"], rows["candidate"])]
    out.to_csv(args.out, index=False)
    print(f"{len(out)} rows → {args.out}; {client.stats.requests_sent} requests sent, "
          f"{client.stats.cache_hits} cached")


def _pr(bad: np.ndarray, rejected: np.ndarray) -> tuple[float, float, float]:
    """(precision, recall, good among accepted): benchmarks.verifier's measure of a verifier."""
    r = verifier_pr(bad, rejected)
    return r["precision"], r["recall"], r["good_among_accepted"]


def _pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", C=1.0, max_iter=1000))


# What the stage's judge asks per kind today: the positive's v2 question is `a_in_b` (everything the anchor says is
# also said by the positive); the signals file's `judge` column holds the v1 questions.
STAGE_JUDGE = {"positive": "a_in_b", "intermediate": "judge", "negative": "judge"}


def cv(args) -> None:
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    data = pd.read_csv(args.signals)
    data = data[data["human"].isin(["good", "bad"])]
    print("| kind | n | bad | signal | precision | recall | good among accepted |\n|---|---|---|---|---|---|---|")
    fitted = {}
    for kind in KINDS:
        part = data[data["kind"] == kind].fillna({s: 0.5 for s in SIGNALS})
        part = part.assign(stage_judge=part[STAGE_JUDGE[kind]])
        bad = (part["human"] == "bad").to_numpy()
        folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
        judge = (part["judge"] < 0.5).to_numpy()
        p, r, g = _pr(bad, judge)
        print(f"| {kind} | {len(part)} | {bad.sum()} | judge before (v1 question, P(pass) < 0.5) | {p:.2f} | {r:.2f} | {g:.2f} |")
        combos = [([s], s) for s in SIGNALS] + [
            (list(SIGNALS), "combined: all signals (3 more requests per generation)"),
            (["stage_judge", *STAGE_SIGNALS[1:]], "combined: stage-1 signals (today's judge question, no extra "
                                                   "request)")]
        for features, name in combos:
            x = part[features].to_numpy(dtype=float)
            prob = cross_val_predict(_pipeline(), x, bad, cv=folds, method="predict_proba")[:, 1]
            p, r, g = _pr(bad, prob >= 0.5)
            print(f"| {kind} | {len(part)} | {bad.sum()} | {name} | {p:.2f} | {r:.2f} | {g:.2f} |")
        # The model stage 1 can run: fit on all rows of this kind, on the signals it has.
        model = _pipeline().fit(part[["stage_judge", *STAGE_SIGNALS[1:]]].to_numpy(dtype=float), bad)
        scaler, lr = model[0], model[1]
        fitted[kind] = {"mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(),
                        "coef": lr.coef_[0].tolist(), "intercept": float(lr.intercept_[0]), "threshold": 0.5,
                        "rows": int(len(part)), "bad": int(bad.sum())}
    if args.model_out:
        args.model_out.parent.mkdir(parents=True, exist_ok=True)
        args.model_out.write_text(json.dumps({"version": 1, "predicts": "P(bad)", "features": list(STAGE_SIGNALS),
                                              "kinds": fitted}, indent=1) + "\n")
        print(f"model (fit on all rows) → {args.model_out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("signals")
    s.add_argument("labels", nargs="+")
    s.add_argument("--base-url", required=True)
    s.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=signals)
    c = sub.add_parser("cv")
    c.add_argument("signals", type=Path)
    c.add_argument("--model-out", type=Path)
    c.set_defaults(func=cv)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
