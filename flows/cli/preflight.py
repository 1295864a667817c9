"""Input files checked before anything starts: a bad `--triples` / `--pairs` / `--contexts` / `--sentences` is
refused (one `stsgen: error:` line naming the file and the fix) before the local LLM server or a Prefect server
starts, so a typo costs a second, not the half minute those take. Each check calls the reader its stage reads the
file with (tasks/contracts.py, the stage modules), so this adds no second set of rules; the stage reads the file
again inside its flow run (the deployments' path, with no CLI in front)."""

from __future__ import annotations

from pathlib import Path


def check_retrieve_inputs(sentences: str) -> None:
    from tasks.contracts import load_query_sentences

    load_query_sentences(Path(sentences))


def check_label_inputs(triples: str | None, pairs: str | None, contexts: str | None,
                       calibration: str | None) -> None:
    """stage 3's files: triples or pairs, the contexts where the labeler uses them, a calibration table."""
    from tasks.contracts import read_contexts, read_triples
    from tasks.label.label_quality import fit_calibration
    from tasks.label.pair_units import read_pairs
    from tasks.label.stage import IO

    if pairs:
        read_pairs(Path(pairs))
    elif triples:
        read_triples(Path(triples), IO.reads["generate-sts-triples/triples.parquet"])
    if contexts:
        read_contexts(Path(contexts))
    if calibration:
        fit_calibration(Path(calibration))  # its checks: columns, enough rows


def check_train_inputs(triples: str | None, pairs: str | None, dataset: str | None) -> None:
    """stage 4's files: a run's triples (and pairs) or a dataset version's."""
    from tasks.contracts import read_triples
    from tasks.train.stage import IO, read_pairs_columns, training_inputs

    triples, pairs = training_inputs(triples, pairs, dataset)
    read_triples(Path(triples), IO.reads["generate-sts-triples/triples.parquet"])
    if pairs:
        read_pairs_columns(Path(pairs))
