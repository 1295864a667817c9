"""Configuration from the environment (tasks/core/env_settings.py): the documented flat names and the nested
`STSGEN_LLM__…` form set the same settings, a bad value stops with the variable's name and the fix, the API key
never reaches a dump of the settings, and the defaults hold when nothing is set. No servers; fast."""

from __future__ import annotations

import os

import pytest

from tasks.core.config import ConfigError, LLMSettings
from tasks.core.env_settings import StsgenEnv, env, secret_env
from tasks.core.home import stsgen_home
from tasks.generate.settings import GenerateSettings

CANARY = "sk-canary-3f9a1c7e5b2d"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No STSGEN_* variable (the test session's STSGEN_HOME included) and no PREFECT_API_URL; HOME in tmp_path."""
    for name in list(os.environ):
        if name.upper().startswith("STSGEN_") or name.upper() == "PREFECT_API_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_defaults_when_nothing_is_set(tmp_path):
    settings = env()
    assert settings.home == tmp_path / ".cache" / "stsgen" == stsgen_home()
    assert settings.max_input_bytes == 2 * 1024**3
    assert settings.llama_cmake_args == "" and settings.prefect_api_url is None
    assert settings.llm.model_dump() == {"base_url": "http://127.0.0.1:8765/v1", "model": "qwen2.5-coder-1.5b-instruct",
                                         "prefect_limit": None, "server_engine": None, "model_sha256": None,
                                         "price_prompt_per_million": None, "price_completion_per_million": None}
    llm = LLMSettings()
    assert (llm.base_url, llm.model, llm.prefect_limit) == ("http://127.0.0.1:8765/v1", "qwen2.5-coder-1.5b-instruct",
                                                             None)
    assert GenerateSettings().resolved_request_order(llm) == "by_source"


@pytest.mark.parametrize("separator", ["_", "__"], ids=["flat", "nested"])
def test_flat_and_nested_names_set_the_llm_endpoint(monkeypatch, separator):
    monkeypatch.setenv(f"STSGEN_LLM{separator}BASE_URL", "http://vllm.internal:8000/v1")
    monkeypatch.setenv(f"STSGEN_LLM{separator}MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv(f"STSGEN_LLM{separator}PREFECT_LIMIT", "llm-requests")
    assert (env().llm.base_url, env().llm.model) == ("http://vllm.internal:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
    llm = LLMSettings()  # its defaults come from the environment
    assert (llm.base_url, llm.model, llm.prefect_limit) == ("http://vllm.internal:8000/v1", "Qwen/Qwen2.5-7B-Instruct",
                                                             "llm-requests")
    assert LLMSettings(model="explicit").model == "explicit"  # a flag or parameter still wins


def test_the_server_identity_travels_in_the_settings_not_the_environment():
    """The CLI hands the embedded server's engine and checksum to the flows in LLMSettings (no os.environ writes)."""
    from tasks.llm.client import model_identity

    llm = LLMSettings(server_engine="llama-cpp-python", model_sha256="cd" * 32)
    order = GenerateSettings().resolved_request_order
    assert order(llm) == "by_kind" and order(LLMSettings()) == "by_source"
    assert model_identity(llm) == {"model": llm.model, "sha256": "cd" * 32}
    assert "STSGEN_LLM_MODEL_SHA256" not in os.environ and "STSGEN_LLM_SERVER_ENGINE" not in os.environ


def test_the_server_engine_from_the_environment_picks_the_request_order(monkeypatch):
    monkeypatch.setenv("STSGEN_LLM_SERVER_ENGINE", "llama-cpp-python")
    monkeypatch.setenv("STSGEN_LLM_MODEL_SHA256", "ab" * 32)
    assert GenerateSettings().resolved_request_order(LLMSettings()) == "by_kind"
    assert env().llm.model_sha256 == "ab" * 32


def test_changes_to_the_environment_are_seen_by_the_next_call(monkeypatch):
    monkeypatch.setenv("STSGEN_LLM_MODEL", "first")
    assert env().llm.model == "first"
    monkeypatch.setenv("STSGEN_LLM_MODEL", "second")
    assert env().llm.model == "second"
    monkeypatch.delenv("STSGEN_LLM_MODEL")
    assert env().llm.model == "qwen2.5-coder-1.5b-instruct"
    assert env() is env()  # unchanged environment: the cached object


def test_an_empty_value_counts_as_unset(monkeypatch, tmp_path):
    # docker-compose.yml passes STSGEN_LLM_PREFECT_LIMIT="" when the host does not set it
    monkeypatch.setenv("STSGEN_LLM_PREFECT_LIMIT", "")
    monkeypatch.setenv("STSGEN_MAX_INPUT_BYTES", "")
    monkeypatch.setenv("STSGEN_HOME", "")
    assert env().llm.prefect_limit is None and env().max_input_bytes == 2 * 1024**3
    assert env().home == stsgen_home() == tmp_path / ".cache" / "stsgen"


def test_home_agrees_with_the_standard_library_reader(monkeypatch, tmp_path):
    monkeypatch.setenv("STSGEN_HOME", "~/elsewhere")
    assert env().home == stsgen_home() == tmp_path / "elsewhere"


def test_an_invalid_value_names_the_variable_and_the_fix(monkeypatch):
    from tasks.core.store import max_input_bytes

    monkeypatch.setenv("STSGEN_MAX_INPUT_BYTES", "abc")
    with pytest.raises(ConfigError, match=r"STSGEN_MAX_INPUT_BYTES='abc': Input should be a valid integer.*Fix or "
                                          r"unset it"):
        env()
    with pytest.raises(ConfigError, match="STSGEN_MAX_INPUT_BYTES"):
        max_input_bytes()
    monkeypatch.setenv("STSGEN_MAX_INPUT_BYTES", "100")
    assert max_input_bytes() == 100


@pytest.mark.parametrize("name, value", [
    ("STSGEN_LLM_SERVER_ENGINE", "vllm"), ("STSGEN_LLM__SERVER_ENGINE", "vllm"),
    ("STSGEN_LLM_BASE_URL", "vllm:8000/v1"), ("STSGEN_LLM__BASEURL", "http://x/v1"),
    ("STSGEN_LLM_MODEL_SHA256", "not-a-digest"), ("STSGEN_MAX_INPUT_BYTES", "-1"),
])
def test_invalid_llm_values_and_unknown_nested_names_fail_fast(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"invalid environment variable {name}={value!r}"):
        env()
    with pytest.raises(ConfigError, match=name):
        LLMSettings()


def test_the_flat_and_nested_forms_must_agree(monkeypatch):
    monkeypatch.setenv("STSGEN_LLM_MODEL", "a")
    monkeypatch.setenv("STSGEN_LLM__MODEL", "a")
    assert env().llm.model == "a"
    monkeypatch.setenv("STSGEN_LLM__MODEL", "b")
    with pytest.raises(ConfigError, match="STSGEN_LLM_MODEL='a' and STSGEN_LLM__MODEL='b'.*Unset one of them"):
        env()


def test_the_cli_stops_on_a_bad_variable_before_any_work(monkeypatch, capsys):
    from flows import cli
    from flows.cli import stages

    monkeypatch.setenv("STSGEN_LLM_SERVER_ENGINE", "vllm")
    monkeypatch.setattr(stages, "_generate", lambda args: pytest.fail("ran with a bad environment"))
    assert cli.main(["generate", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "STSGEN_LLM_SERVER_ENGINE='vllm'" in capsys.readouterr().err


def test_the_api_key_never_appears_in_a_dump_of_the_settings(monkeypatch):
    from tasks.llm.endpoint import api_key, redact

    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("STSGEN_LM_API_KEY", CANARY)  # the served context-labeler's key (label.lm_endpoint.api_key_env)
    monkeypatch.setenv("STSGEN_LLM_BASE_URL", "https://api.example.com/v1")
    llm = LLMSettings()
    dumps = [env().model_dump_json(), repr(env()), str(env().model_dump()), llm.model_dump_json(), repr(llm),
             StsgenEnv().model_dump_json()]
    assert not [d for d in dumps if CANARY in d]
    key = secret_env(llm.api_key_env)
    assert CANARY not in f"{key} {key!r}" and key.get_secret_value() == CANARY
    assert api_key(llm) == CANARY  # revealed only where the client is built
    assert redact(f"header Bearer {CANARY}", llm) == "header Bearer ***"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert secret_env("OPENAI_API_KEY") is None and api_key(llm) == "sk-no-key"
