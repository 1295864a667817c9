"""The coherence model (Sun et al. 2022's discriminative ranker) against the corpus it is trained on, side by side in
one run: held-out ROC AUC (all negatives, same-document, random replacements), training examples and wall time on the
2-core machine, for each (corpus, settings) variant given.

    .venv/bin/python -m benchmarks.coherence --variant gensim:quick --variant default:hidden=128,contexts=50000
A variant is `<corpus source>:<preset or field=value,…>`; `quick` is the main job's preset (10k contexts, 1 epoch),
fields are CoherenceSettings' (contexts = max_train_contexts; a variant is the BiLSTM unless it sets
`encoder=all-minilm-l6-v2`, stage 2's default ranker: a frozen encoder with a head fit by logistic regression).

    .venv/bin/python -m benchmarks.coherence --variant default:contexts=20000 --frozen-encoder all-minilm-l6-v2
adds, for each variant, a row for the lever the BiLSTM lacks: a pretrained sentence encoder, frozen, under the same
head ([c<, s, c>, c<⊙s, s⊙c>] → logit) fit by scikit-learn's logistic regression on the same training examples, scored
on the same held-out documents; its wall time is mostly encoding every distinct text once.

    .venv/bin/python -m benchmarks.coherence --confirm <model folder> --on gutenberg+sotu [--examples 20000]
scores a trained model (the one prepare-corpus built) on windows of a corpus it never saw and nothing was chosen on:
ROC AUC against same-document and random replacements, as in training.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.core.config import CorpusSettings  # noqa: E402
from tasks.retrieve.coherence import CoherenceSettings  # noqa: E402
from tasks.retrieve.prepared_corpus import load_corpora  # noqa: E402

PRESETS = {"quick": {"max_train_contexts": 10_000, "epochs": 1}}
ALIASES = {"contexts": "max_train_contexts"}


def number_or_text(value: str) -> int | float | str:
    """A variant's value: a number where it reads as one (hidden=128, lr=2e-3), else the text (encoder=…)."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_variant(text: str) -> tuple[str, CoherenceSettings]:
    source, _, spec = text.partition(":")
    fields: dict = {"encoder": "bilstm"}  # a variant is the BiLSTM unless it names an encoder
    for part in filter(None, spec.split(",")):
        if part in PRESETS:
            fields |= PRESETS[part]
            continue
        name, _, value = part.partition("=")
        fields[ALIASES.get(name, name)] = number_or_text(value)
    return source, CoherenceSettings(**fields)


def confirm(folder: Path, source: str, n: int, seed: int = 99) -> dict:
    """A trained model's ROC AUC on n windows (+ n replacements) of another corpus."""
    from tasks.contracts import load_trained
    from tasks.retrieve.coherence import heldout_metrics, training_examples
    from tasks.retrieve.contexts import context_windows

    trained = load_trained(folder)
    max_len = json.loads((folder / "manifest.json").read_text())["settings"]["max_len"]
    sentences, _, _ = load_corpora([CorpusSettings(source=source)])
    examples = training_examples(context_windows(sentences, 1, 0), sentences, n, seed)
    if trained.encoder:  # a head over a frozen encoder: score the encodings
        import numpy as np
        import torch

        from tasks.retrieve.coherence import encoded_windows, metrics_by_negative_kind

        parts, _ = encoded_windows(trained.encoder, [examples], trained.encoder_precision)
        logits = trained.model.logits_from_encodings(*map(torch.as_tensor, parts(examples))).detach().numpy()
        metrics = metrics_by_negative_kind(1 / (1 + np.exp(-logits)), examples)
    else:
        metrics = heldout_metrics(trained.model, trained.vocab, examples, max_len)
    return {"model": folder.name, "on": source, "examples": len(examples), "roc_auc": metrics["roc_auc"],
            "roc_auc_same_document": metrics["roc_auc_same_document"], "roc_auc_random": metrics["roc_auc_random"]}


def frozen_encoder_row(encoder: str, contexts, sentences, settings: CoherenceSettings, confirm=None,
                       precision: str = "float32") -> dict:
    """Held-out metrics of Sun et al. 2022's head over a frozen sentence encoder's unit vectors, on the split the
    BiLSTM of `settings` trains and is scored on (and on `confirm`, `training_examples` rows of a corpus nothing saw). The
    head's regularisation stays scikit-learn's default (C = 1): nothing is chosen on the rows the row reports.
    `precision` bfloat16: the encoding (only) under bf16 autocast (CoherenceSettings.precision)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from tasks.retrieve.coherence import encoded_windows, metrics_by_negative_kind, neighbour_cosines, split_examples

    train, held, _ = split_examples(contexts, sentences, settings)
    started = time.perf_counter()
    parts, n_texts = encoded_windows(encoder, [train, held] + ([confirm] if confirm is not None else []), precision)
    encode_s = time.perf_counter() - started

    def features(frame):
        left, centre, right = parts(frame)
        return np.hstack([left, centre, right, left * centre, centre * right])

    def cosine_only(frame) -> dict:
        # No training at all: how well the encoder's own similarity of the gap's sentence to its neighbours separates.
        metrics = metrics_by_negative_kind(neighbour_cosines(parts, frame).mean(axis=1), frame)
        return {k: round(v, 3) for k, v in metrics.items() if k.startswith("roc_auc")}

    fit_started = time.perf_counter()
    head = LogisticRegression(max_iter=2000).fit(features(train), train["label"].to_numpy())
    out = {"encoder": encoder, "precision": precision, "texts_encoded": n_texts, "encode_s": round(encode_s, 1),
           "fit_s": round(time.perf_counter() - fit_started, 1), "train_examples": len(train),
           "cosine_only": cosine_only(held),
           **metrics_by_negative_kind(head.predict_proba(features(held))[:, 1], held)}
    if confirm is not None:
        head_metrics = metrics_by_negative_kind(head.predict_proba(features(confirm))[:, 1], confirm)
        out["confirm"] = {"examples": len(confirm), "head": {k: round(v, 3) for k, v in head_metrics.items()
                                                             if k.startswith("roc_auc")},
                          "cosine_only": cosine_only(confirm)}
    return out


def bilstm_row(text: str, source: str, sentences, contexts, settings: CoherenceSettings) -> dict:
    from tasks.retrieve.coherence import train_or_load

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:  # never a cached model: each variant trains now
        trained = train_or_load(contexts, sentences, f"bench-{source}", settings, 1, root=Path(root))
    held = trained.metrics["heldout"]
    return {"variant": text, "corpus_sentences": len(sentences), "contexts": len(contexts),
            "train_examples": trained.metrics["train_examples"], "heldout_examples": held["examples"],
            "roc_auc": round(held["roc_auc"], 3), "roc_auc_same_document": round(held["roc_auc_same_document"], 3),
            "roc_auc_random": round(held["roc_auc_random"], 3), "accuracy": round(held["accuracy"], 3),
            "wall_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--confirm", type=Path, help="a trained model folder to score on --on")
    parser.add_argument("--on", default="gutenberg+sotu")
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--frozen-encoder", help="also fit the head over this frozen sentence encoder (a registered "
                        "name or a sentence-transformers folder) on each variant's split")
    parser.add_argument("--frozen-only", action="store_true", help="with --frozen-encoder: skip the BiLSTM rows")
    parser.add_argument("--frozen-confirm", help="with --frozen-encoder: also score the frozen head and the cosine on "
                        "--examples windows of this corpus (nothing is chosen on it)")
    parser.add_argument("--frozen-precision", default="float32", choices=("float32", "bfloat16"),
                        help="with --frozen-encoder: encode in float32 or under bf16 autocast")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    if args.confirm:
        print(json.dumps(confirm(args.confirm, args.on, args.examples)), flush=True)
        return
    from tasks.retrieve.contexts import context_windows

    rows, loaded = [], {}
    for text in args.variant:
        source, settings = parse_variant(text)
        if source not in loaded:
            sentences, inputs, _ = load_corpora([CorpusSettings(source=source)])
            loaded[source] = (sentences, context_windows(sentences, 1, 0))
        sentences, contexts = loaded[source]
        if not (args.frozen_encoder and args.frozen_only):
            rows.append(bilstm_row(text, source, sentences, contexts, settings))
            print(json.dumps(rows[-1]), flush=True)
        if args.frozen_encoder:
            confirm_examples = None
            if args.frozen_confirm:
                from tasks.retrieve.coherence import training_examples

                other, _, _ = load_corpora([CorpusSettings(source=args.frozen_confirm)])
                confirm_examples = training_examples(context_windows(other, 1, 0), other, args.examples, 99)
            started = time.perf_counter()
            frozen = frozen_encoder_row(args.frozen_encoder, contexts, sentences, settings, confirm_examples,
                                        args.frozen_precision)
            rows.append({"variant": f"{text} + frozen {args.frozen_encoder} head", "corpus_sentences": len(sentences),
                         "contexts": len(contexts), "train_examples": frozen["train_examples"],
                         "heldout_examples": frozen["examples"], "roc_auc": round(frozen["roc_auc"], 3),
                         "roc_auc_same_document": round(frozen["roc_auc_same_document"], 3),
                         "roc_auc_random": round(frozen["roc_auc_random"], 3), "accuracy": round(frozen["accuracy"], 3),
                         "wall_s": round(time.perf_counter() - started, 1), "encode_s": frozen["encode_s"],
                         "texts_encoded": frozen["texts_encoded"], "cosine_only": frozen["cosine_only"],
                         "confirm": frozen.get("confirm")})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| variant | corpus sentences | train examples | held-out | ROC AUC | same-doc | random | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['corpus_sentences']} | {r['train_examples']} | {r['heldout_examples']} | "
              f"{r['roc_auc']:.3f} | {r['roc_auc_same_document']:.3f} | {r['roc_auc_random']:.3f} | {r['wall_s']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
