"""Provider errors become hilbert errors a person can act on, with one-line messages and hints.

The bodies are what each provider sends (Anthropic's `{"type": "error", "error": {...}}`, OpenAI's
`{"error": {...}}`), served over loopback so the real SDKs parse them.
"""

from __future__ import annotations

import asyncio

import pytest
from error_server import Scripted, error_server, url

from hilbert.errors import (
    ContextOverflowError,
    HilbertError,
    ModelError,
    RefusedError,
    UnknownModelError,
)
from hilbert.models import Message, RetryPolicy, make_model

PROTOCOLS = ("anthropic", "openai", "openai-responses")
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02)


def _anthropic_error(kind: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _openai_error(message: str, code: str | None, kind: str = "invalid_request_error") -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _call(protocol: str, *script: Scripted, name: str = "some-model") -> tuple[HilbertError, int]:
    with error_server(*script) as server:
        base = url(server, "" if protocol == "anthropic" else "/v1")
        model = make_model(f"{protocol}:{name}@{base}", env={}, retry=FAST)
        with pytest.raises(HilbertError) as caught:
            asyncio.run(model.complete([Message("system", "be brief"), Message("user", "hi")]))
        return caught.value, len(server.requests)


def _body(protocol: str, anthropic_body: object, openai_body: object) -> object:
    return anthropic_body if protocol == "anthropic" else openai_body


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_refused_with_a_hint_to_check_the_variable(protocol: str, status: int) -> None:
    body = _body(
        protocol,
        _anthropic_error("authentication_error", "invalid x-api-key"),
        _openai_error("Incorrect API key provided: sk-...\nYou can find your key at ...", "invalid_api_key"),
    )
    error, tries = _call(protocol, Scripted(status, body))
    assert isinstance(error, RefusedError)
    assert tries == 1
    variable = "ANTHROPIC_API_KEY" if protocol == "anthropic" else "OPENAI_API_KEY"
    assert error.hint == f"check {variable}"
    assert f"HTTP {status}" in error.message
    assert "\n" not in str(error)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unknown_model_is_a_model_error_naming_it(protocol: str) -> None:
    body = _body(
        protocol,
        _anthropic_error("not_found_error", "model: claude-nine"),
        _openai_error(
            "The model `claude-nine` does not exist or you do not have access to it.", "model_not_found"
        ),
    )
    error, tries = _call(protocol, Scripted(404, body), name="claude-nine")
    assert type(error) is UnknownModelError and isinstance(error, ModelError)
    assert error.message.startswith(f"unknown model {protocol}:claude-nine")
    assert error.hint and "name" in error.hint
    assert tries == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_context_overflow_says_to_compact_or_pick_a_larger_model(protocol: str) -> None:
    body = _body(
        protocol,
        _anthropic_error("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"),
        _openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in "
            "131072 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
    )
    error, tries = _call(protocol, Scripted(400, body))
    assert isinstance(error, ContextOverflowError)
    assert error.hint and "compact" in error.hint and "larger" in error.hint
    assert tries == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_other_bad_requests_are_refused_without_retrying(protocol: str) -> None:
    body = _body(
        protocol,
        _anthropic_error("invalid_request_error", "messages.0.content: Field required"),
        _openai_error("Invalid type for 'messages[0].content'.", "invalid_type"),
    )
    error, tries = _call(protocol, Scripted(400, body))
    assert type(error) is RefusedError
    assert "HTTP 400" in error.message
    assert tries == 1


@pytest.mark.parametrize("protocol", ["openai", "openai-responses"])
def test_an_exhausted_quota_is_refused_not_retried(protocol: str) -> None:
    body = _openai_error("You exceeded your current quota, please check your plan.", "insufficient_quota")
    error, tries = _call(protocol, Scripted(429, body, headers={"retry-after": "0"}))
    assert isinstance(error, RefusedError)
    assert "quota" in error.message
    assert tries == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_errors_that_persist_exhaust_the_retries(protocol: str) -> None:
    body = _body(
        protocol,
        _anthropic_error("api_error", "Internal server error"),
        _openai_error("boom", None, "server_error"),
    )
    error, tries = _call(protocol, *[Scripted(500, body)] * 3)
    assert type(error) is ModelError
    assert tries == 3
    assert "gave up after 3 tries" in error.message
    assert "HTTP 500" in error.message
    assert "\n" not in str(error)


def test_an_overloaded_event_inside_an_anthropic_stream_is_retried() -> None:
    overloaded = Scripted(events=(("error", _anthropic_error("overloaded_error", "Overloaded")),))
    error, tries = _call("anthropic", overloaded, overloaded, overloaded)
    assert type(error) is ModelError
    assert tries == 3
    assert "Overloaded" in error.message


def test_a_failed_response_event_is_classified_like_a_status() -> None:
    failed = {
        "type": "response.failed",
        "sequence_number": 1,
        "response": {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "failed",
            "model": "some-model",
            "output": [],
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window."},
        },
    }
    error, tries = _call("openai-responses", Scripted(events=(("response.failed", failed),)))
    assert isinstance(error, ContextOverflowError)
    assert tries == 1
