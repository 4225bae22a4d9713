"""Model names as a person types them: parsing, keys, base URLs and the errors a person can fix."""

from __future__ import annotations

import pytest

from hilbert.errors import UserError
from hilbert.models import (
    AnthropicMessagesModel,
    ModelSpec,
    OpenAIChatModel,
    OpenAIResponsesModel,
    make_model,
    parse_model_name,
    resolve_endpoint,
)
from hilbert.models.names import PLACEHOLDER_API_KEY


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", "claude-sonnet-4-5")),
        ("openai:gpt-5", ModelSpec("openai", "gpt-5")),
        ("openai-responses:gpt-5", ModelSpec("openai-responses", "gpt-5")),
        ("  OpenAI:gpt-5 ", ModelSpec("openai", "gpt-5")),
        ("openai-chat:gpt-4.1", ModelSpec("openai", "gpt-4.1")),
        ("openai:qwen3@http://127.0.0.1:8000/v1", ModelSpec("openai", "qwen3", "http://127.0.0.1:8000/v1")),
        (
            "openai:llama3:8b@http://localhost:11434/v1/",
            ModelSpec("openai", "llama3:8b", "http://localhost:11434/v1"),
        ),
        (
            "anthropic:fake@https://proxy.example/anthropic",
            ModelSpec("anthropic", "fake", "https://proxy.example/anthropic"),
        ),
        ("openai-responses:m@http://[::1]:9/v1", ModelSpec("openai-responses", "m", "http://[::1]:9/v1")),
        # a name may contain '@' when what follows is not a URL (Vertex-style dated names)
        ("anthropic:claude-sonnet-4-5@20250929", ModelSpec("anthropic", "claude-sonnet-4-5@20250929")),
    ],
)
def test_parse_accepts_the_documented_forms(text: str, expected: ModelSpec) -> None:
    assert parse_model_name(text) == expected


def test_spec_prints_back_as_typed() -> None:
    spec = parse_model_name("openai:qwen3@http://127.0.0.1:8000/v1")
    assert str(spec) == "openai:qwen3@http://127.0.0.1:8000/v1"
    assert spec.label == "openai:qwen3"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpt-5", "has no provider"),
        ("claude-sonnet-4-5", "has no provider"),
        ("gemini:pro", "unknown model provider 'gemini'"),
        ("openai:", "empty name"),
        ("anthropic:   ", "empty name"),
        ("openai:@http://127.0.0.1:8000/v1", "empty name"),
        ("openai:qwen@localhost:8000/v1", "must start with http:// or https://"),
        ("openai:qwen@ftp://host/v1", "must start with http:// or https://"),
    ],
)
def test_parse_rejects_with_one_line_and_the_accepted_forms(text: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_model_name(text)
    assert says in caught.value.message
    assert "\n" not in str(caught.value)
    assert caught.value.hint is not None
    if says != "must start with http:// or https://":
        assert "anthropic:claude-sonnet-4-5" in caught.value.hint
        assert "openai:NAME@http://host:port/v1" in caught.value.hint


def test_keys_and_urls_come_from_the_usual_variables() -> None:
    env = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a", "OPENAI_BASE_URL": "http://gw:1/v1/"}
    openai_endpoint = resolve_endpoint(parse_model_name("openai:gpt-5"), env)
    assert (openai_endpoint.api_key, openai_endpoint.base_url) == ("sk-o", "http://gw:1/v1")
    responses_endpoint = resolve_endpoint(parse_model_name("openai-responses:gpt-5"), env)
    assert responses_endpoint.api_key == "sk-o"
    anthropic_endpoint = resolve_endpoint(parse_model_name("anthropic:claude-haiku-4-5"), env)
    assert (anthropic_endpoint.api_key, anthropic_endpoint.base_url) == ("sk-a", "https://api.anthropic.com")
    assert anthropic_endpoint.key_var == "ANTHROPIC_API_KEY"


def test_an_explicit_url_beats_the_base_url_variable() -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://gw:1/v1"}
    endpoint = resolve_endpoint(parse_model_name("openai:m@http://127.0.0.1:5/v1"), env)
    assert endpoint.base_url == "http://127.0.0.1:5/v1"
    assert endpoint.api_key == "k"


@pytest.mark.parametrize(
    ("name", "var"),
    [("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("openai:gpt-5", "OPENAI_API_KEY")],
)
def test_a_missing_key_names_the_variable_to_set(name: str, var: str) -> None:
    with pytest.raises(UserError) as caught:
        make_model(name, env={"OPENAI_BASE_URL": "http://gw:1/v1", var: "  "})
    assert var in caught.value.message
    assert f"export {var}" in (caught.value.hint or "")


def test_a_local_server_needs_no_key() -> None:
    endpoint = resolve_endpoint(parse_model_name("openai:m@http://127.0.0.1:5/v1"), {})
    assert endpoint.api_key == PLACEHOLDER_API_KEY


def test_make_model_picks_the_adapter_of_the_protocol() -> None:
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    assert isinstance(make_model("anthropic:claude-sonnet-4-5", env=env), AnthropicMessagesModel)
    assert isinstance(make_model("openai:gpt-5", env=env), OpenAIChatModel)
    assert isinstance(make_model(ModelSpec("openai-responses", "gpt-5"), env=env), OpenAIResponsesModel)
    assert make_model("openai:gpt-5", env=env).name == "openai:gpt-5"
