"""Typed settings for every stage, validated at the edge (flow parameters, CLI flags, env).

Secrets never live in these objects: `LLMSettings.api_key_env` names the environment variable that holds the
key, and the key itself is read only when a client is built (see `tasks.llm.client`). Defaults that come from
`STSGEN_*` variables are read through `tasks.core.env_settings.env()` (typed, validated, one place).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.core.errors import ConfigError  # noqa: F401  (re-exported: most modules import it from here)
from tasks.core.home import stsgen_home  # noqa: F401  (re-exported: most modules import it from here)

DEFAULT_SEED = 13  # the default of every seeded setting; a run's seed (sts-pipeline's `seed`) replaces them all


def settings_problem(exc: ValidationError) -> str:
    """A pydantic validation error as the user reads it: the settings class, each refused field with the value given
    and what it must be — the flag or parameter of that name is what to fix."""
    fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(settings)'} = {e.get('input')!r}: {e['msg']}"
                       for e in exc.errors())
    return f"invalid {exc.title} setting — {fields}. Fix the flag or parameter of that name."


def _llm_env():
    """`env().llm`, imported lazily: `import tasks.core.config` (so `./stsgen --help`) stays free of pydantic-settings."""
    from tasks.core.env_settings import env

    return env().llm


class Settings(BaseModel):
    """The base of every settings class: frozen, unknown fields refused (a typo fails at the edge with the field's
    name). `NOT_IN_KEY`: the fields that change how a stage works, not what it returns, left out of its cache key
    (`key_fields`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset()

    def key_exclusions(self) -> frozenset[str]:
        """The fields left out of the cache key: `NOT_IN_KEY`; a class whose exclusions depend on its values
        overrides this."""
        return self.NOT_IN_KEY


def with_seed(settings: Settings, seed: int | None) -> Settings:
    """`settings` with every `seed` field in it, nested settings too, set to `seed`: one run seed reaches every
    stage's sampling the same way. None: unchanged."""
    if seed is None:
        return settings
    update = {name: with_seed(value, seed) for name in type(settings).model_fields
              if isinstance(value := getattr(settings, name), Settings)}
    if "seed" in type(settings).model_fields:
        update["seed"] = seed
    return settings.model_copy(update=update)


def key_fields(settings: Settings) -> dict[str, Any]:
    """The fields of `settings` that change a stage's result, for its cache key: every field but its
    `key_exclusions()` (how the work is done — concurrency, devices, threads, endpoints — not what it returns),
    nested settings alike."""
    excluded = settings.key_exclusions()
    return {name: key_value(getattr(settings, name)) for name in type(settings).model_fields if name not in excluded}


def key_value(value: Any) -> Any:
    """A value as it enters a cache key: settings objects through `key_fields`, containers element by element."""
    if isinstance(value, BaseModel):
        return key_fields(value)
    if isinstance(value, (list, tuple)):
        return [key_value(v) for v in value]
    if isinstance(value, dict):
        return {k: key_value(v) for k, v in value.items()}
    return value


class LLMSettings(Settings):
    """Where and how to call an OpenAI-compatible chat endpoint."""

    # How requests are sent, not what they return: another URL, key or pace serving the same model reuses the outputs.
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({
        "max_concurrency", "requests_per_minute", "tokens_per_minute", "timeout_s", "max_retries", "backoff_base_s",
        "backoff_max_s", "verify_model", "cache_path", "api_key_env", "base_url", "prefect_limit",
        "price_prompt_per_million", "price_completion_per_million",
        # The served model's identity enters keys through `model_identity`, where a stage keys on it.
        "model_sha256", "server_engine"})

    base_url: str = Field(
        default_factory=lambda: _llm_env().base_url,
        description="OpenAI-compatible base URL (…/v1). Env: STSGEN_LLM_BASE_URL (or STSGEN_LLM__BASE_URL).",
    )
    model: str = Field(
        default_factory=lambda: _llm_env().model,
        description="Model name as the endpoint knows it. Env: STSGEN_LLM_MODEL (or STSGEN_LLM__MODEL).",
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Name of the env var holding the API key.")
    max_concurrency: int = Field(4, ge=1, le=1024, description="Requests in flight: 4 fills the embedded "
                                 "llama-server's default slots.")
    requests_per_minute: float | None = Field(None, gt=0, description="Client-side request pace for a rate-limited "
                                              "endpoint; None: unpaced.")
    tokens_per_minute: float | None = Field(None, gt=0, description="Client-side token pace (prompt + completion) "
                                            "for a rate-limited endpoint; None: unpaced.")
    prefect_limit: str | None = Field(
        default_factory=lambda: _llm_env().prefect_limit, min_length=1,
        description="A Prefect global concurrency limit (`prefect gcl create`) pacing requests across processes and "
        "workers; needs a Postgres-backed server. Env: STSGEN_LLM_PREFECT_LIMIT.",
    )
    timeout_s: float = Field(120.0, gt=0, description="Seconds one request may take: a busy CPU server answers a "
                             "queued request within it.")
    max_retries: int = Field(5, ge=0, le=50, description="Retries per request on 429/5xx/timeouts/bad JSON.")
    backoff_base_s: float = Field(1.0, ge=0, description="First retry's wait in seconds, doubled per retry (with "
                                  "jitter).")
    backoff_max_s: float = Field(60.0, ge=0, description="Longest wait between retries, in seconds.")
    verify_model: bool = Field(True, description="Check at start that the endpoint lists the model.")
    cache_path: str | None = Field(
        None, description="SQLite response cache; default $STSGEN_HOME/llm-cache.sqlite. 'off' disables it."
    )
    # Who serves the model, when stsgen started the server (the CLI, the stack): carried here, not in os.environ.
    model_sha256: str | None = Field(
        default_factory=lambda: _llm_env().model_sha256, pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the GGUF stsgen's own server serves (in manifests and the rating's key). Env: "
        "STSGEN_LLM_MODEL_SHA256 (set by the stack).",
    )
    server_engine: Literal["llama-server", "llama-cpp-python"] | None = Field(
        default_factory=lambda: _llm_env().server_engine,
        description="Engine of the server stsgen started (request_order 'auto' reads it). Env: "
        "STSGEN_LLM_SERVER_ENGINE.",
    )

    # Prices are the user's (no price list is built in): manifests turn the tokens a stage used into money with them.
    price_prompt_per_million: float | None = Field(
        default_factory=lambda: _llm_env().price_prompt_per_million, ge=0,
        description="Price per million prompt tokens (any currency): manifests price the tokens used. Env: "
        "STSGEN_LLM_PRICE_PROMPT_PER_MILLION.",
    )
    price_completion_per_million: float | None = Field(
        default_factory=lambda: _llm_env().price_completion_per_million, ge=0,
        description="Price per million completion tokens. Env: STSGEN_LLM_PRICE_COMPLETION_PER_MILLION.",
    )

    constrained_answers: Literal["auto", "grammar", "off"] = Field(
        "auto",
        description="The judge's yes/no and the rater's digit: 'grammar' (a GBNF grammar, llama.cpp servers), 'off' "
        "(the free answer parsed), 'auto' (grammar where /props shows a llama-server).",
    )

    def resolved_cache_path(self) -> Path | None:
        if self.cache_path == "off":
            return None
        return Path(self.cache_path) if self.cache_path else stsgen_home() / "llm-cache.sqlite"


class CorpusSettings(Settings):
    """Which sentences to use as source sentences."""

    source: str = Field("default", description="'default' (every packaged source, docs/guides/corpus.md), a source name, "
                        "names joined by '+', or a path (file, folder, zip).")
    text_field: str = Field("text", description="Column/key holding text in Parquet/JSONL inputs.")
    document_split: Literal["file", "blank_lines"] = Field(
        "file", description="Text files: one document per file, or one per blank-line-separated block (e.g. ABC).")
    sentence_per_line: bool = Field(False, description="Text is one sentence per line already (no splitting).")
    min_words: int = Field(6, ge=1, description="Shorter corpus sentences are unusable (headings, fragments).")
    max_words: int = Field(60, ge=1, description="Longer corpus sentences are unusable (run-ons, missed splits).")
    min_alpha_ratio: float = Field(0.6, ge=0, le=1, description="Share of letters among non-space chars.")
    max_file_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Refuse single input files above this.")

