"""`build-dataset`: one dataset grown across runs — the accepted triples and labeled pairs of finished runs, unioned,
deduplicated, decontaminated against the evaluation sets, written as a content-addressed version (flows/build_dataset.py).

settings.py (DatasetSettings) · sources.py (which runs, read and checked) · dedup.py (exact, MinHash, embedding
duplicates; keep the first) · eval_sets.py (the evaluation sets, in any form) · embeddings.py (encoder vectors cached
by sentence content) · build.py (the selection and the version folder). Decontamination's matching (evaluation
sentences, n-gram containment, embedding matches) is tasks/core/decontamination.py: stage 4's mining uses it too.
"""
