"""LLM access over the `openai` client: rate limits, retries, response cache, local server management.

Nothing is imported here: the local model registry (`local_models`) is read by the train stage too, which needs no
HTTP client; `from tasks.llm.client import LLMClient` where one is needed."""
