"""Every default has one home: each stage's flow takes one settings object of its stage's class, sts-pipeline takes
the same four, the CLI's flags restate no default (a flag left out sets nothing), prefect.yaml's parameters validate
against the flows, and one run seed reaches every seeded setting."""

from __future__ import annotations

import argparse
import inspect

import pytest
from pydantic import TypeAdapter

from flows.build_dataset import build_dataset
from flows.cli import build_parser
from flows.cli.stages import generate_settings, pipeline_settings, train_fields
from flows.generate_sts_triples import generate_sts_triples
from flows.label_pairs import label_pairs
from flows.presets import PRESETS
from flows.retrieve_contexts import retrieve_contexts
from flows.serve import deployment_specs, load_flow
from flows.sts_pipeline import sts_pipeline
from flows.train_surrogate import train_surrogate
from tasks.core.config import LLMSettings, Settings, with_seed
from tasks.dataset.settings import DatasetSettings
from tasks.generate.settings import GenerateSettings
from tasks.label.settings import LabelSettings
from tasks.retrieve.settings import RetrieveSettings
from tasks.train.settings import TrainSettings

STAGES = {"generate": (generate_sts_triples, GenerateSettings), "retrieve": (retrieve_contexts, RetrieveSettings),
          "label": (label_pairs, LabelSettings), "dataset": (build_dataset, DatasetSettings),
          "train": (train_surrogate, TrainSettings)}
# CLI options that are not settings fields: where to write, which inputs, which local server, the preset.
NOT_SETTINGS = {"help", "local_model", "llm_engine", "output_dir", "run", "preset", "sentences", "contexts", "triples",
                "pairs", "dataset", "base_url", "model", "rpm", "price_prompt", "price_completion", "judge_base_url",
                "judge_model"}


def _settings_parameters(fn) -> dict[str, type]:
    return {name: p.annotation for name, p in inspect.signature(fn, eval_str=True).parameters.items()
            if isinstance(p.annotation, type) and issubclass(p.annotation, Settings)}


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_flow_takes_one_settings_object_of_its_stage_class(stage):
    flow, cls = STAGES[stage]
    params = inspect.signature(flow.fn).parameters
    assert _settings_parameters(flow.fn) == {"settings": cls}, params
    assert params["settings"].default == cls()  # the default is the class's own, not a restated one
    assert not {"n", "seed", "corpus", "selection", "coherence", "workers", "train_settings"} & set(params)


def test_the_pipeline_takes_the_stage_objects_and_restates_no_stage_parameter():
    params = inspect.signature(sts_pipeline.fn, eval_str=True).parameters
    for stage, (flow, cls) in STAGES.items():
        assert cls in (params[stage].annotation, *getattr(params[stage].annotation, "__args__", ()))
        assert params[stage].default == cls()
    stage_params = set().union(*(inspect.signature(f.fn).parameters for f, _ in STAGES.values()))
    # Only what is shared by all stages (the endpoint, where outputs go) or is the pipeline's own (the run seed).
    assert set(params) - set(STAGES) == {"llm", "seed", "output_dir", "run"}
    assert set(params) - set(STAGES) - {"seed"} <= stage_params


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("command", ["run", "pipeline", "generate", "retrieve", "label", "train"])
def test_stage_command_flags_restate_no_settings_default(command):
    restated = {a.dest: a.default for a in _subparsers()[command]._actions
                if a.dest not in NOT_SETTINGS and a.default is not None and a.default is not False}
    assert not restated, f"`stsgen {command}` flags with their own default (the settings class's is the one): " \
                         f"{restated}"


def test_no_flags_build_the_settings_defaults_and_flags_set_only_their_field():
    parse = build_parser().parse_args
    assert generate_settings(parse(["generate"])) == GenerateSettings()
    assert TrainSettings.model_validate(train_fields(parse(["train"]))) == TrainSettings()
    built = pipeline_settings(parse(["run"]))  # the quick preset's sizes over the class defaults, nothing else
    assert built["generate"] == GenerateSettings()
    assert built["label"] == LabelSettings.model_validate(PRESETS["quick"]["label"])
    assert built["train"] == TrainSettings.model_validate(PRESETS["quick"]["train"])
    assert built["retrieve"] == RetrieveSettings()  # the coherence model prepare-corpus builds: no preset size
    flagged = pipeline_settings(parse(["run", "--n", "7", "--workers", "processes", "--candidates", "2"]))
    assert flagged["generate"] == GenerateSettings(n=7, sampling={"candidates": 2})
    assert flagged["retrieve"].execution.workers == flagged["label"].execution.workers == "processes"
    assert generate_settings(parse(["generate", "--seed", "5"])).seed == 5


def test_one_run_seed_reaches_every_seeded_setting():
    def seeds(settings: Settings, at: str = "") -> dict[str, int]:
        found = {f"{at}seed": settings.seed} if "seed" in type(settings).model_fields else {}
        for name in type(settings).model_fields:
            if isinstance(value := getattr(settings, name), Settings):
                found |= seeds(value, f"{at}{name}.")
        return found

    for cls in (GenerateSettings, RetrieveSettings, LabelSettings, TrainSettings):
        before, after = seeds(cls()), seeds(with_seed(cls(), 7))
        assert before and set(after) == set(before) and set(after.values()) == {7}, (cls, after)
    assert "rating.seed" in seeds(LabelSettings()) and "coherence.seed" in seeds(RetrieveSettings())
    assert with_seed(GenerateSettings(n=3), None) == GenerateSettings(n=3)


def test_prefect_yaml_parameters_validate_against_their_flows_and_a_nested_typo_fails():
    from prefect.exceptions import ParameterTypeError

    for spec in deployment_specs():
        flow = load_flow(spec["entrypoint"])
        validated = flow.validate_parameters(spec.get("parameters") or {})
        for name, value in (spec.get("parameters") or {}).items():
            if isinstance(value, dict):  # a settings object: the fields given, the class's defaults for the rest
                assert validated[name].model_dump(include=set(value)) == value
    with pytest.raises(ParameterTypeError):
        generate_sts_triples.validate_parameters({"settings": {"nn": 3}})
    nightly = next(s for s in deployment_specs() if s["name"] == "nightly")
    assert load_flow(nightly["entrypoint"]).validate_parameters(nightly["parameters"])["settings"].n == 200
    assert isinstance(sts_pipeline.validate_parameters({"llm": {"base_url": "http://h/v1", "model": "m"}})["llm"],
                      LLMSettings)


def test_corpus_flags_build_corpus_settings():
    from flows.cli.stages import train_fields
    from tasks.core.config import CorpusSettings

    parse = build_parser().parse_args
    mined = TrainSettings.model_validate(train_fields(parse(["train", "--mine", "2", "--negatives", "both",
                                                             "--mining-corpus", "docs.zip"])))
    assert mined.mining.corpus == CorpusSettings(source="docs.zip")
    assert TrainSettings().mining.corpus is None  # the pipeline fills in stage 1's corpus, a lone run the default
    kept = TrainSettings.model_validate(train_fields(parse(["train", "--wise-alpha", "0.5", "--backbone-anchor", "10"])))
    assert kept.wise_alpha == 0.5 and kept.losses.backbone_anchor == 10.0  # the flags reach the nested settings


def test_the_label_flags_put_a_scoring_endpoint_in_its_nested_settings(tmp_path):
    from flows.cli.options import label_fields
    from tasks.core.config import ConfigError

    parse = build_parser().parse_args
    served = LabelSettings.model_validate(label_fields(parse(["label", "--lm", "http://gpu:8000/v1", "--lm-model",
                                                              "m", "--lm-tokenizer", "smollm2-135m-instruct"])))
    assert served.lm == "smollm2-135m-instruct" and isinstance(served.lm_endpoint, LLMSettings)
    assert (served.lm_endpoint.base_url, served.lm_endpoint.model) == ("http://gpu:8000/v1", "m")
    assert served.lm_endpoint.api_key_env == "STSGEN_LM_API_KEY"  # the scorer's own key variable
    with pytest.raises(ConfigError, match="--lm is an endpoint URL: give --lm-tokenizer") as refused:
        label_fields(parse(["label", "--lm", "http://user:s3cret@gpu:8000/v1"]))
    assert "s3cret" not in str(refused.value)  # the URL may carry credentials: not echoed
    with pytest.raises(ConfigError, match="--label-lm is an endpoint URL"):
        label_fields(parse(["pipeline", "--label-lm", "http://gpu:8000/v1"]))  # the command's own flag named
    with pytest.raises(ConfigError, match="give its endpoint URL with --lm"):
        label_fields(parse(["label", "--lm-model", "m"]))  # endpoint flags without an endpoint: not ignored
    assert LabelSettings.model_validate(label_fields(parse(["label"]))).lm_endpoint is None


def test_every_flag_with_choices_offers_its_settings_fields_values():
    """The CLI's `choices` are read from the settings' Literal types (flows.cli.options.choices_of), never restated:
    a value added to a settings type is offered by its flag, a removed one refused."""
    import typing

    from flows.cli.options import choices_of
    from tasks.core.config import CorpusSettings
    from tasks.core.runners import ExecutionSettings
    from tasks.llm.server import Engine

    fields = {"pattern": (GenerateSettings, "pattern", "kind"), "label_method": (LabelSettings, "method"),
              "similarity": (LabelSettings, "similarity"), "lm_dtype": (LabelSettings, "dtype"),
              "workers": (ExecutionSettings, "workers"),
              "contexts_source": (RetrieveSettings, "source", "source"),
              "document_split": (CorpusSettings, "document_split"),
              "screener": (RetrieveSettings, "selection", "screener"), "backbone": (TrainSettings, "backbone", "kind"),
              "regression_loss": (TrainSettings, "losses", "regression_loss"),
              "label_source": (TrainSettings, "label_source"), "negatives": (TrainSettings, "losses", "negatives"),
              "intermediate_base": (GenerateSettings, "pattern", "intermediate_base"),
              "intermediate_choice": (GenerateSettings, "sampling", "intermediate_choice")}
    seen = set()
    for command, sub in _subparsers().items():
        for action in sub._actions:
            if not action.choices or action.dest in ("action", "table", "func"):
                continue  # a command's verbs, not a setting
            seen.add(action.dest)
            if action.dest == "llm_engine":
                assert tuple(action.choices) == typing.get_args(Engine), command
            elif action.dest == "preset":
                assert tuple(action.choices) == tuple(PRESETS), command
            else:
                assert tuple(action.choices) == choices_of(*fields[action.dest]), (command, action.dest)
    assert set(fields) <= seen
    # What the flags offer today, written out once here: a settings type that changes shows up in this test.
    assert {dest: tuple(choices_of(*path)) for dest, path in fields.items()} == {
        "pattern": ("sts", "nli"), "label_method": ("context", "llm_rating", "combined"),
        "similarity": ("centered_cosine", "cosine", "rank", "contrast"), "lm_dtype": ("auto", "float32", "bfloat16"),
        "workers": ("threads", "processes", "dask"),
        "contexts_source": ("retrieved", "generated", "both"), "document_split": ("file", "blank_lines"),
        "screener": ("tfidf", "bm25"), "backbone": ("encoder", "bellm"), "regression_loss": ("cosine", "cosent"),
        "label_source": ("label", "rating", "context_label", "teacher"), "negatives": ("generated", "mined", "both"),
        "intermediate_base": ("positive", "anchor"), "intermediate_choice": ("fewest_added", "pattern_cosine")}
    assert choices_of(TrainSettings, "backbone", "kind") == ("encoder", "bellm")  # `X | None` and nesting unwrapped
    assert choices_of(LabelSettings, "lm_endpoint", "server_engine") == ("llama-server", "llama-cpp-python")


def test_every_flow_that_trains_carries_the_recipe_in_its_schema_and_partial_parameters():
    """The recipe (TrainSettings' defaults: the pairs' CoSENT regression and the backbone anchor beside the triples,
    lr auto) reaches every flow that trains — the parameter default a deployment's schema carries, and a
    deployment's partial `train` / `settings` parameter, whose unset fields keep the recipe. The CLI and prefect.yaml:
    tests/train/test_recipe.py."""
    from prefect.utilities.callables import parameter_schema

    from flows.train_on_dataset import train_on_dataset

    recipe = TrainSettings().losses
    assert recipe.regression > 0 and recipe.regression_loss == "cosent" and recipe.backbone_anchor > 0
    for flow, name in ((sts_pipeline, "train"), (train_on_dataset, "train"), (train_surrogate, "settings")):
        schema = parameter_schema(flow.fn).properties[name]
        assert schema["default"]["losses"] == recipe.model_dump(mode="json") and schema["default"]["lr"] == "auto"
        # a deployment run's `-p train='{…}'` is validated into the parameter's type: unset fields keep the recipe
        annotation = inspect.signature(flow.fn, eval_str=True).parameters[name].annotation
        partial = TypeAdapter(annotation).validate_python({"steps": 7, "losses": {"temperature": 0.1}})
        assert partial.steps == 7 and partial.losses == recipe.model_copy(update={"temperature": 0.1}), flow.name
