"""Retries against the fake server's injected faults: the call succeeds after transient failures,
waits as long as the server asked, and gives up with a clear error when the failures persist.

Faults are drawn per request from the server's seeded RNG: with seed 0 and a rate of 0.5 the first two
requests are faulted and the third is not. Each test checks what the server saw (its request log),
so a change in the draw shows up as a failed assertion, not a silently weaker test."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from error_server import Scripted, error_server, url

from hilbert.errors import ModelError
from hilbert.models import Completion, Message, Model, RetryPolicy, make_model
from hilbert.testing.fake_server import FakeServer, ScriptedResponder

PROTOCOLS = ("anthropic", "openai", "openai-responses")
ANSWER = "The fix is to pass tzinfo through; the answer is a one-line change in parse_date."
RETRIES = RetryPolicy(max_attempts=6, base_delay_s=0.01, max_delay_s=0.02)


def call(server: FakeServer, protocol: str, **options: Any) -> tuple[Completion, float]:
    base = server.base_url if protocol == "anthropic" else server.openai_base_url
    options.setdefault("retry", RETRIES)
    model: Model = make_model(f"{protocol}:fake-model@{base}", env={}, **options)
    started = time.monotonic()
    done = asyncio.run(model.complete([Message("user", "Why do the tests fail?")]))
    return done, time.monotonic() - started


def faults_seen(server: FakeServer) -> list[str | None]:
    return [r["fault"] for r in server.requests]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rate_limits_are_retried_after_the_delay_the_server_asked_for(protocol: str) -> None:
    with FakeServer(
        ScriptedResponder.from_turns([ANSWER]), faults="429=0.5,retry_after=0.15", seed=0
    ) as server:
        done, elapsed = call(server, protocol)
        seen = faults_seen(server)
    assert done.message.content == ANSWER
    assert seen == ["429", "429", None]
    assert done.attempts == 3
    assert elapsed >= 2 * 0.15  # waited the Retry-After each time, not the 0.01 s backoff


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", ["500", "529", "truncate"])
def test_server_errors_and_cut_streams_are_retried_until_a_reply_arrives(protocol: str, fault: str) -> None:
    with FakeServer(ScriptedResponder.from_turns([ANSWER]), faults=f"{fault}=0.5", seed=0) as server:
        done, _ = call(server, protocol)
        seen = faults_seen(server)
    assert seen == [fault, fault, None]
    assert done.message.content == ANSWER
    assert done.stop_reason == "end_turn"
    assert done.attempts == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_hung_server_times_out_and_is_retried(protocol: str) -> None:
    with FakeServer(ScriptedResponder.from_turns([ANSWER]), faults="hang=0.5", seed=0) as server:
        done, elapsed = call(server, protocol, timeout_s=0.2)
        seen = faults_seen(server)
    assert seen == ["hang", "hang", None]
    assert done.message.content == ANSWER
    assert done.attempts == 3
    assert elapsed >= 2 * 0.2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_persistent_rate_limits_exhaust_the_tries_with_a_clear_error(protocol: str) -> None:
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.01)
    with FakeServer(ScriptedResponder.from_turns([ANSWER]), faults="429=1.0,retry_after=0.05") as server:
        with pytest.raises(ModelError) as caught:
            call(server, protocol, retry=retry)
        requests = len(server.requests)
    assert requests == 3
    message = str(caught.value)
    assert f"{protocol}:fake-model: gave up after 3 tries" in message
    assert "HTTP 429" in message and "Rate limit" in message
    assert "\n" not in message


def test_the_time_budget_cuts_a_long_retry_after_short() -> None:
    retry = RetryPolicy(max_attempts=10, max_total_s=0.5)
    with FakeServer(ScriptedResponder.from_turns([ANSWER]), faults="429=1.0,retry_after=30") as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            call(server, "openai", retry=retry)
        elapsed = time.monotonic() - started
    assert "time limit reached" in caught.value.message
    assert elapsed < 5


# A stream that closes cleanly before its final event (a proxy or server that gives up politely)
# is as incomplete as one cut mid-chunk; the fake server only does the latter, so these are scripted.
_COMPLETE: dict[str, tuple[tuple[str | None, Any], ...]] = {
    "anthropic": (
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 7, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ),
    "openai": (
        (
            None,
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}
                ],
            },
        ),
        (
            None,
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            },
        ),
        (None, "[DONE]"),
    ),
    "openai-responses": (
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {
                    "id": "r1",
                    "object": "response",
                    "created_at": 0,
                    "status": "in_progress",
                    "model": "m",
                    "output": [],
                },
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 1,
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": "ok",
            },
        ),
        (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": 2,
                "response": {
                    "id": "r1",
                    "object": "response",
                    "created_at": 0,
                    "status": "completed",
                    "model": "m",
                    "output": [],
                    "usage": {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9},
                },
            },
        ),
    ),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_stream_that_ends_before_its_final_event_is_retried(protocol: str) -> None:
    complete = _COMPLETE[protocol]
    partial = Scripted(events=complete[:-2])
    with error_server(partial, Scripted(events=complete)) as server:
        base = url(server, "" if protocol == "anthropic" else "/v1")
        model = make_model(f"{protocol}:m@{base}", env={}, retry=RETRIES)
        done = asyncio.run(model.complete([Message("user", "hi")]))
    assert (done.message.content, done.attempts, done.stop_reason) == ("ok", 2, "end_turn")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_streams_that_keep_ending_early_exhaust_the_tries(protocol: str) -> None:
    partial = Scripted(events=_COMPLETE[protocol][:-2])
    with error_server(partial, partial, partial) as server:
        base = url(server, "" if protocol == "anthropic" else "/v1")
        model = make_model(
            f"{protocol}:m@{base}", env={}, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01)
        )
        with pytest.raises(ModelError) as caught:
            asyncio.run(model.complete([Message("user", "hi")]))
    assert "gave up after 3 tries" in caught.value.message
    assert "stream ended early" in caught.value.message
