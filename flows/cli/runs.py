"""Commands on what runs wrote: `runs list | prune` (the run folders under an output directory), `export` (stage
tables as Hugging Face datasets with dataset cards) and `build-dataset` (one deduplicated, decontaminated dataset
version from many runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tasks.core.home import DATASETS_DIR, LATEST, OUTPUTS_DIR


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("runs", help="list the run folders under --output-dir, or prune the older ones")
    p.add_argument("action", choices=("list", "prune"))
    p.add_argument("--output-dir", default=OUTPUTS_DIR)
    p.add_argument("--keep", type=int, default=5, help="prune: finished runs to keep besides latest")
    p.set_defaults(func=_runs)
    add_estimate_parser(sub)

    p = sub.add_parser("export", help="write stage tables as Hugging Face datasets with dataset cards")
    p.add_argument("--output-dir", default=f"{OUTPUTS_DIR}/{LATEST}", help="the run folder the stages wrote to")
    p.add_argument("--table", action="append", choices=("triples", "pairs"), help="default: both")
    p.add_argument("--push-to-hub", metavar="REPO", help="also upload (needs a hub token and network; "
                   "REPO-triples / REPO-pairs when both are exported)")
    p.set_defaults(func=_export)

    p = sub.add_parser("build-dataset", help="one dataset version from finished runs: deduplicated, decontaminated "
                       "against the evaluation sets (flow build-dataset)")
    p.add_argument("--runs-dir", default=OUTPUTS_DIR, help="the output directory the runs wrote to (every "
                   "finished run is used unless --run names some)")
    p.add_argument("--run", action="append", dest="runs", metavar="RUN", help="a run (name under --runs-dir, or a "
                   "folder) to use; repeatable")
    p.add_argument("--output-dir", default=DATASETS_DIR, help="where versions are written (ds-<key>/, latest)")
    p.add_argument("--eval-set", action="append", default=[], metavar="SOURCE", help="another evaluation set to "
                   "decontaminate against, besides STS-B dev and test: a SICK file, a SemEval STS folder, an STS-B "
                   ".tsv/.csv, a Parquet or a text file; repeatable")
    p.add_argument("--near-duplicate-jaccard", type=float, default=None)
    p.add_argument("--paraphrase-cosine", type=float, default=None)
    p.add_argument("--eval-containment", type=float, default=None)
    p.add_argument("--eval-cosine", type=float, default=None)
    p.add_argument("--no-encoder", action="store_true", help="the text checks only (exact, MinHash, n-grams): no "
                   "paraphrase or embedding-match check, nothing encoded")
    p.add_argument("--allow-mixed", action="store_true", help="allow runs of different patterns (STS and NLI)")
    p.set_defaults(func=_build_dataset)


def add_estimate_parser(sub: argparse._SubParsersAction) -> None:
    from tasks.core.defaults import DEFAULT_GENERATOR

    p = sub.add_parser("estimate", help="what a run of --n sources will cost (requests, tokens, money, time), from "
                       "earlier runs' manifests: no LLM call")
    p.add_argument("--n", type=int, required=True, help="source sentences of the run to estimate")
    p.add_argument("--base-url", help="the endpoint the run will use (only named in the estimate: nothing is sent)")
    p.add_argument("--model", default=None, help="the generator whose measured rates to use (default: STSGEN_LLM_MODEL "
                   f"or {DEFAULT_GENERATOR}, the embedded one)")
    p.add_argument("--price-prompt", type=float, default=None, metavar="PER_MILLION",
                   help="price per million prompt tokens (default: STSGEN_LLM_PRICE_PROMPT_PER_MILLION)")
    p.add_argument("--price-completion", type=float, default=None, metavar="PER_MILLION",
                   help="… per million completion tokens")
    p.add_argument("--runs-dir", action="append", default=None, metavar="DIR",
                   help=f"output directories of earlier runs (repeatable; default: {OUTPUTS_DIR})")
    p.set_defaults(func=_estimate)


def _estimate(args: argparse.Namespace) -> int:
    from tasks.core.config import ConfigError
    from tasks.core.env_settings import env
    from tasks.report.estimate import estimate_markdown, measured_rates, run_manifests

    if args.n < 1:
        raise ConfigError(f"--n {args.n}: give the number of source sentences of the run to estimate (≥ 1).")
    model = args.model or env().llm.model
    prices = (env().llm.price_prompt_per_million if args.price_prompt is None else args.price_prompt,
              env().llm.price_completion_per_million if args.price_completion is None else args.price_completion)
    dirs = [Path(d) for d in args.runs_dir or [OUTPUTS_DIR]]
    rates = measured_rates(run_manifests(dirs), model)
    if not rates:
        endpoint = f" --base-url {args.base_url or 'URL'} --model {model}" if args.base_url or args.model else ""
        print(f"No earlier run of {model} under {', '.join(map(str, dirs))} to measure its rates (runs under another "
              f"folder count with --runs-dir): run a small one first (`./stsgen generate --n 20{endpoint}`), then "
              "ask again.")
        return 1
    print(estimate_markdown(rates, args.n, model, prices))
    return 0


def _runs(args: argparse.Namespace) -> int:
    from tasks.core.runs import list_runs, prune_runs

    if args.action == "prune":
        removed = prune_runs(args.output_dir, args.keep)
        print(f"removed {len(removed)} run(s): {', '.join(removed) or '-'}")
        return 0
    print("| run | status | stages | latest |\n|---|---|---|---|")
    for r in list_runs(args.output_dir):
        print(f"| {r['name']} | {r['status']} | {', '.join(r['stages']) or '-'} | {'yes' if r['latest'] else ''} |")
    return 0


def _export(args: argparse.Namespace) -> int:
    from tasks.core.hf_dataset import EXPORTS, export_dataset, push_to_hub

    for name in args.table or list(EXPORTS):
        folder = export_dataset(Path(args.output_dir), name)
        print(f"{name}: {folder} (datasets.load_from_disk; dataset card {folder / 'README.md'})")
        if args.push_to_hub:
            repo = f"{args.push_to_hub}-{name}" if len(args.table or EXPORTS) > 1 else args.push_to_hub
            push_to_hub(folder, repo)
            print(f"{name}: pushed to the hub as {repo}")
    return 0



def _build_dataset(args: argparse.Namespace) -> int:
    from flows.build_dataset import build_dataset
    from tasks.dataset.settings import DatasetSettings

    given = {name: getattr(args, name) for name in ("near_duplicate_jaccard", "paraphrase_cosine",
                                                     "eval_containment", "eval_cosine")
             if getattr(args, name) is not None}
    if args.no_encoder:
        given |= {"paraphrase_cosine": None, "eval_cosine": None}
    settings = DatasetSettings(**given, allow_mixed=args.allow_mixed,
                               eval_sets=DatasetSettings().eval_sets + args.eval_set)
    paths = build_dataset(runs_dir=args.runs_dir, runs=args.runs, settings=settings, output_dir=args.output_dir)
    print(f"dataset version: {paths['dataset']}")
    print(f"  card {paths['card']}; train on it: ./stsgen train --dataset {paths['dataset']}")
    return 0
