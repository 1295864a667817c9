"""An OpenAI-compatible endpoint as the rest of the project meets it before any request: its API key (from the
environment, never stored), how a manifest names it (loopback or remote: its URL may embed credentials), text with the
key redacted, and the fail-fast check that it is up and serves the model. The requests themselves are
tasks/llm/client.py's."""

from __future__ import annotations

import openai

from tasks.core.config import ConfigError, LLMSettings
from tasks.core.env_settings import secret_env
from tasks.llm.ratelimit import check_prefect_limit


def api_key(settings: LLMSettings) -> str:
    # Local servers accept any key; the placeholder keeps the openai client from refusing to start.
    key = secret_env(settings.api_key_env)
    return key.get_secret_value() if key else "sk-no-key"


def endpoint_kind(base_url: str) -> str:
    """'loopback' or 'remote': what a manifest records of an endpoint (its URL might embed credentials)."""
    return "loopback" if any(h in base_url for h in ("127.0.0.1", "localhost", "[::1]")) else "remote"


def redact(text: str, settings: LLMSettings) -> str:
    key = secret_env(settings.api_key_env)
    value = key.get_secret_value() if key else ""
    return text.replace(value, "***") if len(value) >= 4 else text



def check_endpoint(settings: LLMSettings) -> list[str]:
    """Fail fast with one clear error when the endpoint is unreachable or does not serve the model.

    Returns the model ids the endpoint lists.
    """
    if settings.prefect_limit:
        check_prefect_limit(settings.prefect_limit)
    client = openai.OpenAI(base_url=settings.base_url, api_key=api_key(settings), max_retries=1,
                           timeout=min(settings.timeout_s, 15.0))
    try:
        ids = [m.id for m in client.models.list()]
    except openai.AuthenticationError as exc:
        raise ConfigError(
            f"LLM endpoint {settings.base_url} rejected the API key (HTTP {exc.status_code}). "
            f"Set the key in the environment variable {settings.api_key_env}."
        ) from None
    except openai.APIConnectionError:
        raise ConfigError(
            f"LLM endpoint {settings.base_url} is unreachable. Start the local server (`./stsgen llm-server`) "
            "or pass another base URL (--base-url / llm.base_url / STSGEN_LLM_BASE_URL)."
        ) from None
    except openai.APIStatusError as exc:
        if not settings.verify_model:
            return []
        raise ConfigError(
            f"LLM endpoint {settings.base_url} answered HTTP {exc.status_code} to GET /models; "
            "set llm.verify_model=false if it does not list models."
        ) from None
    finally:
        client.close()
    if settings.verify_model and settings.model not in ids:
        raise ConfigError(
            f"LLM endpoint {settings.base_url} does not serve model '{settings.model}'. "
            f"It lists: {', '.join(ids) or '(none)'}. Pass one of these as --model / llm.model."
        )
    return ids
