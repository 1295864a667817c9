"""Stage code and the plumbing it shares. One package per stage — generate/ (1), retrieve/ (2), label/ (3), train/ (4),
report/ (the pattern report), dataset/ (build-dataset) — each of small functions (its settings.py, its work modules,
its stage.py with `IO`, `prepare_*`, the compute step and `publish_*`) that the flows in flows/ only wire; core/
(settings, the stage outline, the atomic writer, store and manifests, artifacts, input readers), llm/ (every LLM call),
contracts.py (the tables stages exchange) and pipeline.py (sts-pipeline's decisions between stages). A stage package
imports core, llm, contracts and models, never another stage (tests/pipeline/test_architecture.py)."""
