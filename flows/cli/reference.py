"""`config-reference`: the configuration reference generated from the settings classes (tasks/core/config_reference.py),
printed or written to docs/configuration.md, and `sections()`: which settings objects it covers, in what order."""

from __future__ import annotations

import argparse
from pathlib import Path

from tasks.core.config_reference import Section


def sections() -> tuple[Section, ...]:
    """sts-pipeline's parameters in the order a run uses them, then the environment."""
    from tasks.core.config import LLMSettings
    from tasks.core.env_settings import PREFIX, StsgenEnv
    from tasks.dataset.settings import DatasetSettings
    from tasks.generate.settings import GenerateSettings
    from tasks.label.settings import LabelSettings
    from tasks.retrieve.settings import RetrieveSettings
    from tasks.train.settings import TrainSettings

    return (
        Section("llm", LLMSettings, "llm", "The OpenAI-compatible endpoint every LLM call goes to: stage 1, written "
                "contexts, the rating. Its defaults come from the `STSGEN_LLM_*` variables"),
        Section("generate", GenerateSettings, "generate", "Stage 1, generate-sts-triples"),
        Section("retrieve", RetrieveSettings, "retrieve", "Stage 2, retrieve-contexts"),
        Section("label", LabelSettings, "label", "Stage 3, label-pairs"),
        Section("train", TrainSettings, "train", "Stage 4, train-surrogate: the one recipe `./stsgen train`, "
                "sts-pipeline and train-on-dataset train (its own flow takes it as `settings`); data without labeled "
                "pairs drops the pairs' regression (tasks/train/settings.py `for_data`)"),
        Section("dataset", DatasetSettings, "dataset", "build-dataset: the dataset version sts-pipeline trains on"),
        Section("env", StsgenEnv, "Environment variables", "Read from the process environment when a command or "
                "flow starts", env_prefix=PREFIX),
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("config-reference", help="print the configuration reference (every setting's path, type, "
                       "default and description) generated from the settings classes")
    p.add_argument("--write", metavar="PATH", help="write it to PATH (docs/configuration.md) instead")
    p.set_defaults(func=_config_reference)


def _config_reference(args: argparse.Namespace) -> int:
    from tasks.core.config_reference import render

    text = render(sections())
    if args.write:
        Path(args.write).write_text(text + "\n")
        print(f"wrote {args.write}")
    else:
        print(text)
    return 0
