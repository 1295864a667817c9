"""The stage commands: `run` / `pipeline` (sts-pipeline, the main job), `generate`, `retrieve`, `label`, `train` —
each runs its flow once (ephemeral Prefect unless PREFECT_API_URL is set) and prints the outputs."""

from __future__ import annotations

import argparse

from flows.cli.console import print_outputs, progress_bar, with_llm
from flows.cli.options import (
    add_device_argument,
    add_labeler_arguments,
    add_llm_arguments,
    add_output_arguments,
    add_runner_arguments,
    add_verifier_arguments,
    label_settings,
    preset_settings,
    verifier_settings,
    with_device,
)


def add_context_source_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--contexts-source", choices=("retrieved", "generated", "both"), default="retrieved",
                   help="stage 2's contexts: retrieved from the corpus, written by the LLM around each sentence, or "
                   "both (tasks/retrieve/generated_contexts.py)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
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
        p.add_argument("--candidates", type=int, default=None,
                       help="best of N: choices per request (default 4; 1 = one sample per request)")
        p.add_argument("--avoid-used-sources", action="store_true",
                       help="sample no source sentence an earlier run under --output-dir used (grow one dataset)")
        add_verifier_arguments(p)
        add_output_arguments(p)
        if name != "generate":
            add_context_source_argument(p)
            add_labeler_arguments(p, "--label-lm")
            p.add_argument("--preset", choices=("quick", "full"), default="quick",
                           help="sizes of the CPU stages (flows/presets.py)")
            add_runner_arguments(p)
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
    p.add_argument("--contexts-per-sentence", type=int, default=50, help="contexts retrieved per sentence")
    add_context_source_argument(p)
    add_llm_arguments(p)
    add_runner_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_retrieve)
    p = sub.add_parser("label", help="run label-pairs once (stage 3)")
    p.add_argument("--contexts", default="data/outputs/latest/retrieve-contexts/contexts.parquet")
    p.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    p.add_argument("--pairs", help="a pairs Parquet (s1/s2 or sentence1/sentence2[, relation, gold]) instead of "
                   "triples")
    add_labeler_arguments(p, "--lm")
    p.add_argument("--lambdas", type=float, nargs=4, default=None, metavar=("L1", "L2", "L3", "L4"),
                   help="λ1 disc, λ2 log p(s|c<), λ3, λ4 (default: the labeler's defaults)")
    # Not --contexts-per-sentence: that is retrieve's (contexts retrieved per sentence); this is how many of them
    # the labeler scores.
    p.add_argument("--contexts-scored", dest="contexts_per_sentence", type=int, default=None,
                   help="of each sentence's retrieved contexts, how many the labeler scores (label."
                   "contexts_per_sentence; default: LabelSettings')")
    add_llm_arguments(p)
    p.add_argument("--calibration", help="labeled pairs.parquet (label, gold) to fit a monotone map onto 0-5")
    add_runner_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_label)
    p = sub.add_parser("train", help="run train-surrogate once (stage 4)")
    p.add_argument("--triples", default="data/outputs/latest/generate-sts-triples/triples.parquet")
    p.add_argument("--pairs", default=None, help="pairs.parquet from label-pairs (for the regression loss)")
    p.add_argument("--dataset", default=None, help="a dataset version from build-dataset (its triples and pairs) "
                   "instead of --triples / --pairs")
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
    add_output_arguments(p)
    p.set_defaults(func=_train)


def sampling_settings(args: argparse.Namespace):
    """SamplingSettings with the flags given (None: the settings' own defaults, written once there)."""
    from tasks.generate.settings import SamplingSettings

    return SamplingSettings(**({"candidates": args.candidates} if args.candidates is not None else {}))


def _generate(args: argparse.Namespace) -> int:
    from flows.generate_sts_triples import generate_sts_triples

    sampling = sampling_settings(args)  # a refused flag fails before the local server starts
    return with_llm(args, lambda llm: generate_sts_triples(
        n=args.n, pattern=args.pattern, corpus=args.corpus, pattern_source=args.pattern_source, seed=args.seed,
        llm=llm, verifier=verifier_settings(args), max_attempts=args.max_attempts, sampling=sampling,
        avoid_used_sources=args.avoid_used_sources, output_dir=args.output_dir, run=args.run))


def _pipeline(args: argparse.Namespace) -> int:
    from flows.sts_pipeline import sts_pipeline
    from tasks.retrieve.generated_contexts import ContextSourceSettings

    sizes = preset_settings(args.preset, args.device)
    label = label_settings(args, defaults=sizes.pop("label"), seed=args.seed)
    sizes["context_source"] = ContextSourceSettings(source=args.contexts_source, seed=args.seed)
    sampling = sampling_settings(args)  # a refused flag fails before the local server starts
    return with_llm(args, lambda llm: sts_pipeline(
        n=args.n, pattern=args.pattern, corpus=args.corpus, pattern_source=args.pattern_source, seed=args.seed,
        llm=llm, verifier=verifier_settings(args), max_attempts=args.max_attempts, sampling=sampling,
        avoid_used_sources=args.avoid_used_sources, label=with_device(label, args.device),
        workers=args.workers, dask_address=args.dask_address, output_dir=args.output_dir, run=args.run, **sizes))


def _retrieve(args: argparse.Namespace) -> int:
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.core.config import CorpusSettings
    from tasks.retrieve.coherence import CoherenceSettings
    from tasks.retrieve.generated_contexts import ContextSourceSettings
    from tasks.retrieve.retrieval import SelectionSettings

    corpora = [CorpusSettings(source=c, document_split=args.document_split,
                              sentence_per_line=args.sentence_per_line) if c != "default" else CorpusSettings()
               for c in args.corpus or ["default"]]
    selection = SelectionSettings(screener=args.screener, screen_k=args.screen_k,
                                  contexts_per_sentence=args.contexts_per_sentence)
    source = ContextSourceSettings(source=args.contexts_source)

    def job(llm=None) -> dict:
        return retrieve_contexts(sentences=args.sentences, corpora=corpora, window_k=args.k, selection=selection,
                                 coherence=with_device(CoherenceSettings(), args.device), source=source, llm=llm,
                                 workers=args.workers, dask_address=args.dask_address, output_dir=args.output_dir,
                                 run=args.run)

    if source.generates:  # the LLM writes contexts: --base-url, or the embedded local server
        return with_llm(args, job)
    print_outputs(job())
    return 0


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
        return with_llm(args, job)
    with progress_bar(Console(stderr=True)):
        paths = job()
    print_outputs(paths)
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
    with progress_bar(Console(stderr=True)):
        paths = train_surrogate(triples=None if args.dataset else args.triples, pairs=args.pairs,
                                dataset=args.dataset, train_settings=settings,
                                mining_corpus=args.mining_corpus,
                                eval_sets=args.eval_set, output_dir=args.output_dir, run=args.run)
    print_outputs(paths)
    return 0

