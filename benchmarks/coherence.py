"""The coherence model (seed 003's discriminative ranker) against the corpus it is trained on, side by side in one
run: held-out ROC AUC (all negatives, same-document, random replacements), training examples and wall time on the
2-core machine, for each (corpus, settings) variant given.

    .venv/bin/python -m benchmarks.coherence --variant gensim:quick --variant default:hidden=128,contexts=50000
A variant is `<corpus source>:<preset or field=value,…>`; `quick` is the main job's preset (10k contexts, 1 epoch),
fields are CoherenceSettings' (contexts = max_train_contexts).

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


def parse_variant(text: str) -> tuple[str, CoherenceSettings]:
    source, _, spec = text.partition(":")
    fields: dict = {}
    for part in filter(None, spec.split(",")):
        if part in PRESETS:
            fields |= PRESETS[part]
            continue
        name, _, value = part.partition("=")
        fields[ALIASES.get(name, name)] = float(value) if "." in value else int(value)
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
    metrics = heldout_metrics(trained.model, trained.vocab, examples, max_len)
    return {"model": folder.name, "on": source, "examples": len(examples), "roc_auc": metrics["roc_auc"],
            "roc_auc_same_document": metrics["roc_auc_same_document"], "roc_auc_random": metrics["roc_auc_random"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--confirm", type=Path, help="a trained model folder to score on --on")
    parser.add_argument("--on", default="gutenberg+sotu")
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    if args.confirm:
        print(json.dumps(confirm(args.confirm, args.on, args.examples)), flush=True)
        return
    from tasks.retrieve.coherence import train_or_load
    from tasks.retrieve.contexts import context_windows

    rows, loaded = [], {}
    for text in args.variant:
        source, settings = parse_variant(text)
        if source not in loaded:
            sentences, inputs, _ = load_corpora([CorpusSettings(source=source)])
            loaded[source] = (sentences, context_windows(sentences, 1, 0))
        sentences, contexts = loaded[source]
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as root:  # never a cached model: each variant trains now
            trained = train_or_load(contexts, sentences, f"bench-{source}", settings, 1, root=Path(root))
        held = trained.metrics["heldout"]
        row = {"variant": text, "corpus_sentences": len(sentences), "contexts": len(contexts),
               "train_examples": trained.metrics["train_examples"], "heldout_examples": held["examples"],
               "roc_auc": round(held["roc_auc"], 3), "roc_auc_same_document": round(held["roc_auc_same_document"], 3),
               "roc_auc_random": round(held["roc_auc_random"], 3), "accuracy": round(held["accuracy"], 3),
               "wall_s": round(time.perf_counter() - started, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| variant | corpus sentences | train examples | held-out | ROC AUC | same-doc | random | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['corpus_sentences']} | {r['train_examples']} | {r['heldout_examples']} | "
              f"{r['roc_auc']:.3f} | {r['roc_auc_same_document']:.3f} | {r['roc_auc_random']:.3f} | {r['wall_s']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
