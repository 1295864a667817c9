"""Flow `prepare-corpus`: build once what every later run on a corpus reuses — its sentence table, the screening
index and the coherence model, each keyed by the corpus's content (tasks/retrieve/prepared_corpus.py) — and report
the per-source table, the index's size, build time and peak memory, and the coherence model's held-out ROC AUC.

Run it once after setup (`./stsgen corpus prepare`) so the first `./stsgen run` finds everything built, or on a
schedule (the `prepare-corpus/corpus-weekly` deployment) to rebuild after a corpus or setting change; stage 2 calls the
same function, so a run without it builds what is missing itself.
"""

from __future__ import annotations

from prefect import flow

from tasks.retrieve.prepared_corpus import summary
from tasks.retrieve.settings import RetrieveSettings
from tasks.retrieve.stage import prepare_corpus_task, publish_prepared


@flow(name="prepare-corpus")
def prepare_corpus(settings: RetrieveSettings = RetrieveSettings()) -> dict:
    """The corpus of `settings.corpora` (None: the default corpus) prepared as stage 2 with these settings reads
    it. Returns the summary (paths, sizes, held-out ROC AUC, timings)."""
    prepared = prepare_corpus_task(settings)
    report = summary(prepared)
    publish_prepared(report)
    return report
