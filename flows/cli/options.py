"""Command-line options shared by several commands, and the settings objects built from them: a flag left out is
None and sets nothing, so every default keeps its one home — the stage's settings class (a preset's sizes come
between the two: flows/presets.py)."""

from __future__ import annotations

import argparse
import typing
from typing import Any

from tasks.core.defaults import DEFAULT_GENERATOR


def given(**flags: Any) -> dict:
    """The flags that were given (not None): the settings fields they set."""
    return {name: value for name, value in flags.items() if value is not None}


def default_of(settings: type, *path: str) -> str:
    """A settings field's default as a flag's help shows it (`--n … (default: 30)`), read from the settings class:
    the value stays in its one home and the help cannot drift from it."""
    field = settings.model_fields[path[0]]
    value = field.default_factory() if field.default_factory else field.default
    for name in path[1:]:  # a nested field: its value in the parent's default (the recipe's, for train's losses)
        value = getattr(value, name)
    return "none" if value is None else str(value)


def choices_of(settings: type, *path: str) -> tuple[str, ...]:
    """The values a settings field takes (its Literal, `X | None` unwrapped), for a flag's `choices`: a CLI that
    restated them would drift from the settings."""
    annotation: Any = settings
    for name in path:
        annotation = annotation.model_fields[name].annotation
        if typing.get_origin(annotation) is not typing.Literal:  # `Settings | None` → the settings class
            annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    literal = annotation if typing.get_origin(annotation) is typing.Literal else \
        next(a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal)
    return typing.get_args(literal)


def merged(*layers: dict) -> dict:
    """Settings fields layered left to right (a preset, then the flags), nested settings merged field by field."""
    out: dict = {}
    for layer in layers:
        for name, value in layer.items():
            out[name] = merged(out[name], value) if isinstance(value, dict) and isinstance(out.get(name), dict) \
                else value
    return out


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    """The OpenAI-compatible endpoint (stage 1, and stage 3's LLM rating), or the embedded local server."""
    p.add_argument("--local-model", default=DEFAULT_GENERATOR,
                   help="embedded model started on 127.0.0.1 (ignored with --base-url)")
    p.add_argument("--base-url", help="use this OpenAI-compatible endpoint instead of a local server")
    p.add_argument("--model", help="model name at --base-url")
    add_engine_argument(p)
    p.add_argument("--concurrency", type=int, default=None, help="requests in flight (llm.max_concurrency; the local "
                   "server gets as many slots)")
    p.add_argument("--rpm", type=float)
    p.add_argument("--price-prompt", type=float, default=None, metavar="PER_MILLION",
                   help="what the endpoint charges per million prompt tokens (manifests price the tokens used)")
    p.add_argument("--price-completion", type=float, default=None, metavar="PER_MILLION",
                   help="… per million completion tokens")


def add_engine_argument(p: argparse.ArgumentParser) -> None:
    from tasks.llm.server import Engine

    p.add_argument("--llm-engine", choices=typing.get_args(Engine), default="auto",
                   help="the local server: llama.cpp's llama-server (built by setup; auto picks it when there) or "
                   "llama-cpp-python's server")


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """Stage 1's flags (GenerateSettings, tasks/generate/settings.py): unset ones keep the settings' defaults."""
    from tasks.generate.settings import GenerateSettings

    p.add_argument("--n", type=int, default=None, help=f"source sentences (default: {default_of(GenerateSettings, 'n')})")

    p.add_argument("--pattern", choices=choices_of(GenerateSettings, "pattern", "kind"), default=None,
                   help=f"pattern kind (default: {default_of(GenerateSettings, 'pattern', 'kind')})")
    p.add_argument("--corpus", default=None, help="source corpus: a path (file, folder, zip; default: the embedded "
                   "corpus)")
    p.add_argument("--pattern-source", default=None, help="SemEval TSV / SICK file of the pattern's examples")
    p.add_argument("--intermediate-base", choices=choices_of(GenerateSettings, "pattern", "intermediate_base"),
                   default=None, help="what STS intermediates are derived from (default: "
                   f"{default_of(GenerateSettings, 'pattern', 'intermediate_base')}; 'positive' as in NGCSE)")
    p.add_argument("--seed", type=int, default=None,
                   help="the run's seed, set in every seeded setting (sampling, judge, coherence model, written contexts, rating, training; default: tasks/core/config.DEFAULT_SEED): another seed "
                   "recomputes every stage and re-asks the LLM")
    p.add_argument("--max-attempts", type=int, default=None,
                   help=f"generations tried per slot (default: {default_of(GenerateSettings, 'max_attempts')})")
    p.add_argument("--candidates", type=int, default=None,
                   help="best of N: choices per request (default: "
                   f"{default_of(GenerateSettings, 'sampling', 'candidates')}; 1 = one sample per request)")
    p.add_argument("--intermediate-choice", default=None,
                   choices=choices_of(GenerateSettings, "sampling", "intermediate_choice"),
                   help="best of N for intermediates: the choice adding the fewest words to its base, or the one "
                   "nearest the pattern's cosine (default: "
                   f"{default_of(GenerateSettings, 'sampling', 'intermediate_choice')})")
    p.add_argument("--avoid-used-sources", action="store_true", default=None,
                   help="sample no source sentence an earlier run under --output-dir used (grow one dataset)")
    p.add_argument("--batch-api", action="store_true",
                   help="stage 1 through the OpenAI Batch API (half price, results within 24 h; needs --base-url "
                   "of an endpoint serving /files and /batches); an interrupted run re-attaches to its batch")
    add_verifier_arguments(p)


def add_verifier_arguments(p: argparse.ArgumentParser) -> None:
    """Stage 1's verifier (tasks/generate/verification.py): the LLM judge and the encoder ordering check."""
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge of each generation")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge (default: the generator's)")
    p.add_argument("--judge-model", help="judge model at --judge-base-url")
    p.add_argument("--judge-threshold", type=float, default=None, help="P(pass) the judge must give, every kind "
                   "(default: per kind, verifier.thresholds)")
    p.add_argument("--judge-templates", help="folder with judge-positive.j2, judge-intermediate.j2, judge-negative.j2")
    p.add_argument("--ordering-margin", type=float, default=None,
                   help="also require cos(a,s+) − cos(a,s−) ≥ this (encoder check; default off)")


def generate_fields(args: argparse.Namespace) -> dict:
    """GenerateSettings fields from stage 1's flags (the run seed goes through `with_seed`, not here)."""
    from tasks.core.config import ConfigError

    if bool(args.judge_base_url) != bool(args.judge_model):
        raise ConfigError("--judge-base-url and --judge-model go together (the judge's endpoint and its model).")
    verifier = given(judge=False if args.no_judge else None, threshold=args.judge_threshold,
                     template_dir=args.judge_templates, ordering_margin=args.ordering_margin,
                     llm={"base_url": args.judge_base_url, "model": args.judge_model} if args.judge_base_url else None)
    return given(n=args.n, max_attempts=args.max_attempts, avoid_used_sources=args.avoid_used_sources,
                 batch_api=getattr(args, "batch_api", None) or None) | {
        "corpus": given(source=args.corpus), "pattern": given(kind=args.pattern, source=args.pattern_source,
                                                                 intermediate_base=args.intermediate_base),
        "sampling": given(candidates=args.candidates, intermediate_choice=args.intermediate_choice),
        "verifier": verifier}


def add_labeler_arguments(p: argparse.ArgumentParser, lm_flag: str) -> None:
    p.add_argument(lm_flag, dest="label_lm", default=None,
                   help="causal LM of the context labeler: registered local model, .gguf file or folder (scored "
                   "in-process), or an OpenAI-compatible endpoint URL …/v1 that echoes prompt log-probs (vLLM, "
                   "llama-cpp-python's server; key in $STSGEN_LM_API_KEY)")
    p.set_defaults(label_lm_flag=lm_flag)  # the flag's name on this command, for its error messages
    p.add_argument("--lm-model", dest="lm_model", default=None, help="with an endpoint: the served model's name")
    p.add_argument("--lm-tokenizer", dest="lm_tokenizer", default=None,
                   help="with an endpoint: the served model's tokenizer (registered model, .gguf file or folder)")
    from tasks.label.settings import LabelSettings

    p.add_argument("--label-method", choices=choices_of(LabelSettings, "method"), default=None,
                   help="stage-3 labeler (default: the LabelSettings default, docs/results.md)")
    p.add_argument("--similarity", choices=choices_of(LabelSettings, "similarity"), default=None,
                   help="how two sentences' context-score rows become a label")
    p.add_argument("--lm-dtype", dest="lm_dtype", choices=choices_of(LabelSettings, "dtype"), default=None,
                   help="the in-process labeler LM's dtype (default auto: bfloat16 where bf16 is native, else float32)")


def label_fields(args: argparse.Namespace) -> dict:
    """LabelSettings fields from the labeler's flags."""
    from tasks.core.config import ConfigError
    from tasks.label.settings import is_endpoint

    fields = given(lm=args.label_lm, method=args.label_method, similarity=args.similarity,
                   dtype=getattr(args, "lm_dtype", None),
                   contexts_per_sentence=getattr(args, "contexts_per_sentence", None),
                   candidates_per_sentence=getattr(args, "candidates_per_sentence", None),
                   calibration=getattr(args, "calibration", None))
    flag = getattr(args, "label_lm_flag", "--lm")
    if args.label_lm and is_endpoint(args.label_lm):  # --lm URL: the scoring endpoint, its tokenizer as label.lm
        if not args.lm_tokenizer:  # (the URL is not echoed: it may carry credentials)
            raise ConfigError(f"{flag} is an endpoint URL: give --lm-tokenizer, the served model's tokenizer "
                              "(a registered local model, a .gguf file or a transformers folder).")
        fields |= {"lm": args.lm_tokenizer,
                   "lm_endpoint": {"base_url": args.label_lm, "model": args.lm_model or args.lm_tokenizer}}
    elif args.lm_model or args.lm_tokenizer:
        raise ConfigError(f"--lm-model and --lm-tokenizer describe a served LM: give its endpoint URL with {flag} "
                          "(or leave them out to score in-process).")
    if getattr(args, "lambdas", None):
        fields |= dict(zip(("lambda_disc", "lambda_sentence", "lambda_left", "lambda_right"), args.lambdas))
    return fields


def add_device_argument(p: argparse.ArgumentParser) -> None:
    from tasks.core.device import check_device_setting

    def device(value: str) -> str:
        try:
            return check_device_setting(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    p.add_argument("--device", type=device, default=None,
                   help="torch device of the torch stages: auto (CUDA if available, else CPU; the default), cpu, "
                   "cuda, cuda:N")


def add_runner_arguments(p: argparse.ArgumentParser) -> None:
    """Where the CPU stages' shards run (retrieval and labeling), and the torch device."""
    from tasks.core.runners import ExecutionSettings

    p.add_argument("--workers", choices=choices_of(ExecutionSettings, "workers"), default=None,
                   help="shard runner of the CPU stages; dask without --dask-address starts a loopback LocalCluster")
    p.add_argument("--dask-address", help="scheduler address of an existing Dask cluster (tcp://host:8786)")
    add_device_argument(p)


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    """Where a stage command writes: a run folder under the output directory."""
    from tasks.core.home import OUTPUTS_DIR

    p.add_argument("--output-dir", default=OUTPUTS_DIR, help="where the run folders go (default: %(default)s)")
    p.add_argument("--run", default="auto", help="this run's folder under --output-dir (default auto: <UTC "
                   "date-time>-<flow run name>); <output-dir>/latest points at the last finished run")
    p.add_argument("--set", action="append", default=None, metavar="PATH=VALUE", dest="overrides",
                   help="any setting, flag or not, by its path in docs/configuration.md (e.g. "
                   "generate.pattern.intermediate_examples=band; a JSON value or a plain string); repeatable, "
                   "applied after the flags")


def overrides(args: argparse.Namespace, stage: str) -> dict:
    """The `--set PATH=VALUE` fields of `stage`'s settings, nested ({"pattern": {"intermediate_examples": "band"}});
    a path names its stage first (`generate.n=5`), as docs/configuration.md lists it. Values are JSON where they
    parse (5, 0.2, true, null, [..], {..}), else the string. The settings class validates them like any flag."""
    import json

    from tasks.core.config import ConfigError

    out: dict = {}
    for item in getattr(args, "overrides", None) or []:
        path, sep, raw = item.partition("=")
        parts = path.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ConfigError(f"--set {item!r}: give PATH=VALUE with PATH a setting's path from docs/configuration.md "
                              "(e.g. generate.sampling.candidates=4).")
        if parts[0] != stage:
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        for key in reversed(parts[1:]):
            value = {key: value}
        out = merged(out, value)
    return out


def check_override_stages(args: argparse.Namespace, stages: tuple[str, ...]) -> None:
    """Every `--set` path names a stage this command runs: a typo must not be ignored."""
    from tasks.core.config import ConfigError

    for item in getattr(args, "overrides", None) or []:
        stage = item.partition("=")[0].strip().split(".")[0]
        if stage not in stages:
            raise ConfigError(f"--set {item!r}: this command's settings are {', '.join(stages)}; a path starts with "
                              "one of them (docs/configuration.md lists every path).")


def execution_fields(args: argparse.Namespace) -> dict:
    """ExecutionSettings fields (tasks/core/runners.py) from --workers / --dask-address."""
    return given(workers=args.workers, dask_address=args.dask_address)


def device_fields(args: argparse.Namespace) -> dict:
    """The `device` field of a torch stage's settings from --device."""
    return given(device=getattr(args, "device", None))
