"""Configuration from the environment: every `STSGEN_*` variable stsgen reads, typed and validated in one place.

    from tasks.core.env_settings import env
    env().llm.base_url        # STSGEN_LLM_BASE_URL, or the nested form STSGEN_LLM__BASE_URL
    env().max_input_bytes     # STSGEN_MAX_INPUT_BYTES

`env()` reads the environment when called (not at import) and returns the same frozen `StsgenEnv` while the
relevant variables are unchanged, so a test's monkeypatch.setenv, or the CLI exporting the embedded server's
sha256, is seen by the next call. An invalid value fails with a `ConfigError` naming the variable and the fix.

Names. Nested settings use pydantic-settings' `__` delimiter (`STSGEN_LLM__MODEL`); the flat names documented
before this module existed (`STSGEN_LLM_MODEL`, …, used by docker-compose.yml and the local stack) keep working.
Setting both forms of one setting to different values is an error, not a silent pick.

Secrets are not settings: the API key lives in the variable named by `LLMSettings.api_key_env` and is read with
`secret_env()`, which hands back a `SecretStr`; `StsgenEnv` has no secret field, so dumping it (into a log or a
manifest) cannot leak one.

Not read through here, on purpose (standard library only: setup runs them before pydantic-settings is installed):
`tasks/core/home.py` (STSGEN_HOME; `StsgenEnv.home` shares its default) and `tasks/llm/llama_build.py`
(STSGEN_LLAMA_CMAKE_ARGS; validated here too so a bad value is reported the same way). Variables only shell,
compose or Prefect files read (STSGEN_PYTHON, STSGEN_PROJECT_DIR, STSGEN_VLLM_GPU_MEMORY) are listed in the README.
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from tasks.core.defaults import DEFAULT_GENERATOR
from tasks.core.errors import ConfigError
from tasks.core.home import default_home

PREFIX = "STSGEN_"
NESTED = "__"


class LLMEnv(BaseModel):
    """`STSGEN_LLM_<NAME>` (flat, documented) or `STSGEN_LLM__<NAME>` (nested): the defaults of `LLMSettings` and
    what the process that started the embedded server tells the flows about it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field("http://127.0.0.1:8765/v1", description="OpenAI-compatible base URL (…/v1).")
    model: str = Field(DEFAULT_GENERATOR, min_length=1, description="Model name as the endpoint knows it.")
    prefect_limit: str | None = Field(None, min_length=1, description="Prefect global concurrency limit pacing "
                                      "requests across processes (LLMSettings.prefect_limit).")
    server_engine: Literal["llama-server", "llama-cpp-python"] | None = Field(
        None, description="Engine of the embedded server (set by the CLI and the stack; picks the request order).")
    model_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="sha256 of the embedded "
                                     "server's GGUF (set by the CLI and the stack; recorded in manifests).")
    price_prompt_per_million: float | None = Field(None, ge=0, description="What the endpoint charges per million "
                                                   "prompt tokens (manifests and the quality table price the tokens).")
    price_completion_per_million: float | None = Field(None, ge=0, description="… per million completion tokens.")

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL ending in /v1")
        return v


class StsgenEnv(BaseSettings):
    """Every setting stsgen takes from `STSGEN_*` variables (plus PREFECT_API_URL, which it reads, not owns)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_nested_delimiter=NESTED, env_ignore_empty=True,
                                      extra="ignore", frozen=True, case_sensitive=False)

    home: Path = Field(default_factory=default_home, description="Caches: LLM responses, assembled models, "
                       "llama.cpp builds, corpus sentence tables, logs, the local stack.")
    max_input_bytes: int = Field(2 * 1024**3, gt=0, description="Largest single input file read whole (Parquet, "
                                 "pattern and STS files; corpus files: corpus.max_file_bytes).")
    llama_cmake_args: str = Field("", description="Extra CMake flags for setup's llama.cpp build (read by "
                                  "tasks/llm/llama_build.py itself).")
    progress_every_s: float = Field(30.0, gt=0, description="Seconds between plain progress lines when the "
                                    "output is no terminal (a log file, cron, CI).")
    llm: LLMEnv = Field(default_factory=LLMEnv)
    prefect_api_url: str | None = Field(None, validation_alias=AliasChoices("PREFECT_API_URL"),
                                        description="A Prefect server to run against (else an ephemeral one).")

    @field_validator("home")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @field_validator("llama_cmake_args")
    @classmethod
    def _shell_words(cls, v: str) -> str:
        shlex.split(v)  # "No closing quotation" and the like, here rather than at setup's build
        return v

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        # No .env or secrets-dir reading: the process environment only, as before.
        return init_settings, env_settings, _FlatLLMNames(settings_cls)


def flat_name(field: str) -> str:
    return f"{PREFIX}LLM_{field.upper()}"


def nested_name(field: str) -> str:
    return f"{PREFIX}LLM{NESTED}{field.upper()}"


def _environ() -> dict[str, str]:
    """The environment with upper-cased names (pydantic-settings matches names case-insensitively too)."""
    return {k.upper(): v for k, v in os.environ.items()}


class _FlatLLMNames(PydanticBaseSettingsSource):
    """STSGEN_LLM_BASE_URL & co. for llm.base_url & co.; refuses a flat and a nested name that disagree."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ builds the whole dict

    def __call__(self) -> dict[str, Any]:
        environ, llm = _environ(), {}
        for name in LLMEnv.model_fields:
            flat, nested = environ.get(flat_name(name)), environ.get(nested_name(name))
            if not flat:  # unset or empty (empty = unset, like env_ignore_empty)
                continue
            if nested and nested != flat:
                raise ConfigError(f"{flat_name(name)}={flat!r} and {nested_name(name)}={nested!r} set the same "
                                    f"setting (llm.{name}) to different values. Unset one of them.")
            llm[name] = flat
        return {"llm": llm} if llm else {}


def _variables(loc: tuple) -> list[str]:
    """The variable names that can set the value at `loc` of a validation error, those set first."""
    field = str(loc[0]) if loc else ""
    if field == "llm" and len(loc) > 1:
        names = [flat_name(str(loc[1])), nested_name(str(loc[1])), f"{PREFIX}LLM"]
    elif field == "prefect_api_url":
        names = ["PREFECT_API_URL"]
    else:
        names = [f"{PREFIX}{field.upper()}"]
    environ = _environ()
    set_ = [n for n in names if environ.get(n)]
    return set_ or names[:2]


def _problem(exc: ValidationError) -> str:
    environ, parts = _environ(), []
    for err in exc.errors():
        names = _variables(tuple(err["loc"]))
        shown = ", ".join(f"{n}={environ[n]!r}" if environ.get(n) else n for n in names)
        parts.append(f"{shown}: {err['msg']}")
    return ("invalid environment variable " + "; ".join(parts) +
            ". Fix or unset it (README, 'Environment variables' lists each one and its default).")


@functools.lru_cache(maxsize=16)
def _load(snapshot: tuple[tuple[str, str], ...]) -> StsgenEnv:
    try:
        return StsgenEnv()
    except ValidationError as exc:
        raise ConfigError(_problem(exc)) from None


def _snapshot() -> tuple[tuple[str, str], ...]:
    """What `StsgenEnv` depends on: the STSGEN_* variables, PREFECT_API_URL and HOME (home's default)."""
    return tuple(sorted((k, v) for k, v in os.environ.items()
                        if k.upper().startswith(PREFIX) or k.upper() in ("PREFECT_API_URL", "HOME")))


def env() -> StsgenEnv:
    """The settings from the current environment (re-read whenever a relevant variable changed)."""
    return _load(_snapshot())


def secret_env(name: str) -> SecretStr | None:
    """A secret (API key) from the variable `name`; None when unset or empty. Only `.get_secret_value()` shows it."""
    value = os.environ.get(name)
    return SecretStr(value) if value else None
