"""Model spec strings: provider defaults, custom endpoints, the embedded target, and keys kept out."""

from __future__ import annotations

import json

import pytest

from mheval.errors import InputError
from mheval.models.spec import PROVIDERS, parse_model_spec


@pytest.mark.parametrize(
    ("text", "base_url", "key_env", "required"),
    [
        ("openai/gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_API_KEY", True),
        ("openrouter/meta-llama/llama-3.1-8b-instruct", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
        ("together/Qwen/Qwen2.5-7B-Instruct-Turbo", "https://api.together.xyz/v1", "TOGETHER_API_KEY", True),
        ("groq/llama-3.1-8b-instant", "https://api.groq.com/openai/v1", "GROQ_API_KEY", True),
        ("deepseek/deepseek-chat", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", True),
        ("ollama/llama3.1:8b", "http://127.0.0.1:11434/v1", None, False),
        ("vllm/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1", "VLLM_API_KEY", False),
        ("llamacpp/any", "http://127.0.0.1:8080/v1", None, False),
        ("lmstudio/any", "http://127.0.0.1:1234/v1", None, False),
        ("sglang/any", "http://127.0.0.1:30000/v1", None, False),
    ],
)
def test_provider_defaults(text: str, base_url: str, key_env: str | None, required: bool) -> None:
    spec = parse_model_spec(text)
    assert (spec.base_url, spec.api_key_env, spec.key_required) == (base_url, key_env, required)
    assert spec.name == text == str(spec)
    assert parse_model_spec(spec.name) == spec


def test_model_part_keeps_its_slashes() -> None:
    spec = parse_model_spec("openrouter/meta-llama/llama-3.1-8b-instruct")
    assert (spec.provider, spec.model) == ("openrouter", "meta-llama/llama-3.1-8b-instruct")


def test_custom_base_url() -> None:
    spec = parse_model_spec("vllm/Qwen/Qwen2.5-7B-Instruct@http://10.0.0.5:8000/v1/")
    assert spec.model == "Qwen/Qwen2.5-7B-Instruct"
    assert spec.base_url == "http://10.0.0.5:8000/v1"  # trailing slash dropped
    assert spec.api_key_env == "VLLM_API_KEY"
    assert spec.name == "vllm/Qwen/Qwen2.5-7B-Instruct@http://10.0.0.5:8000/v1"
    assert parse_model_spec(spec.name) == spec
    # Restating the default URL gives the short canonical name.
    assert parse_model_spec("ollama/llama3.1@http://127.0.0.1:11434/v1").name == "ollama/llama3.1"


def test_unknown_provider_needs_a_url() -> None:
    spec = parse_model_spec("myserver/tiny@https://models.example.org/v1")
    assert (spec.provider, spec.base_url, spec.api_key_env) == ("myserver", "https://models.example.org/v1", None)
    with pytest.raises(InputError) as info:
        parse_model_spec("myserver/tiny")
    assert "myserver" in str(info.value)
    assert info.value.choices is not None and "openai" in info.value.choices and "vllm" in info.value.choices


def test_at_sign_without_url_belongs_to_the_model() -> None:
    spec = parse_model_spec("openrouter/anthropic/claude-3@20240229")
    assert spec.model == "anthropic/claude-3@20240229" and spec.base_url == PROVIDERS["openrouter"].base_url


@pytest.mark.parametrize("text", ["", "openai", "openai/", "/gpt-4o", "vllm/m@ftp://host/v1", "x/y@http://"])
def test_malformed_specs(text: str) -> None:
    with pytest.raises(InputError):
        parse_model_spec(text)


def test_local_target() -> None:
    spec = parse_model_spec("local/SmolLM2")
    assert (spec.provider, spec.model, spec.base_url, spec.is_local) == ("local", "smollm2", None, True)
    assert spec.name == "local/smollm2"
    # Started on some port, it keeps its name (the port must not leak into cache keys).
    assert spec.with_base_url("http://127.0.0.1:41234/v1").name == "local/smollm2"
    with pytest.raises(InputError) as info:
        parse_model_spec("local/llama-70b")
    assert info.value.choices == ["smollm2"]
    # With a URL it is a llama.cpp server the user started (the alternative where no wheel exists).
    assert parse_model_spec("local/smollm2@http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"


def test_api_key_env_override_and_keys_never_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-very-secret-value-123456"
    monkeypatch.setenv("MY_OPENAI_KEY", secret)
    spec = parse_model_spec("openai/gpt-4o-mini", api_key_env="MY_OPENAI_KEY")
    assert spec.api_key_env == "MY_OPENAI_KEY" and spec.key_required
    assert spec.api_key() == secret and spec.missing_key() is None
    for text in (repr(spec), str(spec), spec.name, json.dumps(spec.model_dump()), spec.model_dump_json()):
        assert secret not in text
    monkeypatch.delenv("MY_OPENAI_KEY")
    assert spec.api_key() is None and spec.missing_key() == "MY_OPENAI_KEY"  # read now, not remembered
    no_key = parse_model_spec("openai/gpt-4o-mini", api_key_env=None)
    assert no_key.api_key_env is None and not no_key.key_required and no_key.missing_key() is None
    with pytest.raises(InputError):
        parse_model_spec("openai/gpt-4o-mini", api_key_env="not a name")


def test_spec_is_immutable() -> None:
    spec = parse_model_spec("openai/gpt-4o-mini")
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type is an implementation detail
        spec.model = "other"  # type: ignore[misc]
