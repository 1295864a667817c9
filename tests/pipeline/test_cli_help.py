"""`./stsgen <command> -h` shows each flag's default as its value, read from the settings class (one home)."""

from __future__ import annotations

import argparse
import re

from flows.cli import build_parser
from tasks.generate.settings import GenerateSettings
from tasks.train.settings import TrainSettings


def helps() -> dict[str, str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: parser.format_help() for name, parser in sub.choices.items()}


def test_no_help_names_a_settings_class_where_the_default_belongs():
    # "(default: GenerateSettings.n)" told a user where to look, not the value.
    for command, text in helps().items():
        assert not re.search(r"default: \w*Settings\b", " ".join(text.split())), command


def test_a_flags_help_shows_the_settings_default_and_follows_it(monkeypatch):
    text = " ".join(helps()["train"].split())
    assert f"(default: {TrainSettings().losses.backbone_anchor})" in text  # the recipe's, not LossSettings' own 0
    monkeypatch.setattr(GenerateSettings.model_fields["n"], "default", 417)
    assert "source sentences (default: 417)" in " ".join(helps()["generate"].split())
