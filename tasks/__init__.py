"""Stage code and the plumbing it shares. One package per stage — generate/ (1), retrieve/ (2), label/ (3), train/ (4),
evaluate/ — each of plain functions that flows/ wraps in thin Prefect tasks; core/ (settings, the atomic writer,
store and manifests, artifacts, input readers), llm/ (every LLM call), and contracts.py (the tables stages exchange).
A stage package imports core, llm, contracts and models, never another stage (tests/pipeline/test_architecture.py)."""
