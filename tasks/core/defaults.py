"""The default models' names, written once (tests/core/test_defaults.py fails on a copy elsewhere): the generator LLM
the embedded server runs, the sentence encoder (embedding checks, best-of-N choice, the surrogate's backbone), the
small causal LM (stage 3's scorer, the BeLLM backbone) — all three registered in tasks/llm/local_models — and the
encoder teacher (tasks/llm/teacher.py). Plain strings: importing this module loads nothing."""

DEFAULT_GENERATOR = "qwen2.5-coder-1.5b-instruct"
DEFAULT_ENCODER = "all-minilm-l6-v2"
DEFAULT_LM = "smollm2-135m-instruct"
DEFAULT_TEACHER = "all-mpnet-base-v2"

# The registered backbones' Hugging Face ids: a trained model card's "Base model" (a local folder has none to name).
HUB_IDS = {DEFAULT_ENCODER: "sentence-transformers/all-MiniLM-L6-v2",
           DEFAULT_LM: "HuggingFaceTB/SmolLM2-135M-Instruct",
           DEFAULT_TEACHER: "sentence-transformers/all-mpnet-base-v2"}
