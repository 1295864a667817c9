"""`verifier fit`: the combined verifier stage 1 ships (models/verifiers/combined.v1.json, `verifier.model`), fit on
hand-labeled generations with their signals (tasks/generate/verifier_fit.py); prints each kind's cross-validated
precision and recall beside the judge alone, writes the model file and loads it back as stage 1 would."""

from __future__ import annotations

import argparse

LABELS = "data/annotations/verifier_signals.csv"
MODEL = "models/verifiers/combined.v1.json"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("verifier", help="fit the combined verifier's model on labeled generations")
    p.add_argument("action", choices=("fit",))
    p.add_argument("--labels", default=LABELS, help=f"labeled generations with their signals (default {LABELS})")
    p.add_argument("--out", default=MODEL, help=f"the model file to write (default {MODEL})")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds of the printed scores")
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    from tasks.generate.combined_verifier import load_verifier_model
    from tasks.generate.verifier_fit import fit_verifier, read_labeled_signals, verifier_report, write_verifier_model

    data = read_labeled_signals(args.labels)
    print("| kind | verifier | n | bad | rejected | precision | recall | good among accepted |\n"
          "|---|---|---|---|---|---|---|---|")
    for r in verifier_report(data, args.folds):
        print(f"| {r['kind']} | {r['verifier']} | {r['n']} | {r['bad']} | {r['rejected']} | {r['precision']:.2f} | "
              f"{r['recall']:.2f} | {r['good_among_accepted']:.2f} |")
    fitted = fit_verifier(data)
    path = write_verifier_model(fitted, args.out)
    load_verifier_model(path)  # what stage 1 reads (`verifier.model`): a file it would refuse fails here
    rows = ", ".join(f"{kind} {part['rows']} rows ({part['bad']} bad)" for kind, part in fitted["kinds"].items())
    print(f"model fit on all rows ({rows}) → {path}")
    return 0
