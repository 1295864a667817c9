"""The triple checks of issue 34 on the hand-labeled generations (benchmarks/data/verifier_generations*.csv: 210
generations read against their anchor, `human` good / bad): for each check and setting, how many it quarantines,
its precision (the quarantined that a reader judged bad) and recall (the bad ones it quarantines). Chosen on one
labeled set, confirmed on the other (the two were drawn from different runs: 90 generations of the old generator,
120 of the issue-24 one). `copied_example` is counted on runs' accepted generations against their prompts' examples. The labeled rows passed
every rule of their day, so each table shows what the new check adds.

    .venv/bin/python -m benchmarks.triple_checks [--runs data/outputs/data-value/r1,data/outputs/data-value/r2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from tasks.generate.candidates import Chooser  # noqa: E402
from tasks.generate.settings import ValidationSettings  # noqa: E402
from tasks.generate.validation import validate  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SETS = {"set 1 (90, old generator)": "verifier_generations.csv", "set 2 (120, issue-24 generator)":
        "verifier_generations_2.csv"}
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
    for run in filter(None, args.runs.split(",")):
        n, k, flagged = copied_examples(Path(run))
        print(f"\ncopied_example on {run}: {k} of {n} accepted generations" + "".join(f"\n  - {t}" for t in flagged))


if __name__ == "__main__":
    main()
