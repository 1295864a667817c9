"""The stage commands: `run` / `pipeline` (sts-pipeline, the main job), `generate`, `retrieve`, `label`, `train` —
each runs its flow once (ephemeral Prefect unless PREFECT_API_URL is set) and prints the outputs."""

from __future__ import annotations

import argparse

from flows.cli.console import print_outputs, progress_bar, with_llm
from flows.cli.options import (
    add_device_argument,
    add_generate_arguments,
    add_labeler_arguments,
    add_llm_arguments,
    add_output_arguments,
    add_runner_arguments,
    check_override_stages,
    choices_of,
    default_of,
    device_fields,
    execution_fields,
    generate_fields,
    given,
    label_fields,
    merged,
    overrides,
)
from flows.cli.preflight import check_label_inputs, check_retrieve_inputs, check_train_inputs
from flows.presets import PRESETS
from tasks.core.config import CorpusSettings
from tasks.core.defaults import DEFAULT_TEACHER
from tasks.core.home import latest_output
from tasks.label.settings import LabelSettings
from tasks.retrieve.settings import RetrieveSettings
from tasks.train.settings import TrainSettings


def add_context_source_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--contexts-source", choices=choices_of(RetrieveSettings, "source", "source"), default=None,
                   help="stage 2's contexts: retrieved from the corpus, written by the LLM around each sentence, "
                   f"or both (default: {default_of(RetrieveSettings, 'source', 'source')}; tasks/retrieve/generated_contexts.py)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands, added to `stsgen`'s subcommands."""
    for name in ("run", "pipeline", "generate"):
        p = sub.add_parser(name, help="generate: stage 1 once; run / pipeline: sts-pipeline (all stages, the main "
                           "job) once")
        add_generate_arguments(p)
        add_llm_arguments(p)
        add_output_arguments(p)
        if name != "generate":
            add_context_source_argument(p)
            add_labeler_arguments(p, "--label-lm")
            p.add_argument("--preset", choices=tuple(PRESETS), default="quick",
                           help="sizes of the CPU stages (flows/presets.py)")
            add_runner_arguments(p)
        p.set_defaults(func=_generate if name == "generate" else _pipeline)
    p = sub.add_parser("retrieve", help="run retrieve-contexts once (stage 2)")
    p.add_argument("--sentences", default=latest_output("generate-sts-triples", "triples.parquet"))
    p.add_argument("--corpus", action="append", default=None,
                   help="corpus source (repeatable): 'default' (the packaged sources, docs/guides/corpus.md), a source name, "
                   "names joined by '+', or a path; default: 'default'")
    p.add_argument("--document-split", choices=choices_of(CorpusSettings, "document_split"), default=None,
                   help="how the --corpus paths split into documents (CorpusSettings.document_split)")
    p.add_argument("--sentence-per-line", action="store_true", default=None,
                   help="the --corpus paths hold one sentence per line (CorpusSettings.sentence_per_line)")
    p.add_argument("--k", type=int, default=None, help="sentences on each side of a context (window_k)")
    p.add_argument("--screener", choices=choices_of(RetrieveSettings, "selection", "screener"), default=None)
    p.add_argument("--screen-k", type=int, default=None, help="candidates screened per sentence")
    p.add_argument("--contexts-per-sentence", type=int, default=None, help="contexts retrieved per sentence "
                   "(selection.contexts_per_sentence)")
    add_context_source_argument(p)
    add_llm_arguments(p)
    add_runner_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_retrieve)
    p = sub.add_parser("label", help="run label-pairs once (stage 3)")
    p.add_argument("--contexts", default=latest_output("retrieve-contexts", "contexts.parquet"))
    p.add_argument("--triples", default=latest_output("generate-sts-triples", "triples.parquet"))
    p.add_argument("--pairs", help="a pairs Parquet (s1/s2 or sentence1/sentence2[, relation, gold]) instead of "
                   "triples")
    add_labeler_arguments(p, "--lm")
    p.add_argument("--lambdas", type=float, nargs=4, default=None, metavar=("L1", "L2", "L3", "L4"),
                   help="λ1 disc, λ2 log p(s|c<), λ3, λ4 (default: the labeler's defaults)")
    # Not --contexts-per-sentence: that is retrieve's (contexts retrieved per sentence); this is how many of them
    # the labeler scores.
    p.add_argument("--contexts-scored", dest="contexts_per_sentence", type=int, default=None,
                   help="of each sentence's retrieved contexts, how many the labeler scores (label."
                   f"contexts_per_sentence; default: {default_of(LabelSettings, 'contexts_per_sentence')})")
    p.add_argument("--candidates", dest="candidates_per_sentence", type=int, default=None,
                   help="of each sentence's retrieved contexts, how many are scored to choose the --contexts-scored "
                   "best fitting (label.candidates_per_sentence; default: "
                   f"{default_of(LabelSettings, 'candidates_per_sentence')}, the main job's quick preset: 16)")
    add_llm_arguments(p)
    p.add_argument("--calibration", help="labeled pairs.parquet (label, gold) to fit a monotone map onto 0-5")
    add_runner_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=_label)
    p = sub.add_parser("train", help="run train-surrogate once (stage 4); unset flags keep TrainSettings' defaults: "
                       "the recipe sts-pipeline and train-on-dataset train too")
    p.add_argument("--triples", default=latest_output("generate-sts-triples", "triples.parquet"))
    p.add_argument("--pairs", default=None, help="pairs.parquet from label-pairs (the recipe's regression "
                   "target; without it: the triples-only recipe, tasks/train/settings.py for_data)")
    p.add_argument("--dataset", default=None, help="a dataset version from build-dataset (its triples and pairs) "
                   "instead of --triples / --pairs")
    p.add_argument("--backbone", choices=choices_of(TrainSettings, "backbone", "kind"), default=None,
                   help=f"backbone kind (default: {default_of(TrainSettings, 'backbone', 'kind')})")
    p.add_argument("--model", default=None, help="backbone source (default: the kind's model, tasks/train/backbones.py)")
    p.add_argument("--bidirectional-layers", type=int, default=None)
    p.add_argument("--train-layers", type=int, default=None, help="train only the top k layers")
    p.add_argument("--lora-rank", type=int, default=None, help="train only rank-r LoRA adapters (merged on export)")
    p.add_argument("--wise-alpha", type=float, default=None, help="WiSE-FT: ship (1 − α)·backbone + α·the trained "
                   f"weights (default: {default_of(TrainSettings, 'wise_alpha')})")
    p.add_argument("--infonce", type=float, default=None, help="InfoNCE weight")
    p.add_argument("--ht", type=float, default=None, help="hierarchical triplet weight β")
    p.add_argument("--regression", type=float, default=None, help="weight of the regression onto stage-3 labels")
    p.add_argument("--regression-loss", choices=choices_of(TrainSettings, "losses", "regression_loss"), default=None,
                   help="CosineSimilarityLoss (L2 on the cosine) or CoSENTLoss (the labels' order only)")
    p.add_argument("--backbone-anchor", type=float, default=None, help="weight of 1 − cos(student, frozen backbone) "
                   "on every training sentence: the space stays nearer the backbone's (default: "
                   f"{default_of(TrainSettings, 'losses', 'backbone_anchor')})")
    p.add_argument("--infonce-mini-batch", type=int, default=None,
                   help="CachedMultipleNegativesRankingLoss with this mini-batch (large batches, bounded memory)")
    p.add_argument("--label-source", choices=choices_of(TrainSettings, "label_source"), default=None,
                   help="the regression's target: stage 3's label, its rating or context_label alone, or an encoder "
                   "teacher's cosine")
    p.add_argument("--teacher", default=None, help=f"--label-source teacher: {DEFAULT_TEACHER} (after `./stsgen "
                   "teacher fetch`) or a sentence-transformers folder")
    p.add_argument("--negatives", choices=choices_of(TrainSettings, "losses", "negatives"), default=None,
                   help="InfoNCE's hard negatives: the LLM's s⁻, mined from the corpus (--mine N), or both (default: "
                   f"{default_of(TrainSettings, 'losses', 'negatives')})")
    p.add_argument("--mine", type=int, default=None,
                   help=f"hard negatives to mine per triple (default: {default_of(TrainSettings, 'mining', 'num_negatives')})")
    p.add_argument("--mining-corpus", default=None, help="corpus to mine from (stage 1's: a path; default: the "
                   "embedded corpus)")
    p.add_argument("--cross-encoder", default=None, help="a local cross-encoder folder to rescore mined candidates")
    p.add_argument("--simcse", action="store_true", default=None,
                   help="unsupervised SimCSE baseline (dropout positives)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=lambda v: v if v == "auto" else float(v), default=None,
                   help="peak learning rate, or 'auto' (by the training anchors; default: "
                   f"{default_of(TrainSettings, 'lr')})")
    p.add_argument("--eval-every", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--eval-set", action="append", default=None, help="'stsb-test' (report it once, at the end), an "
                   "STS12–16 folder or a SICK file, evaluated beside STS-B dev (repeatable)")
    add_device_argument(p)
    add_output_arguments(p)
    p.set_defaults(func=_train)


def generate_settings(args: argparse.Namespace):
    """GenerateSettings from the flags (validated here: a refused flag fails before the local server starts)."""
    from tasks.core.config import with_seed
    from tasks.generate.settings import GenerateSettings

    check_override_stages(args, ("generate",))
    return with_seed(GenerateSettings.model_validate(merged(generate_fields(args), overrides(args, "generate"))),
                     args.seed)


def _generate(args: argparse.Namespace) -> int:
    from flows.generate_sts_triples import generate_sts_triples

    settings = generate_settings(args)
    return with_llm(args, lambda llm: generate_sts_triples(settings=settings, llm=llm, output_dir=args.output_dir,
                                                           run=args.run))


def pipeline_settings(args: argparse.Namespace) -> dict:
    """sts-pipeline's stage settings from the preset's sizes and the flags (the flags win)."""
    from flows.presets import PRESETS
    from tasks.generate.settings import GenerateSettings
    from tasks.label.settings import LabelSettings
    from tasks.retrieve.settings import RetrieveSettings
    from tasks.train.settings import TrainSettings

    preset, device, execution = PRESETS[args.preset], device_fields(args), execution_fields(args)
    check_override_stages(args, ("generate", "retrieve", "label", "train"))
    retrieve = {"coherence": device, "source": given(source=args.contexts_source), "execution": execution}
    flags = {"generate": generate_fields(args), "retrieve": retrieve,
             "label": merged(label_fields(args), device, {"execution": execution}), "train": device}
    classes = {"generate": GenerateSettings, "retrieve": RetrieveSettings, "label": LabelSettings,
               "train": TrainSettings}
    return {stage: cls.model_validate(merged(preset.get(stage, {}), flags[stage], overrides(args, stage)))
            for stage, cls in classes.items()}


def _pipeline(args: argparse.Namespace) -> int:
    from flows.sts_pipeline import sts_pipeline
    from tasks.pipeline import check_links

    check_links()  # the stages' links (the flow checks them too): a broken one fails before the local server starts
    settings = pipeline_settings(args)  # a refused flag fails before the local server starts
    return with_llm(args, lambda llm: sts_pipeline(**settings, llm=llm, seed=args.seed, output_dir=args.output_dir,
                                                   run=args.run))


def _retrieve(args: argparse.Namespace) -> int:
    from flows.retrieve_contexts import retrieve_contexts
    from tasks.retrieve.settings import RetrieveSettings

    corpus = given(document_split=args.document_split, sentence_per_line=args.sentence_per_line)
    check_override_stages(args, ("retrieve",))
    settings = RetrieveSettings.model_validate(merged({
        "corpora": [{} if c == "default" else corpus | {"source": c} for c in args.corpus] if args.corpus else None,
        "selection": given(screener=args.screener, screen_k=args.screen_k,
                           contexts_per_sentence=args.contexts_per_sentence),
        "source": given(source=args.contexts_source), "coherence": device_fields(args),
        "execution": execution_fields(args)} | given(window_k=args.k), overrides(args, "retrieve")))

    check_retrieve_inputs(args.sentences)  # before any server starts

    def job(llm=None) -> dict:
        return retrieve_contexts(sentences=args.sentences, settings=settings, llm=llm, output_dir=args.output_dir,
                                 run=args.run)

    if settings.source.generates:  # the LLM writes contexts: --base-url, or the embedded local server
        return with_llm(args, job)
    print_outputs(job())
    return 0


def _label(args: argparse.Namespace) -> int:
    from rich.console import Console

    from flows.label_pairs import label_pairs
    from tasks.label.labeling import uses_contexts, uses_rating
    from tasks.label.settings import LabelSettings

    check_override_stages(args, ("label",))
    settings = LabelSettings.model_validate(merged(label_fields(args), device_fields(args),
                                                   {"execution": execution_fields(args)}, overrides(args, "label")))

    check_label_inputs(None if args.pairs else args.triples, args.pairs,
                       args.contexts if uses_contexts(settings) else None, settings.calibration)  # before any server

    def job(llm=None) -> dict:
        return label_pairs(contexts=args.contexts if uses_contexts(settings) else None,
                           triples=None if args.pairs else args.triples, pairs=args.pairs, settings=settings, llm=llm,
                           output_dir=args.output_dir, run=args.run)

    if uses_rating(settings):  # the LLM rates the pairs: --base-url, or the embedded local server
        return with_llm(args, job)
    with progress_bar(Console(stderr=True)):
        paths = job()
    print_outputs(paths)
    return 0


def train_fields(args: argparse.Namespace) -> dict:
    """TrainSettings fields from stage 4's flags."""
    return given(steps=args.steps, batch_size=args.batch_size, lr=args.lr, eval_every=args.eval_every, seed=args.seed,
                 eval_sets=args.eval_set, label_source=args.label_source, teacher=args.teacher,
                 wise_alpha=args.wise_alpha) | device_fields(args) | {
        "backbone": given(kind=args.backbone, source=args.model, bidirectional_layers=args.bidirectional_layers,
                          train_layers=args.train_layers, lora_rank=args.lora_rank),
        "losses": given(infonce=args.infonce, hierarchical_triplet=args.ht, regression=args.regression,
                        regression_loss=args.regression_loss, infonce_mini_batch=args.infonce_mini_batch,
                        backbone_anchor=args.backbone_anchor,
                        negatives=args.negatives, simcse=args.simcse),
        "mining": given(num_negatives=args.mine, cross_encoder=args.cross_encoder,
                        corpus={"source": args.mining_corpus} if args.mining_corpus else None)}


def _train(args: argparse.Namespace) -> int:
    from rich.console import Console

    from flows.train_surrogate import train_surrogate
    from tasks.train.settings import TrainSettings

    check_override_stages(args, ("train",))
    settings = TrainSettings.model_validate(merged(train_fields(args), overrides(args, "train")))
    check_train_inputs(None if args.dataset else args.triples, args.pairs, args.dataset)  # before Prefect starts
    with progress_bar(Console(stderr=True)):
        paths = train_surrogate(triples=None if args.dataset else args.triples, pairs=args.pairs,
                                dataset=args.dataset, settings=settings, output_dir=args.output_dir, run=args.run)
    print_outputs(paths)
    return 0
