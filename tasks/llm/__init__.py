"""LLM access over the `openai` client: rate limits, retries, response cache, local server management."""

from tasks.llm.client import CallResult, LLMClient, check_endpoint

__all__ = ["CallResult", "LLMClient", "check_endpoint"]
