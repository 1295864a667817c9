"""Command-line options shared by several commands, and the settings objects built from them (the flags that were
given; every other field keeps its settings class's default)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily below: `./stsgen --help` stays fast
    from tasks.generate.settings import VerifierSettings
    from tasks.label.labeling import LabelSettings


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    """The OpenAI-compatible endpoint (stage 1, and stage 3's LLM rating), or the embedded local server."""
    p.add_argument("--local-model", default="qwen2.5-coder-1.5b-instruct",
                   help="embedded model started on 127.0.0.1 (ignored with --base-url)")
    p.add_argument("--base-url", help="use this OpenAI-compatible endpoint instead of a local server")
    p.add_argument("--model", help="model name at --base-url")
    add_engine_argument(p)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--rpm", type=float)
    p.add_argument("--price-prompt", type=float, default=None, metavar="PER_MILLION",
                   help="what the endpoint charges per million prompt tokens (manifests price the tokens used)")
    p.add_argument("--price-completion", type=float, default=None, metavar="PER_MILLION",
                   help="… per million completion tokens")


def add_engine_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-engine", choices=("auto", "llama-server", "llama-cpp-python"), default="auto",
                   help="the local server: llama.cpp's llama-server (built by setup; auto picks it when there) or "
                   "llama-cpp-python's server")


def add_verifier_arguments(p: argparse.ArgumentParser) -> None:
    """Stage 1's verifier (tasks/generate/verification.py): the LLM judge and the encoder ordering check."""
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge of each generation")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge (default: the generator's)")
    p.add_argument("--judge-model", help="judge model at --judge-base-url")
    p.add_argument("--judge-threshold", type=float, default=None, help="P(pass) the judge must give, every kind (default: per kind, 0.63 for positives, 0.5 for the others)")
    p.add_argument("--judge-templates", help="folder with judge-positive.j2, judge-intermediate.j2, judge-negative.j2")
    p.add_argument("--ordering-margin", type=float, default=None,
                   help="also require cos(a,s+) − cos(a,s−) ≥ this (encoder check; default off)")


def verifier_settings(args: argparse.Namespace) -> "VerifierSettings":
    from tasks.core.config import ConfigError, LLMSettings
    from tasks.generate.settings import VerifierSettings

    if bool(args.judge_base_url) != bool(args.judge_model):
        raise ConfigError("--judge-base-url and --judge-model go together (the judge's endpoint and its model).")
    given = {"judge": not args.no_judge, "threshold": args.judge_threshold, "template_dir": args.judge_templates,
             "ordering_margin": args.ordering_margin,
             "llm": LLMSettings(base_url=args.judge_base_url, model=args.judge_model) if args.judge_base_url else None}
    return VerifierSettings(**{k: v for k, v in given.items() if v is not None})


def add_labeler_arguments(p: argparse.ArgumentParser, lm_flag: str) -> None:
    p.add_argument(lm_flag, dest="label_lm", default=None,
                   help="causal LM of the context labeler: registered local model, .gguf file or folder (scored "
                   "in-process), or an OpenAI-compatible endpoint URL …/v1 that echoes prompt log-probs (vLLM, "
                   "llama-cpp-python's server; key in $STSGEN_LM_API_KEY)")
    p.add_argument("--lm-model", dest="lm_model", default=None, help="with an endpoint: the served model's name")
    p.add_argument("--lm-tokenizer", dest="lm_tokenizer", default=None,
                   help="with an endpoint: the served model's tokenizer (registered model, .gguf file or folder)")
    p.add_argument("--label-method", choices=("context", "llm_rating", "combined"), default=None,
                   help="stage-3 labeler (default: the LabelSettings default, docs/labeling.md)")
    p.add_argument("--similarity", choices=("centered_cosine", "cosine", "rank", "contrast"), default=None,
                   help="how two sentences' context-score rows become a label")


def label_settings(args: argparse.Namespace, defaults: dict | None = None, **extra) -> "LabelSettings":
    """LabelSettings from the flags that were given, then `defaults` (a preset's sizes); the rest keep the settings'
    defaults."""
    from tasks.label.labeling import LabelSettings

    given = {"lm": args.label_lm, "method": args.label_method, "similarity": args.similarity,
             "lm_model": args.lm_model, "lm_tokenizer": args.lm_tokenizer,
             "contexts_per_sentence": getattr(args, "contexts_per_sentence", None)}
    if getattr(args, "lambdas", None):
        given |= dict(zip(("lambda_disc", "lambda_sentence", "lambda_left", "lambda_right"), args.lambdas))
    return LabelSettings(**(defaults or {}) | {k: v for k, v in given.items() if v is not None}, **extra)


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


def with_device(settings, device: str | None):
    """A settings object with its `device` field set from --device (the flag's type already checked it)."""
    return settings if device is None else settings.model_copy(update={"device": device})


def add_runner_arguments(p: argparse.ArgumentParser) -> None:
    """Where the CPU stages' shards run (retrieval and labeling), and the torch device."""
    p.add_argument("--workers", choices=("threads", "processes", "dask"), default="threads",
                   help="shard runner of the CPU stages; dask without --dask-address starts a loopback LocalCluster")
    p.add_argument("--dask-address", help="scheduler address of an existing Dask cluster (tcp://host:8786)")
    add_device_argument(p)


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    """Where a stage command writes: a run folder under the output directory."""
    p.add_argument("--output-dir", default="data/outputs")
    p.add_argument("--run", default="auto", help="this run's folder under --output-dir (default auto: <UTC "
                   "date-time>-<flow run name>); <output-dir>/latest points at the last finished run")


def preset_settings(preset: str, device: str | None) -> dict:
    """The preset's coherence and training settings (flows/presets.py), on `device` when --device was given."""
    from flows.presets import PRESETS
    from tasks.retrieve.coherence import CoherenceSettings
    from tasks.train.training import TrainSettings

    sizes = PRESETS[preset]
    return {"coherence": with_device(sizes.get("coherence", CoherenceSettings()), device),
            "train_settings": with_device(sizes.get("train_settings", TrainSettings()), device),
            "label": sizes.get("label", {})}

