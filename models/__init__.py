"""Torch model code (coherence model, LM scorer, encoders, losses) — knows nothing of Prefect."""
