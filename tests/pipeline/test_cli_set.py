"""`--set PATH=VALUE`: any setting from the command line, by its docs/configuration.md path, validated like a flag."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from flows.cli import build_parser
from tasks.core.config import ConfigError


def test_a_stage_command_sets_fields_that_have_no_flag():
    from flows.cli.stages import generate_settings

    args = build_parser().parse_args(["generate", "--n", "7", "--set", "generate.pattern.intermediate_examples=band",
                                      "--set", "generate.sampling.candidates=2", "--set", "generate.n=9"])
    settings = generate_settings(args)
    assert settings.pattern.intermediate_examples == "band" and settings.sampling.candidates == 2
    assert settings.n == 9  # applied after the flags
    assert settings.pattern.kind == "sts"  # the rest of the nested object keeps its defaults


def test_the_pipeline_routes_each_path_to_its_stage():
    from flows.cli.stages import pipeline_settings

    plain = pipeline_settings(build_parser().parse_args(["run"]))
    args = build_parser().parse_args(["run", "--set", "label.tfidf_weight=0", "--set", "train.steps=11",
                                      "--set", 'retrieve.selection={"contexts_per_sentence": 3}'])
    settings = pipeline_settings(args)
    assert settings["label"].tfidf_weight == 0 and plain["label"].tfidf_weight != 0
    assert settings["train"].steps == 11 and settings["retrieve"].selection.contexts_per_sentence == 3
    assert settings["generate"] == plain["generate"]  # no path named it


def test_bad_paths_fail_with_the_fix():
    from flows.cli.stages import generate_settings, pipeline_settings

    with pytest.raises(ConfigError, match="this command's settings are generate, retrieve, label, train"):
        pipeline_settings(build_parser().parse_args(["run", "--set", "generat.n=5"]))
    with pytest.raises(ConfigError, match="PATH=VALUE"):
        generate_settings(build_parser().parse_args(["generate", "--set", "generate.n"]))
    with pytest.raises(ValidationError, match="no_such_field"):  # the settings refuse a field they do not have
        generate_settings(build_parser().parse_args(["generate", "--set", "generate.pattern.no_such_field=1"]))
