"""Stage-1 verifier on hand-labeled generations: precision and recall of the LLM judge and of the encoder ordering
check, and acceptance / requests per accepted triple of a run.

    # 1. draw the set to label: first-attempt, rule-passing generations of a run (accepted or judged), 30 per kind
    .venv/bin/python -m benchmarks.verifier sample data/outputs/run-100/generate-sts-triples \
        --out data/annotations/verifier_generations.csv
    # 2. label it by reading (column `human`: good / bad), see data/annotations/README.md
    # 3. score the judge's recorded verdicts (P(pass) at the run's threshold) and the ordering check
    .venv/bin/python -m benchmarks.verifier score data/annotations/verifier_generations.csv
    # the reading check of accepted triples (sources not in the labeled set), then its score after labeling
    .venv/bin/python -m benchmarks.verifier triples data/outputs/run-100/generate-sts-triples
    .venv/bin/python -m benchmarks.verifier triples-score data/annotations/triples_reading_check.csv

    # the combined verifier's signals of labeled generations (LLM requests through the response cache), then each
    # signal alone and combined, cross-validated (the shipped model is fit by `stsgen verifier fit` on that table)
    .venv/bin/python -m benchmarks.verifier signals data/annotations/verifier_generations.csv \
        data/annotations/verifier_generations_2.csv --base-url http://127.0.0.1:8093/v1 --out /tmp/signals.csv
    .venv/bin/python -m benchmarks.verifier signals-cv /tmp/signals.csv

"Bad" is the class a verifier should catch: precision = share of truly bad among the rejected, recall = share of the
bad that are rejected. The threshold was fixed (0.5) before labeling; the sweep printed below is for reading only,
not for choosing on this set.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from tasks.generate.verification import REASONS as JUDGE_REASONS
from tasks.generate.verifier_fit import verifier_scores

KINDS = ("positive", "intermediate", "negative")
_P_PASS = re.compile(r"P\(pass\) = ([0-9.]+)")


def rule_passing(folder: Path) -> pd.DataFrame:
    """Every generation of a run that passed the rule checks and met the judge, one row each: kind, source_id,
    anchor, base (the text it was generated from: the anchor for s⁺, s⁺ for sᵐ and s⁻), attempt (0-based), candidate,
    judge P(pass), accepted (by the judge)."""
    triples = pq.read_table(folder / "triples.parquet").to_pandas()
    rejected = pq.read_table(folder / "rejected.parquet").to_pandas()
    rows = []
    for kind in KINDS:
        rows += [{"kind": kind, "source_id": r.source_id, "anchor": r.anchor,
                  "base": r.anchor if kind == "positive" else r.positive, "attempt": getattr(r, f"{kind}_attempts") - 1,
                  "candidate": getattr(r, kind), "p_pass": getattr(r, f"{kind}_judge_p_pass"), "accepted": True}
                 for r in triples.itertuples()]
    judged = rejected[rejected["reason"].isin(JUDGE_REASONS)]
    rows += [{"kind": r.kind, "source_id": r.source_id, "anchor": r.anchor, "base": r.base_text,
              "attempt": r.attempt, "candidate": r.text,
              "p_pass": float(m.group(1)) if (m := _P_PASS.search(r.detail or "")) else 0.0, "accepted": False}
             for r in judged.itertuples()]
    return pd.DataFrame(rows)


def first_attempts(folder: Path) -> pd.DataFrame:
    """The first-attempt rows of `rule_passing` (the generator's raw output, before the judge), with the s⁺ of the
    triple (`positive`, for the ordering check)."""
    pool = rule_passing(folder)
    pool = pool[pool["attempt"] == 0].reset_index(drop=True)
    return pool.assign(positive=pool["base"].where(pool["kind"] != "positive", pool["candidate"]))


def unverified_triples(folder: Path) -> pd.DataFrame:
    """The triples the run would have kept without the judge: per slot the earliest generation that passed the
    rules, whatever the judge said. An approximation: sᵐ and s⁻ were generated from the judge-accepted s⁺, which
    without the judge may have been an earlier one."""
    pool = rule_passing(folder).sort_values("attempt", kind="stable")
    first = pool.drop_duplicates(["source_id", "kind"])
    wide = first.pivot(index="source_id", columns="kind", values="candidate").dropna(subset=list(KINDS))
    anchors = first.drop_duplicates("source_id").set_index("source_id")["anchor"]
    return wide.assign(anchor=anchors.reindex(wide.index)).reset_index()[["source_id", "anchor", *KINDS]]


def sample(args) -> None:
    pool = first_attempts(args.folder)
    parts = [g.sample(n=min(args.k, len(g)), random_state=args.seed) for _, g in pool.groupby("kind", sort=False)]
    out = pd.concat(parts).sample(frac=1.0, random_state=args.seed)  # shuffled: the reader does not see the verdict
    out["human"] = ""
    out["note"] = ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(args.out, index=False)
    print(f"{len(out)} generations ({out['kind'].value_counts().to_dict()}) → {args.out}")


def score(args) -> None:
    data = pd.read_csv(args.labels)
    if not data["human"].isin(["good", "bad"]).all():
        raise SystemExit(f"{args.labels}: every row needs human = good or bad")
    bad = (data["human"] == "bad").to_numpy()
    print("| verifier | kind | n | bad | rejected | precision | recall | good among accepted |\n|---|---|---|---|---|---|"
          "---|---|")
    for kind in (*KINDS, "all"):
        mask = np.ones(len(data), bool) if kind == "all" else (data["kind"] == kind).to_numpy()
        rej = (data["p_pass"] < args.threshold).to_numpy()
        r = verifier_scores(bad[mask], rej[mask])
        print(f"| LLM judge (P(pass) < {args.threshold}) | {kind} | {r['n']} | {r['bad']} | {r['rejected']} | "
              f"{r['precision']:.2f} | {r['recall']:.2f} | {r['good_among_accepted']:.2f} |")
    negatives = data[data["kind"] == "negative"]
    if len(negatives) and args.ordering:
        from sentence_transformers import SentenceTransformer

        from tasks.generate.verification import ordering_gaps
        from tasks.llm.local_models import encoder_folder

        model = SentenceTransformer(str(encoder_folder("all-minilm-l6-v2")), device="cpu")
        gaps = ordering_gaps(negatives["anchor"].tolist(), negatives["positive"].tolist(),
                             negatives["candidate"].tolist(), lambda s: model.encode(s, batch_size=64))
        neg_bad = (negatives["human"] == "bad").to_numpy()
        for margin in args.ordering:
            r = verifier_scores(neg_bad, gaps < margin)
            print(f"| ordering (MiniLM, margin {margin}) | negative | {r['n']} | {r['bad']} | {r['rejected']} | "
                  f"{r['precision']:.2f} | {r['recall']:.2f} | {r['good_among_accepted']:.2f} |")
    print("\nthreshold sweep (reading only):")
    for t in (0.3, 0.4, 0.5, 0.6, 0.7):
        rows = [verifier_scores(bad[(data["kind"] == k).to_numpy()], (data["p_pass"] < t).to_numpy()[(data["kind"] == k)
                                                                                            .to_numpy()])
                for k in KINDS]
        print(f"  {t}: " + "; ".join(f"{k} P {r['precision']:.2f} R {r['recall']:.2f}" for k, r in zip(KINDS, rows)))


def reading_sample(args) -> None:
    """Accepted triples for the reading check, none of whose sources is in the verifier's labeled set (fresh)."""
    triples = pq.read_table(args.folder / "triples.parquet").to_pandas()
    used = set(pd.read_csv(args.exclude)["source_id"]) if args.exclude and args.exclude.exists() else set()
    pool = triples[~triples["source_id"].isin(used)]
    out = pool.sample(n=min(args.k, len(pool)), random_state=args.seed)[["source_id", "anchor", *KINDS]]
    for kind in KINDS:
        out[f"{kind}_verdict"] = ""
    out["note"] = ""
    out.to_csv(args.out, index=False)
    print(f"{len(out)} triples ({len(used)} sources excluded) → {args.out}")


def reading_score(args) -> None:
    data = pd.read_csv(args.labels)
    print("| kind | good | share |\n|---|---|---|")
    for kind in KINDS:
        verdicts = data[f"{kind}_verdict"]
        if not verdicts.isin(["good", "bad"]).all():
            raise SystemExit(f"{args.labels}: {kind}_verdict must be good or bad on every row")
        print(f"| {kind} | {(verdicts == 'good').sum()}/{len(data)} | {(verdicts == 'good').mean():.0%} |")


# The combined verifier's candidate signals (all in [0, 1] or small counts): `judge` — the kind's own judge question,
# P(pass); `same` — P("the two sentences mean the same thing"); `b_in_a` — P(everything the generation says is also
# said by the anchor); `a_in_b` — the reverse; `rating` — the LLM rating / 5; `cosine` — all-MiniLM-L6-v2 cosine to
# the anchor; `dropped` / `added` — anchor facts missing / new facts (tasks/generate/facts.py); `length` — words of
# the generation / words of the anchor. The stage model uses those stage 1 has without a request (STAGE_SIGNALS).
SIGNALS = ("judge", "same", "b_in_a", "a_in_b", "rating", "cosine", "dropped", "added", "length")


async def _judged(client, rows: pd.DataFrame) -> dict[str, list[float]]:
    import asyncio

    from tasks.core.config import DEFAULT_SEED
    from tasks.generate.settings import VerifierSettings
    from tasks.generate.verification import judge_one, load_judge_template

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
    """Every signal of every labeled generation: the table `stsgen verifier fit` and `signals-cv` read."""
    import asyncio

    from sentence_transformers import SentenceTransformer

    from tasks.core.config import LLMSettings
    from tasks.generate.facts import check_facts
    from tasks.label.llm_rating import RatingSettings, rate_pairs
    from tasks.llm.client import LLMClient
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


def signals_cv(args) -> None:
    """Each signal alone and the combinations, k-fold cross-validated precision / recall of "bad" per kind."""
    from tasks.generate.combined_verifier import STAGE_SIGNALS
    from tasks.generate.verifier_fit import STAGE_JUDGE, cross_validated, read_labeled_signals, verifier_scores

    data = read_labeled_signals(args.signals)
    print("| kind | n | bad | signal | precision | recall | good among accepted |\n|---|---|---|---|---|---|---|")
    for kind in KINDS:
        part = data[data["kind"] == kind].fillna({s: 0.5 for s in SIGNALS})
        part = part.assign(stage_judge=part[STAGE_JUDGE[kind]])
        bad = (part["human"] == "bad").to_numpy()
        rows = [("judge before (v1 question, P(pass) < 0.5)", verifier_scores(bad, (part["judge"] < 0.5).to_numpy()))]
        combos = [([s], s) for s in SIGNALS] + [
            (list(SIGNALS), "combined: all signals (3 more requests per generation)"),
            (["stage_judge", *STAGE_SIGNALS[1:]], "combined: stage-1 signals (no extra request)")]
        rows += [(name, cross_validated(part[features].to_numpy(dtype=float), bad, args.folds))
                 for features, name in combos]
        for name, r in rows:
            if r is not None:
                print(f"| {kind} | {len(part)} | {bad.sum()} | {name} | {r['precision']:.2f} | {r['recall']:.2f} | "
                      f"{r['good_among_accepted']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sample")
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, default=Path("data/annotations/verifier_generations.csv"))
    p.add_argument("--k", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=sample)
    p = sub.add_parser("score")
    p.add_argument("labels", type=Path)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--ordering", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 0.1])
    p.set_defaults(func=score)
    p = sub.add_parser("triples", help="draw accepted triples for the reading check")
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, default=Path("data/annotations/triples_reading_check.csv"))
    p.add_argument("--exclude", type=Path, default=Path("data/annotations/verifier_generations.csv"))
    p.add_argument("--k", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=reading_sample)
    p = sub.add_parser("triples-score")
    p.add_argument("labels", type=Path)
    p.set_defaults(func=reading_score)
    p = sub.add_parser("signals", help="the combined verifier's signals of labeled generations (LLM requests)")
    p.add_argument("labels", nargs="+")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=signals)
    p = sub.add_parser("signals-cv", help="each signal alone and combined, cross-validated")
    p.add_argument("signals", type=Path)
    p.add_argument("--folds", type=int, default=5)
    p.set_defaults(func=signals_cv)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
