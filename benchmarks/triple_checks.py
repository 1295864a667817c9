"""The triple checks of issue 34 on the hand-labeled generations (benchmarks/data/verifier_generations*.csv: 210
generations read against their anchor, `human` good / bad): for each check and setting, how many it quarantines,
its precision (the quarantined that a reader judged bad) and recall (the bad ones it quarantines). Chosen on one
labeled set, confirmed on the other (the two were drawn from different runs: 90 generations of the old generator,
120 of the issue-24 one). `copied_example` is counted on runs' accepted generations against their prompts' examples. The labeled rows passed
every rule of their day, so each table shows what the new check adds.

    .venv/bin/python -m benchmarks.triple_checks [--runs data/outputs/data-value/r1,data/outputs/data-value/r2]
        [--roles-base-url http://127.0.0.1:PORT/v1 --roles-model qwen2.5-coder-1.5b-instruct]

`--roles-base-url` adds the role check (`role_changed`, tasks/generate/roles.py) on the labeled positives: one request
per positive to that endpoint (through the response cache), its `min_match` chosen on each set and confirmed on the
other (two-fold, by set).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from sklearn.metrics import f1_score  # noqa: E402

from tasks.generate.candidates import Chooser  # noqa: E402
from tasks.generate.settings import ValidationSettings  # noqa: E402
from tasks.generate.validation import validate  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SETS = {"set 1 (90, old generator)": "verifier_generations.csv", "set 2 (120, issue-24 generator)":
        "verifier_generations_2.csv"}
MIN_MATCHES = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8]  # the role check's min_match
ALLOWANCES = [0, 1, 2, 3, 4]  # not_deletion's deletion_allowance
CEILINGS = [0.6, 0.7, 0.75, 0.8, 0.85, 0.9]  # negative_too_close's negative_max_cosine (the chooser's MiniLM cosine)


def negative_cosines(frame: pd.DataFrame) -> pd.Series:
    """Each negative's all-MiniLM-L6-v2 cosine to its anchor, as the chooser computes it (candidates.rank)."""
    chooser = Chooser(negative_max_cosine=1.0)
    return frame.apply(lambda r: chooser.rank("negative", r["anchor"], [r["candidate"]])[1][0], axis=1)


def rule_hits(frame: pd.DataFrame, rule: str, settings: ValidationSettings) -> pd.Series:
    """True where `rule` is the reason the generation fails (the rules before it passing or not: only this one)."""
    return frame.apply(lambda r: validate(r["candidate"], kind=r["kind"], base=r["base"], anchor=r["anchor"],
                                          settings=settings).reason == rule, axis=1)


def precision_recall(hit: pd.Series, bad: pd.Series) -> dict:
    return {"quarantined": int(hit.sum()), "precision": (bad & hit).sum() / hit.sum() if hit.sum() else float("nan"),
            "recall": (bad & hit).sum() / bad.sum() if bad.sum() else float("nan"), "bad": int(bad.sum())}


def role_scores(frame: pd.DataFrame, base_url: str, model: str) -> pd.DataFrame:
    """Per labeled positive: the role check's answer parsed and compared (weakest match, swapped, unparsed), asked
    as stage 1 asks it (one request, greedy, re-asked once when no lists come back)."""
    import asyncio

    from tasks.core.config import LLMSettings
    from tasks.generate.roles import RoleCheck, role_template
    from tasks.llm.client import LLMClient

    check = RoleCheck(role_template(), Chooser().encoder, 0.0, 2, 13)  # as stage 1 builds it, min_match swept below

    async def ask_all():
        async with LLMClient(LLMSettings(base_url=base_url, model=model, verify_model=False)).open() as call:
            return await asyncio.gather(*(check.verdict(call, r["anchor"], r["candidate"]) for _, r in frame.iterrows()))

    verdicts = asyncio.run(ask_all())
    return pd.DataFrame({"score": [v.score for v in verdicts], "reason": [v.reason for v in verdicts],
                         "detail": [v.detail for v in verdicts], "calls": [v.calls for v in verdicts]},
                        index=frame.index)


def role_hits(scores: pd.DataFrame, min_match: float) -> pd.Series:
    """role_changed at `min_match` (a swap at any threshold); an unparsed answer is quarantined too."""
    swapped = scores["detail"].str.startswith("roles swapped")
    return swapped | scores["reason"].eq("role_unparsed") | (scores["score"].fillna(1.0) < min_match)


def copied_examples(run: Path) -> tuple[int, int, list[str]]:
    """(accepted generations, those the copied_example rule flags, the flagged texts) of a run's stage 1."""
    stage = run / "generate-sts-triples"
    manifest = json.loads((stage / "manifest.json").read_text())
    examples = manifest.get("examples") or manifest.get("parameters", {}).get("examples", {})
    triples = pq.read_table(stage / "triples.parquet").to_pandas()
    settings, n, flagged = ValidationSettings(), 0, []
    for kind, rows in examples.items():
        sentences = tuple(s for e in rows for s in (e["sentence1"], e["sentence2"]))
        for text, anchor in zip(triples[kind].dropna(), triples.loc[triples[kind].notna(), "anchor"]):
            n += 1
            if validate(text, kind=kind, base=anchor, anchor=anchor, examples=sentences,
                        settings=settings).reason == "copied_example":
                flagged.append(f"{kind}: {text}")
    return n, len(flagged), flagged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="", help="comma-separated run folders for the copied_example count")
    ap.add_argument("--roles-base-url", default=None, help="OpenAI-compatible endpoint for the role check")
    ap.add_argument("--roles-model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    frames = {name: pd.read_csv(DATA / f) for name, f in SETS.items()}
    def table(title: str, field: str, values: list, hits) -> None:
        print(f"\n### {title}\n\n| {field} | " + " | ".join(f"{n}: quarantined · precision · recall"
                                                          for n in frames) + " |\n|---|" + "---|" * len(frames))
        for value in values:
            cells = []
            for name, frame in frames.items():
                part = frame[frame["kind"] == ("intermediate" if field == "deletion_allowance" else "negative")]
                r = precision_recall(hits(name, part, value), part["human"] == "bad")
                cells.append(f"{r['quarantined']}/{len(part)} · {r['precision']:.2f} · {r['recall']:.2f} "
                             f"(of {r['bad']} bad)")
            print(f"| {value} | " + " | ".join(cells) + " |")

    table("not_deletion (intermediates)", "deletion_allowance", ALLOWANCES,
          lambda name, part, v: rule_hits(part, "not_deletion", ValidationSettings(deletion_allowance=v)))
    cosines = {name: negative_cosines(f[f["kind"] == "negative"]) for name, f in frames.items()}
    table("negative_too_close (negatives, STS pattern)", "negative_max_cosine", CEILINGS,
          lambda name, part, v: cosines[name] >= v)
    if args.roles_base_url:
        positives = {name: f[f["kind"] == "positive"] for name, f in frames.items()}
        scores = {name: role_scores(part, args.roles_base_url, args.roles_model) for name, part in positives.items()}
        for name, sc in scores.items():
            print(f"\n{name}: {len(sc)} positives, {int(sc['calls'].sum())} requests, "
                  f"{int(sc['reason'].eq('role_unparsed').sum())} unparsed, "
                  f"{int(sc['detail'].str.startswith('roles swapped').sum())} swaps")
        print("\n### role_changed (positives)\n\n| min_match | " + " | ".join(
            f"{n}: quarantined · precision · recall" for n in frames) + " |\n|---|" + "---|" * len(frames))
        for value in MIN_MATCHES:
            cells = []
            for name, part in positives.items():
                r = precision_recall(role_hits(scores[name], value), part["human"] == "bad")
                cells.append(f"{r['quarantined']}/{len(part)} · {r['precision']:.2f} · {r['recall']:.2f} "
                             f"(of {r['bad']} bad)")
            print(f"| {value} | " + " | ".join(cells) + " |")
        names = list(positives)
        for chooses, confirms in ((names[0], names[1]), (names[1], names[0])):  # two-fold: each set chooses once
            f1 = {v: f1_score(positives[chooses]["human"] == "bad", role_hits(scores[chooses], v), zero_division=0)
                  for v in MIN_MATCHES}
            best = max(MIN_MATCHES, key=lambda v: (f1[v], -v))
            r = precision_recall(role_hits(scores[confirms], best), positives[confirms]["human"] == "bad")
            print(f"\nchosen on {chooses} (F1 {f1[best]:.2f}): min_match {best} → on {confirms}: "
                  f"precision {r['precision']:.2f}, recall {r['recall']:.2f}")
        for name, sc in scores.items():
            for (_, row), (_, s) in zip(positives[name].iterrows(), sc.iterrows()):
                print(f"  [{row['human']}] {s['score']} {s['reason']} | {s['detail'][:150]}")
    for run in filter(None, args.runs.split(",")):
        n, k, flagged = copied_examples(Path(run))
        print(f"\ncopied_example on {run}: {k} of {n} accepted generations" + "".join(f"\n  - {t}" for t in flagged))


if __name__ == "__main__":
    main()
