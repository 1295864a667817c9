"""The default models' names, written once: the generator LLM the embedded server runs and the sentence encoder of
the embedding checks, the best-of-N choice and the surrogate's backbone (both registered in tasks/llm/local_models)."""

DEFAULT_GENERATOR = "qwen2.5-coder-1.5b-instruct"
DEFAULT_ENCODER = "all-minilm-l6-v2"
