"""Plumbing every stage shares: settings and errors (config, env_settings, home), the atomic writer, Parquet store,
content hashes and manifests (store), Prefect artifacts, figures, worker pools (runners), devices, input readers
(sts_data; the corpus has its own package, tasks/corpus), STS evaluation, decontamination against the
evaluation sets, Hugging Face dataset export. Imports nothing at package level (setup's
llama.cpp compile loads tasks.core.home with the standard library only)."""
