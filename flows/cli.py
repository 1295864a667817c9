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
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

# No outbound traffic from Prefect (must be set before prefect is imported). The ephemeral API's 20 s start-up limit
# is too short on a busy 2-core machine (a fresh SQLite database is migrated first): 120 s.
for _key, _value in (("DO_NOT_TRACK", "1"), ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
                     ("PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT", "false"),
                     ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")):
    os.environ.setdefault(_key, _value)

from pydantic import ValidationError  # noqa: E402

from tasks.core.config import ConfigError, settings_problem  # noqa: E402

if TYPE_CHECKING:  # imported lazily below: `./stsgen --help` stays fast
    from tasks.core.config import VerifierSettings
    from tasks.label.labeling import LabelSettings


def _progress_bar(console):
    """A rich progress bar fed by the stages' progress listeners (one row per stage)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from tasks.core.artifacts import add_progress_listener

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=console)
    ids: dict[str, int] = {}

    def listener(stage: str, done: int, total: int) -> None:
        if stage not in ids:
            ids[stage] = bar.add_task(stage, total=total)
        bar.update(ids[stage], completed=done, total=total)

    add_progress_listener(listener)
    return bar


def _print_outputs(outputs: dict) -> None:
    print("\nOutputs:")
    for name, path in outputs.items():
        if isinstance(path, dict):
            print(f"  {name}")
            for sub, p in path.items():
                print(f"    {sub:9s} {Path(p).resolve()}")
        else:
            print(f"  {name:9s} {Path(path).resolve()}")
    trained = outputs.get("train-surrogate")
    if isinstance(trained, dict) and Path(trained["eval"]).is_file():
        import json

        from tasks.train.surrogate_selection import comparison_markdown, comparison_rows, verdict

        report = json.loads(Path(trained["eval"]).read_text())
        print("\nSurrogate evaluation (Spearman ×100 of cosine vs gold):")
        print(comparison_markdown(comparison_rows(report["backbone_results"], report["results"])))
        print(verdict(report["shipped_step"], report.get("checkpoint_turned_down")))
    if "generate-sts-triples" in outputs and "label-pairs" in outputs:  # a pipeline run: its quality table
        from tasks.core.store import read_manifest
        from tasks.evaluate.run_quality import quality_markdown, quality_rows

        manifests = {stage: read_manifest(Path(paths["manifest"]).parent) or {} for stage, paths in outputs.items()
                     if isinstance(paths, dict) and "manifest" in paths}
        print("\nRun quality:\n" + quality_markdown(quality_rows(manifests)))
    from tasks.core.env_settings import env

    if env().prefect_api_url:
        ui = env().prefect_api_url.removesuffix("/api")
        print(f"\nPrefect UI: {ui}/runs  (flow runs, artifacts: progress, samples, summary, plots, outputs)")
    else:
        print("\nTo inspect the run and its artifacts in the Prefect UI:\n"
              "  ./stsgen ui      # then open http://127.0.0.1:4200/runs")


def _with_llm(args: argparse.Namespace, job) -> int:
    """Run `job(llm_settings)` against --base-url, or against the embedded local server (stopped afterwards)."""
    from rich.console import Console

    from tasks.core.config import LLMSettings
    from tasks.core.env_settings import env
    from tasks.llm.server import local_server

    console = Console(stderr=True)
    llm_kwargs = dict(max_concurrency=args.concurrency, batch_api=getattr(args, "batch_api", False))
    if args.rpm:
        llm_kwargs["requests_per_minute"] = args.rpm
    if args.base_url:
        model = args.model or env().llm.model  # STSGEN_LLM_MODEL, default qwen2.5-coder-1.5b-instruct
        with _progress_bar(console):
            outputs = job(LLMSettings(base_url=args.base_url, model=model, **llm_kwargs))
    else:
        console.print(f"Starting the local LLM server ({args.local_model}) on 127.0.0.1 …")
        with local_server(args.local_model, engine=args.llm_engine, parallel=args.concurrency) as server:
            # For the flows' manifests and request order (read back through env().llm; child processes inherit them).
            os.environ["STSGEN_LLM_MODEL_SHA256"] = server.sha256
            os.environ["STSGEN_LLM_SERVER_ENGINE"] = server.engine
            with _progress_bar(console):
                outputs = job(LLMSettings(base_url=server.base_url, model=server.model, **llm_kwargs))
        console.print("Local LLM server stopped.")
    _print_outputs(outputs)
    return 0


def _generate(args: argparse.Namespace) -> int:
    from flows.generate_sts_triples import generate_sts_triples

    return _with_llm(args, lambda llm: generate_sts_triples(
        n=args.n, pattern=args.pattern, corpus=args.corpus, pattern_source=args.pattern_source, seed=args.seed,
        llm=llm, verifier=verifier_settings(args), max_attempts=args.max_attempts, output_dir=args.output_dir, run=args.run))


def add_verifier_arguments(p: argparse.ArgumentParser) -> None:
    """Stage 1's verifier (tasks/generate/verification.py): the LLM judge and the encoder ordering check."""
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge of each generation")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge (default: the generator's)")
    p.add_argument("--judge-model", help="judge model at --judge-base-url")
    p.add_argument("--judge-threshold", type=float, default=None, help="P(pass) the judge must give (default 0.5)")
    p.add_argument("--judge-templates", help="folder with judge-positive.j2, judge-intermediate.j2, judge-negative.j2")
    p.add_argument("--ordering-margin", type=float, default=None,
                   help="also require cos(a,s+) − cos(a,s−) ≥ this (encoder check; default off)")


def verifier_settings(args: argparse.Namespace) -> "VerifierSettings":
    from tasks.core.config import ConfigError, LLMSettings, VerifierSettings

    if bool(args.judge_base_url) != bool(args.judge_model):
        raise ConfigError("--judge-base-url and --judge-model go together (the judge's endpoint and its model).")
    given = {"judge": not args.no_judge, "threshold": args.judge_threshold, "template_dir": args.judge_templates,
             "ordering_margin": args.ordering_margin,
             "llm": LLMSettings(base_url=args.judge_base_url, model=args.judge_model) if args.judge_base_url else None}
    return VerifierSettings(**{k: v for k, v in given.items() if v is not None})


def add_engine_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-engine", choices=("auto", "llama-server", "llama-cpp-python"), default="auto",
                   help="the local server: llama.cpp's llama-server (built by setup; auto picks it when there) or "
                   "llama-cpp-python's server")


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    """The OpenAI-compatible endpoint (stage 1, and stage 3's LLM rating), or the embedded local server."""
    p.add_argument("--local-model", default="qwen2.5-coder-1.5b-instruct",
                   help="embedded model started on 127.0.0.1 (ignored with --base-url)")
    p.add_argument("--base-url", help="use this OpenAI-compatible endpoint instead of a local server")
    p.add_argument("--model", help="model name at --base-url")
    add_engine_argument(p)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--rpm", type=float)


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


def label_settings(args: argparse.Namespace, **extra) -> "LabelSettings":
    """LabelSettings from the flags that were given; the rest keep the settings' defaults."""
    from tasks.label.labeling import LabelSettings

    given = {"lm": args.label_lm, "method": args.label_method, "similarity": args.similarity,
             "lm_model": args.lm_model, "lm_tokenizer": args.lm_tokenizer,
             "contexts_per_sentence": getattr(args, "contexts_per_sentence", None)}
    if getattr(args, "lambdas", None):
        given |= dict(zip(("lambda_disc", "lambda_sentence", "lambda_left", "lambda_right"), args.lambdas))
    return LabelSettings(**{k: v for k, v in given.items() if v is not None}, **extra)


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
    """Where the CPU stages' shards run (retrieval and labeling)."""
    p.add_argument("--workers", choices=("threads", "processes", "dask"), default="threads",
                   help="shard runner of the CPU stages; dask without --dask-address starts a loopback LocalCluster")
    p.add_argument("--dask-address", help="scheduler address of an existing Dask cluster (tcp://host:8786)")


def preset_settings(preset: str, device: str | None) -> dict:
    """The preset's coherence and training settings (flows/presets.py), on `device` when --device was given."""
    from flows.presets import PRESETS
    from tasks.retrieve.coherence import CoherenceSettings
    from tasks.train.training import TrainSettings

    sizes = PRESETS[preset]
    return {"coherence": with_device(sizes.get("coherence", CoherenceSettings()), device),
            "train_settings": with_device(sizes.get("train_settings", TrainSettings()), device)}


def _pipeline(args: argparse.Namespace) -> int:
    from flows.sts_pipeline import sts_pipeline

    sizes = preset_settings(args.preset, args.device)
    return _with_llm(args, lambda llm: sts_pipeline(
        n=args.n, pattern=args.pattern, corpus=args.corpus, pattern_source=args.pattern_source, seed=args.seed,
        llm=llm, verifier=verifier_settings(args), max_attempts=args.max_attempts,
        label=with_device(label_settings(args, seed=args.seed), args.device),
        workers=args.workers, dask_address=args.dask_address, output_dir=args.output_dir, run=args.run, **sizes))


def _label(args: argparse.Namespace) -> int:
    from rich.console import Console

    from flows.label_pairs import label_pairs
    from tasks.label.labeling import uses_contexts, uses_rating

    settings = with_device(label_settings(args), args.device)

    def job(llm=None) -> dict:
        return label_pairs(contexts=args.contexts if uses_contexts(settings) else None,
                           triples=None if args.pairs else args.triples, pairs=args.pairs,
                           label=settings, calibration=args.calibration, llm=llm, workers=args.workers,
                           dask_address=args.dask_address, output_dir=args.output_dir, run=args.run)

    if uses_rating(settings):  # the LLM rates the pairs: --base-url, or the embedded local server
        return _with_llm(args, job)
    with _progress_bar(Console(stderr=True)):
        paths = job()
    _print_outputs(paths)
    return 0


def _retrieve(args: argparse.Namespace) -> int:
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.core.config import CorpusSettings
    from tasks.retrieve.coherence import CoherenceSettings
    from tasks.retrieve.retrieval import SelectionSettings

    corpora = [CorpusSettings(source=c, document_split=args.document_split,
                              sentence_per_line=args.sentence_per_line) if c != "default" else CorpusSettings()
               for c in args.corpus]
    selection = SelectionSettings(screener=args.screener, screen_k=args.screen_k,
                                  contexts_per_sentence=args.contexts_per_sentence)
    paths = retrieve_contexts(sentences=args.sentences, corpora=corpora, window_k=args.k, selection=selection,
                              coherence=with_device(CoherenceSettings(), args.device), workers=args.workers,
                              dask_address=args.dask_address, output_dir=args.output_dir, run=args.run)
    _print_outputs(paths)
    return 0


def _train(args: argparse.Namespace) -> int:
    from rich.console import Console

    from flows.train_surrogate import train_surrogate
    from tasks.train.backbones import BackboneSettings
    from tasks.train.hard_negatives import MiningSettings
    from tasks.train.training import LossSettings, TrainSettings

    settings = TrainSettings(
        backbone=BackboneSettings(kind=args.backbone, source=args.model, bidirectional_layers=args.bidirectional_layers,
                                  train_layers=args.train_layers, lora_rank=args.lora_rank),
        losses=LossSettings(infonce=args.infonce, hierarchical_triplet=args.ht, regression=args.regression,
                            regression_loss=args.regression_loss, infonce_mini_batch=args.infonce_mini_batch,
                            negatives=args.negatives, simcse=args.simcse),
        mining=MiningSettings(num_negatives=args.mine, cross_encoder=args.cross_encoder),
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, eval_every=args.eval_every, seed=args.seed,
        **({"device": args.device} if args.device else {}))
    with _progress_bar(Console(stderr=True)):
        paths = train_surrogate(triples=args.triples, pairs=args.pairs, train_settings=settings,
                                mining_corpus=args.mining_corpus,
                                eval_sets=args.eval_set, output_dir=args.output_dir, run=args.run)
    _print_outputs(paths)
    return 0


def _eval(args: argparse.Namespace) -> int:
    """Evaluate a local model folder (ours or any sentence-transformers folder) with the stage-4 protocol."""
    import json

    from sentence_transformers import SentenceTransformer

    from tasks.core.sts_evaluation import evaluate_sources
    from tasks.train.model_export import BELLM_MARKER

    folder = Path(args.model)
    if not any((folder / f).is_file() for f in ("modules.json", "config.json", BELLM_MARKER)):
        raise ConfigError(f"{folder} is not a model folder (no modules.json, config.json or {BELLM_MARKER}).")
    # A BeLLM export carries stsgen's own module class (its prompt and bidirectional layers): trusted, it is ours.
    model = SentenceTransformer(str(folder), trust_remote_code=(folder / BELLM_MARKER).is_file())  # CUDA if present
    encode_fn = lambda s: model.encode(s, batch_size=64)  # noqa: E731
    results = evaluate_sources(encode_fn, ["stsb-dev", "stsb-test", *args.eval_set])
    print("| set | pairs | Spearman ×100 |\n|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['pairs']} | {r['spearman']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
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


def _llm_server(args: argparse.Namespace) -> int:
    from tasks.llm.server import start_server

    server = start_server(args.model, port=args.port, host=args.host, engine=args.llm_engine,
                          parallel=args.parallel)
    print(f"Serving {server.model} with {server.engine} at {server.base_url} (sha256 {server.sha256[:12]}…); Ctrl-C stops it.",
          flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _stack(args: argparse.Namespace) -> int:
    from flows import stack

    settings = stack.StackSettings(llm_model=args.model, llm_base_url=args.base_url)
    if args.action == "up":
        info = stack.up(settings)
        print(f"Prefect UI:  {info['ui']}\nLLM:         {info['llm_model']} at {info['llm_base_url']}\n"
              f"Logs:        {info['logs']}\n\nFrom another shell:\n  export PREFECT_API_URL={info['api_url']}\n"
              "  prefect deployment run 'generate-sts-triples/adhoc' -p n=20 --watch\n\nStop: ./stsgen stack down")
    else:
        print("stopped:", ", ".join(stack.down(settings)) or "nothing was running")
    return 0


def _ui(args: argparse.Namespace) -> int:
    os.execv(str(Path(sys.executable).with_name("prefect")),
             ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(args.port)])
    return 0


def _models(args: argparse.Namespace) -> int:
    from tasks.llm.local_models import LOCAL_MODELS, resolve_gguf

    for name in args.names or list(LOCAL_MODELS):
        path, sha = resolve_gguf(name)
        print(f"{name}: {path} sha256={sha} ok")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from flows.serve import serve

    serve()
    return 0


def add_run_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="auto", help="this run's folder under --output-dir (default auto: <UTC "
                   "date-time>-<flow run name>); <output-dir>/latest points at the last finished run")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stsgen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, n_default in (("run", 30), ("pipeline", 30), ("generate", 20)):
        p = sub.add_parser(name, help="generate: stage 1 once; run / pipeline: sts-pipeline (all stages, the main "
                           "job) once")
        p.add_argument("--n", type=int, default=n_default)
        p.add_argument("--pattern", choices=("sts", "nli"), default="sts")
        p.add_argument("--corpus", default="default")
        p.add_argument("--pattern-source", default="default")
        p.add_argument("--seed", type=int, default=13)
        add_llm_arguments(p)
        p.add_argument("--batch-api", action="store_true",
                       help="stage 1 through the OpenAI Batch API (half price, results within 24 h; needs --base-url "
                       "of an endpoint serving /files and /batches); an interrupted run re-attaches to its batch")
        p.add_argument("--max-attempts", type=int, default=3)
        add_verifier_arguments(p)
        p.add_argument("--output-dir", default="data/outputs")
        add_run_argument(p)
        if name != "generate":
            add_labeler_arguments(p, "--label-lm")
            p.add_argument("--preset", choices=("quick", "full"), default="quick",
                           help="sizes of the CPU stages (flows/presets.py)")
            add_runner_arguments(p)
            add_device_argument(p)
        p.set_defaults(func=_generate if name == "generate" else _pipeline)
    p = sub.add_parser("retrieve", help="run retrieve-contexts once (stage 2)")
    p.add_argument("--sentences", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    p.add_argument("--corpus", action="append", default=None,
                   help="corpus source (repeatable); default: the gensim default corpus")
    p.add_argument("--document-split", choices=("file", "blank_lines"), default="file")
    p.add_argument("--sentence-per-line", action="store_true")
    p.add_argument("--k", type=int, default=1, help="sentences on each side of a context")
    p.add_argument("--screener", choices=("tfidf", "bm25"), default="tfidf")
    p.add_argument("--screen-k", type=int, default=1000)
    p.add_argument("--contexts-per-sentence", type=int, default=50)
    add_runner_arguments(p)
    add_device_argument(p)
    p.add_argument("--output-dir", default="data/outputs")
    add_run_argument(p)
    p.set_defaults(func=_retrieve)
    p = sub.add_parser("label", help="run label-pairs once (stage 3)")
    p.add_argument("--contexts", default="data/outputs/latest/retrieve-contexts/contexts.parquet")
    p.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    p.add_argument("--pairs", help="a pairs Parquet (s1/s2 or sentence1/sentence2[, relation, gold]) instead of "
                   "triples")
    add_labeler_arguments(p, "--lm")
    p.add_argument("--lambdas", type=float, nargs=4, default=None, metavar=("L1", "L2", "L3", "L4"),
                   help="λ1 disc, λ2 log p(s|c<), λ3, λ4 (default: the labeler's defaults)")
    p.add_argument("--contexts-per-sentence", type=int, default=None)
    add_llm_arguments(p)
    p.add_argument("--calibration", help="labeled pairs.parquet (label, gold) to fit a monotone map onto 0-5")
    add_runner_arguments(p)
    add_device_argument(p)
    p.add_argument("--output-dir", default="data/outputs")
    add_run_argument(p)
    p.set_defaults(func=_label)
    p = sub.add_parser("train", help="run train-surrogate once (stage 4)")
    p.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    p.add_argument("--pairs", default=None, help="pairs.parquet from label-pairs (for the regression loss)")
    p.add_argument("--backbone", choices=("encoder", "bellm"), default="encoder")
    p.add_argument("--model", default=None, help="backbone source (default: all-MiniLM-L6-v2 / SmolLM2-135M)")
    p.add_argument("--bidirectional-layers", type=int, default=1)
    p.add_argument("--train-layers", type=int, default=None, help="train only the top k layers")
    p.add_argument("--lora-rank", type=int, default=None, help="train only rank-r LoRA adapters (merged on export)")
    p.add_argument("--infonce", type=float, default=1.0)
    p.add_argument("--ht", type=float, default=1.0, help="hierarchical triplet weight β")
    p.add_argument("--regression", type=float, default=0.0, help="weight of the regression onto stage-3 labels")
    p.add_argument("--regression-loss", choices=("cosine", "cosent"), default="cosine",
                   help="CosineSimilarityLoss (L2 on the cosine) or CoSENTLoss (the labels' order only)")
    p.add_argument("--infonce-mini-batch", type=int, default=None,
                   help="CachedMultipleNegativesRankingLoss with this mini-batch (large batches, bounded memory)")
    p.add_argument("--negatives", choices=("generated", "mined", "both"), default="generated",
                   help="InfoNCE's hard negatives: the LLM's s⁻, mined from the corpus (--mine N), or both")
    p.add_argument("--mine", type=int, default=0, help="hard negatives to mine per triple (0 = none)")
    p.add_argument("--mining-corpus", default="default", help="corpus to mine from (stage 1's: a path or 'default')")
    p.add_argument("--cross-encoder", default=None, help="a local cross-encoder folder to rescore mined candidates")
    p.add_argument("--simcse", action="store_true", help="unsupervised SimCSE baseline (dropout positives)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--eval-set", action="append", default=[], help="STS12–16 folder or SICK file (repeatable)")
    add_device_argument(p)
    p.add_argument("--output-dir", default="data/outputs")
    add_run_argument(p)
    p.set_defaults(func=_train)
    p = sub.add_parser("eval", help="evaluate a local model folder on STS-B dev/test (+ --eval-set …)")
    p.add_argument("model", help="a sentence-transformers folder (e.g. data/outputs/latest/train-surrogate/model)")
    p.add_argument("--eval-set", action="append", default=[], help="STS12–16 folder or SICK file (repeatable)")
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=_eval)
    p = sub.add_parser("export", help="write stage tables as Hugging Face datasets with dataset cards")
    p.add_argument("--output-dir", default="data/outputs/latest", help="the run folder the stages wrote to")
    p.add_argument("--table", action="append", choices=("triples", "pairs"), help="default: both")
    p.add_argument("--push-to-hub", metavar="REPO", help="also upload (needs a hub token and network; "
                   "REPO-triples / REPO-pairs when both are exported)")
    p.set_defaults(func=_export)
    p = sub.add_parser("llm-server", help="serve a local GGUF model (OpenAI-compatible) until Ctrl-C")
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 only inside a container network)")
    p.add_argument("--parallel", type=int, default=4, help="llama-server's slots (requests decoded together)")
    add_engine_argument(p)
    p.set_defaults(func=_llm_server)
    p = sub.add_parser("stack", help="start/stop the local stack (Prefect server, pool, deployments, worker, LLM)")
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--base-url", help="use an existing LLM endpoint instead of starting one")
    p.set_defaults(func=_stack)
    p = sub.add_parser("ui", help="start the Prefect server + UI on 127.0.0.1 (foreground)")
    p.add_argument("--port", type=int, default=4200)
    p.set_defaults(func=_ui)
    p = sub.add_parser("models", help="prepare (assemble + sha256-check) local GGUF models")
    p.add_argument("action", choices=("prepare",))
    p.add_argument("names", nargs="*")
    p.set_defaults(func=_models)
    p = sub.add_parser("runs", help="list the run folders under --output-dir, or prune the older ones")
    p.add_argument("action", choices=("list", "prune"))
    p.add_argument("--output-dir", default="data/outputs")
    p.add_argument("--keep", type=int, default=5, help="prune: finished runs to keep besides latest")
    p.set_defaults(func=_runs)

    p = sub.add_parser("serve", help="serve the deployments from this process (flow.serve)")
    p.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "corpus", None) is None and args.command == "retrieve":
        args.corpus = ["default"]
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


if __name__ == "__main__":
    sys.exit(main())
