"""Stage 2, retrieve-contexts: context windows, TF-IDF / BM25 screening, the coherence model, diverse selection."""
