"""Would a fact-level rule for positives reach the ≥ 85% target? Measured on the 30 hand-labeled first-attempt
positives of benchmarks/data/verifier_generations.csv, no LLM: a positive is rejected when a number, a number word,
a capitalised word (not sentence-initial) or a month/weekday of the anchor does not appear in it.

    .venv/bin/python -m benchmarks.fact_rule [benchmarks/data/verifier_generations.csv]
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

NUMBER = re.compile(r"\d[\d,.]*|(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand"
                    r"|million|billion)", re.I)
CALENDAR = set("january february march april may june july august september october november december monday tuesday "
               "wednesday thursday friday saturday sunday".split())
TOKEN = re.compile(r"[A-Za-z][\w'-]*|\d[\d,.]*")


def facts(text: str) -> set[str]:
    """Numbers, names (capitalised, not the first word) and dates of a sentence, lower-cased."""
    words = TOKEN.findall(text)
    return {w.lower().rstrip(".,") for i, w in enumerate(words)
            if NUMBER.fullmatch(w) or (w[0].isupper() and i > 0) or w.lower() in CALENDAR}


def dropped_facts(anchor: str, candidate: str) -> list[str]:
    kept = {w.lower().rstrip(".,") for w in TOKEN.findall(candidate)}
    return sorted(facts(anchor) - kept)


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/data/verifier_generations.csv")
    rows = [r for r in csv.DictReader(path.open()) if r["kind"] == "positive"]
    outcome = [(r["human"] == "bad", bool(dropped_facts(r["anchor"], r["candidate"]))) for r in rows]
    tp = sum(bad and rej for bad, rej in outcome)
    fp = sum(rej and not bad for bad, rej in outcome)
    fn = sum(bad and not rej for bad, rej in outcome)
    kept_good = sum(not bad and not rej for bad, rej in outcome)
    print(f"{len(rows)} positives, {tp + fn} bad by reading; rule rejects {tp + fp}: precision {tp / max(tp + fp, 1):.2f}, "
          f"recall {tp / max(tp + fn, 1):.2f}; good among accepted {kept_good}/{len(rows) - tp - fp} "
          f"(without the rule {len(rows) - tp - fn}/{len(rows)})")


if __name__ == "__main__":
    main()
