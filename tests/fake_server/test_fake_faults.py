"""Faults and latency as the official SDKs observe them (retries off)."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import anthropic
import httpx2
import openai
import pytest
from fake_server_support import SCRIPT

from hilbert.errors import UserError
from hilbert.testing.fake_server import FakeServer, ScriptedResponder

TASK = [{"role": "user", "content": "Fix the failing test."}]


def _policy() -> ScriptedResponder:
    return ScriptedResponder.from_turns(SCRIPT)


def _anthropic(server: FakeServer, **options: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="k", max_retries=0, **options)


def _openai(server: FakeServer, **options: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0, **options)


def test_429_carries_retry_after_on_both_protocols() -> None:
    with FakeServer(_policy(), faults="429=1,retry_after=2") as server:
        with _anthropic(server) as client, pytest.raises(anthropic.RateLimitError) as anthropic_error:
            client.messages.create(model="fake-claude", max_tokens=100, messages=TASK)
        with _openai(server) as client, pytest.raises(openai.RateLimitError) as openai_error:
            client.chat.completions.create(model="fake-gpt", messages=TASK, stream=True)
    for error in (anthropic_error.value, openai_error.value):
        assert error.status_code == 429 and error.response.headers["retry-after"] == "2"
    assert anthropic_error.value.body["error"]["type"] == "rate_limit_error"
    assert openai_error.value.body["code"] == "rate_limit_exceeded"
    assert [r["fault"] for r in server.requests] == ["429", "429"]


def test_529_is_overloaded_in_each_protocols_shape() -> None:
    with FakeServer(_policy(), faults="529=1") as server:
        with (
            _anthropic(server) as client,
            pytest.raises(anthropic.OverloadedError) as anthropic_error,
            client.messages.stream(model="fake-claude", max_tokens=100, messages=TASK) as stream,
        ):
            stream.get_final_message()
        with _openai(server) as client, pytest.raises(openai.InternalServerError) as openai_error:
            client.responses.create(model="fake-codex", input="hi")
    assert anthropic_error.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded (fake server fault 529)."},
    }
    assert openai_error.value.status_code == 529 and openai_error.value.body["code"] == "overloaded"


def test_truncated_streams_and_bodies_break_the_connection() -> None:
    with FakeServer(_policy(), faults="truncate=1") as server:
        with (
            _anthropic(server) as client,
            pytest.raises(httpx2.RemoteProtocolError),  # the anthropic SDK lets the transport error through
            client.messages.stream(model="fake-claude", max_tokens=100, messages=TASK) as stream,
        ):
            stream.get_final_message()
        with _openai(server) as client:
            with pytest.raises(openai.APIConnectionError):
                list(client.chat.completions.create(model="fake-gpt", messages=TASK, stream=True))
            with pytest.raises(openai.APIConnectionError):
                client.responses.create(model="fake-codex", input="hi")
    assert {r["status"] for r in server.requests} == {200}


def test_badjson_breaks_one_tool_calls_arguments() -> None:
    with FakeServer(_policy(), faults="badjson=1") as server:
        with _openai(server) as client:
            message = client.chat.completions.create(model="fake-gpt", messages=TASK).choices[0].message
        with (
            _anthropic(server) as client,
            pytest.raises(ValueError, match="Unable to parse tool parameter JSON"),
            client.messages.stream(model="fake-claude", max_tokens=100, messages=TASK) as stream,
        ):
            stream.get_final_message()
    broken, fine = (call.function.arguments for call in message.tool_calls)
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken)
    assert json.loads(fine) == {"command": "pytest -q"}
    assert server.requests[0]["reply"]["tool_calls"][0]["arguments"] == {
        "path": "src/app.py"
    }  # recorded as given


def test_hang_holds_the_request_until_the_client_gives_up() -> None:
    with FakeServer(_policy(), faults="hang=1") as server:
        with _openai(server, timeout=0.3) as client, pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="fake-gpt", messages=TASK)
        with _anthropic(server, timeout=0.3) as client, pytest.raises(anthropic.APITimeoutError):
            client.messages.create(model="fake-claude", max_tokens=100, messages=TASK, stream=True)
        # one more hung request still open while the server stops: stopping must not wait for it
        with _openai(server, timeout=30) as client:
            stopped = time.monotonic()
            server.stop()
            with pytest.raises(openai.APIConnectionError):
                client.chat.completions.create(model="fake-gpt", messages=TASK)
    assert time.monotonic() - stopped < 5
    assert [(r["fault"], r["status"]) for r in server.requests] == [("hang", None), ("hang", None)]


def test_hang_gives_up_after_its_limit() -> None:
    with (
        FakeServer(_policy(), faults="hang=1,hang_s=0.2") as server,
        _openai(server, timeout=10) as client,
        pytest.raises(openai.APIStatusError) as error,
    ):
        client.chat.completions.create(model="fake-gpt", messages=TASK)
    assert error.value.status_code == 504


def test_faults_are_drawn_from_the_seed() -> None:
    def statuses(seed: int) -> list[int]:
        with FakeServer(_policy(), faults="500=0.5", seed=seed) as server, _openai(server) as client:
            for _ in range(12):
                with contextlib.suppress(openai.InternalServerError):
                    client.chat.completions.create(model="fake-gpt", messages=TASK)
            return [r["status"] for r in server.requests]

    first = statuses(7)
    assert first == statuses(7) and {200, 500} <= set(first)


def test_latency_delays_the_first_token_and_streams_in_chunks() -> None:
    with FakeServer(_policy(), latency="ttft=0.3,tps=400,chunk=2") as server, _openai(server) as client:
        started = time.monotonic()
        stream = client.chat.completions.create(model="fake-gpt", messages=TASK, stream=True)
        first_text_at = None
        pieces = []
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first_text_at = first_text_at or time.monotonic() - started
                pieces.append(chunk.choices[0].delta.content)
    assert first_text_at is not None and first_text_at >= 0.3
    assert len(pieces) >= 4 and "".join(pieces) == "Two things to check first."


@pytest.mark.parametrize(
    ("faults", "latency", "message"),
    [
        ("429=2", None, "between 0 and 1"),
        ("429=0.6,500=0.6", None, "add up to more than 1"),
        ("boom=0.1", None, "unknown fault 'boom'"),
        (None, "ttft=soon", "not a number"),
        (None, "ttft=gamma:1:2", "bad latency ttft distribution"),
        (None, "speedy", "unknown latency preset"),
        (None, "tps=0", "above zero"),
    ],
)
def test_bad_specs_are_user_errors(faults: str | None, latency: str | None, message: str) -> None:
    with pytest.raises(UserError, match=message) as error:
        FakeServer(_policy(), faults=faults, latency=latency)
    assert error.value.hint and "\n" not in str(error.value)


def test_presets_and_distributions_parse() -> None:
    with FakeServer(_policy(), latency="realistic", faults="none") as server:
        assert str(server.app.latency) == "realistic"
    FakeServer(
        _policy(), latency="ttft=lognormal:0.4:0.5,tps=uniform:50:90", faults="hang=0.01,truncate=0.05"
    )


def test_a_client_killed_mid_request_is_no_error_of_the_server(caplog: pytest.LogCaptureFixture) -> None:
    """A client that dies while sending its request (an orchestrator killed by the resume drill) leaves
    no traceback in the server's log, and the server goes on answering."""
    with FakeServer(_policy()) as server:
        with socket.create_connection((server.host, server.port)) as raw:
            raw.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"model": "fake-gpt", '
            )  # then the client is gone, its body never finished
        with _openai(server) as client:
            answer = client.chat.completions.create(model="fake-gpt", messages=TASK)
    assert answer.choices[0].message is not None
    assert not [r for r in caplog.records if "Exception in ASGI application" in r.getMessage()]
