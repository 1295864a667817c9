"""Stage logic: plain functions, each wrapped by a thin Prefect task, plus shared plumbing (llm, store, config)."""
