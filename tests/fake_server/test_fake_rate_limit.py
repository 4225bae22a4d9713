"""The fake server's rate limits as the official SDKs see them (retries off): real 429s with Retry-After
over the requests and token limits, the providers' rate-limit headers on every response, one bucket per
API key and model, and limits that change mid-run. Time is a clock the test moves: nothing sleeps."""

from __future__ import annotations

import math
import time
from datetime import datetime

import anthropic
import openai
import pytest

from hilbert.errors import UserError
from hilbert.testing.fake_server import EchoResponder, FakeServer
from hilbert.testing.fake_server.ratelimit import RateLimiter, RateLimitSpec, go_duration, rfc3339

TASK = [{"role": "user", "content": "Fix the failing test."}]
LONG = "word " * 380  # about 380 tokens, as the fake server counts them


class Clock:
    """Monotonic seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _limiter(spec: str, clock: Clock) -> RateLimiter:
    parsed = RateLimitSpec.parse(spec)
    assert parsed is not None
    return RateLimiter(parsed, clock=clock)


def _server(spec: str, clock: Clock) -> FakeServer:
    return FakeServer(EchoResponder(), rate_limit=_limiter(spec, clock))


def _openai(server: FakeServer, key: str = "k") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key=key, max_retries=0)


def _anthropic(server: FakeServer, key: str = "k") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def _unix(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def test_over_rpm_openai_gets_a_429_with_retry_after_and_the_counters_go_down() -> None:
    clock = Clock()
    with _server("rpm=3", clock) as server, _openai(server) as client:
        answers = [
            client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)
            for _ in range(3)
        ]
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=TASK)
        clock.now += 20  # one request back, at 3 a minute
        again = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)
    assert answers[0].parse().choices[0].message.content == "echo: Fix the failing test."
    assert [a.headers["x-ratelimit-remaining-requests"] for a in answers] == ["2", "1", "0"]
    assert {a.headers["x-ratelimit-limit-requests"] for a in answers} == {"3"}
    assert [a.headers["x-ratelimit-reset-requests"] for a in answers] == ["20s", "40s", "1m0s"]
    assert "x-ratelimit-limit-tokens" not in answers[0].headers  # no token limit was set
    error = refused.value
    assert error.status_code == 429 and error.response.headers["retry-after"] == "20"
    assert error.response.headers["retry-after-ms"] == "20000"
    assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert isinstance(error.body, dict) and error.body["code"] == "rate_limit_exceeded"
    assert "requests per minute" in error.body["message"]
    assert again.headers["x-ratelimit-remaining-requests"] == "0"
    assert [(r["status"], r["fault"]) for r in server.requests] == [
        (200, None),
        (200, None),
        (200, None),
        (429, "rate_limit"),
        (200, None),
    ]


def test_anthropic_buckets_are_per_api_key_and_model_with_rfc3339_resets() -> None:
    clock = Clock()
    before = time.time()
    limiter = _limiter("rpm=2", clock)
    after = time.time()
    with (
        FakeServer(EchoResponder(), rate_limit=limiter) as server,
        _anthropic(server, "alice") as alice,
        _anthropic(server, "bob") as bob,
    ):
        first = alice.messages.with_raw_response.create(model="fake-claude", max_tokens=50, messages=TASK)
        alice.messages.create(model="fake-claude", max_tokens=50, messages=TASK)
        with pytest.raises(anthropic.RateLimitError) as refused:
            alice.messages.create(model="fake-claude", max_tokens=50, messages=TASK)
        other_model = alice.messages.with_raw_response.create(
            model="fake-claude-2", max_tokens=50, messages=TASK
        )
        with bob.messages.stream(model="fake-claude", max_tokens=50, messages=TASK) as stream:
            streamed = stream.response.headers
            assert stream.get_final_message().content[0].text == "echo: Fix the failing test."
    assert first.headers["anthropic-ratelimit-requests-limit"] == "2"
    assert first.headers["anthropic-ratelimit-requests-remaining"] == "1"
    assert before + 30 <= _unix(first.headers["anthropic-ratelimit-requests-reset"]) <= after + 31
    headers = refused.value.response.headers
    assert refused.value.status_code == 429 and headers["retry-after"] == "30"
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert before + 60 <= _unix(headers["anthropic-ratelimit-requests-reset"]) <= after + 61
    assert refused.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": refused.value.body["error"]["message"]},
    }
    assert other_model.headers["anthropic-ratelimit-requests-remaining"] == "1"  # a model of its own
    assert streamed["anthropic-ratelimit-requests-remaining"] == "1"  # a key of its own, on a stream too


def test_input_tokens_per_minute_refuse_the_prompt_that_does_not_fit() -> None:
    clock = Clock()
    with _server("itpm=1000", clock) as server, _openai(server) as client:
        first = client.responses.with_raw_response.create(model="fake-codex", input=LONG)
        cost = 1000 - int(first.headers["x-ratelimit-remaining-tokens"])
        second = client.responses.with_raw_response.create(model="fake-codex", input=LONG)
        with pytest.raises(openai.RateLimitError) as refused:
            client.responses.create(model="fake-codex", input=LONG)
        client.responses.create(model="fake-codex", input="short")  # a small prompt still fits
    assert first.parse().usage.input_tokens == cost > 300
    assert (
        first.headers["x-ratelimit-limit-tokens"] == "1000"
        and "x-ratelimit-limit-requests" not in first.headers
    )
    assert int(second.headers["x-ratelimit-remaining-tokens"]) == 1000 - 2 * cost
    wanted = (cost - (1000 - 2 * cost)) * 60 / 1000
    assert refused.value.response.headers["retry-after"] == str(math.ceil(wanted - 1e-9))
    assert "input tokens per minute" in refused.value.body["message"]


def test_output_tokens_are_counted_after_the_reply_and_their_debt_refuses_the_next() -> None:
    clock = Clock()
    with _server("itpm=100000,otpm=50", clock) as server, _anthropic(server) as client:
        first = client.messages.with_raw_response.create(
            model="fake-claude",
            max_tokens=500,
            messages=[{"role": "user", "content": LONG}],
        )
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.create(model="fake-claude", max_tokens=50, messages=TASK)
    output = first.parse().usage.output_tokens
    assert output > 50  # one reply larger than the whole output limit: it passes, and leaves a debt
    assert first.headers["anthropic-ratelimit-output-tokens-limit"] == "50"
    assert first.headers["anthropic-ratelimit-output-tokens-remaining"] == "0"
    input_left = int(first.headers["anthropic-ratelimit-input-tokens-remaining"])
    assert 99_000 < input_left < 100_000
    assert first.headers["anthropic-ratelimit-tokens-limit"] == "100050"  # input and output together
    assert first.headers["anthropic-ratelimit-tokens-remaining"] == str(input_left)
    wanted = (1 - (50 - output)) * 60 / 50  # until one output token is back
    headers = refused.value.response.headers
    assert headers["retry-after"] == str(math.ceil(wanted - 1e-9))
    assert "output tokens per minute" in refused.value.body["error"]["message"]


def test_the_limits_change_mid_run() -> None:
    clock = Clock()
    with _server("rpm=4,change_after=30,factor=0.5", clock) as server, _openai(server) as client:

        def limit_and_remaining() -> tuple[str, str]:
            raw = client.chat.completions.with_raw_response.create(
                model="fake-gpt", messages=TASK, stream=True
            )
            assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices).startswith(
                "echo"
            )
            return raw.headers["x-ratelimit-limit-requests"], raw.headers["x-ratelimit-remaining-requests"]

        seen = [limit_and_remaining()]
        clock.now += 29
        seen.append(limit_and_remaining())
        clock.now += 2  # 31 s after the first request: the limits are halved
        seen += [limit_and_remaining(), limit_and_remaining()]
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=TASK)
    assert seen == [("4", "3"), ("4", "3"), ("2", "1"), ("2", "0")]
    assert refused.value.response.headers["retry-after"] == "30"  # one request at 2 a minute
    assert refused.value.response.headers["x-ratelimit-limit-requests"] == "2"


def test_a_burst_of_a_few_seconds_holds_that_much_of_the_limit() -> None:
    clock = Clock()
    with _server("rpm=60,burst=2", clock) as server, _openai(server) as client:
        answers = [
            client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)
            for _ in range(2)
        ]
        with pytest.raises(openai.RateLimitError) as refused:  # two seconds of 60 a minute: 2 requests
            client.chat.completions.create(model="fake-gpt", messages=TASK)
        clock.now += 10  # refilled to its two, not to ten
        later = [client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)]
        later += [client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)]
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="fake-gpt", messages=TASK)
    assert [a.headers["x-ratelimit-limit-requests"] for a in answers] == ["60", "60"]  # still per minute
    assert [a.headers["x-ratelimit-remaining-requests"] for a in answers + later] == ["1", "0", "1", "0"]
    assert answers[1].headers["x-ratelimit-reset-requests"] == "2s"  # until the burst is whole again
    assert refused.value.response.headers["retry-after-ms"] == "1000"


def test_without_rate_limits_no_headers_are_sent() -> None:
    with FakeServer(EchoResponder()) as server, _openai(server) as client:
        raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=TASK)
    assert not [name for name in raw.headers if "ratelimit" in name]
    assert server.app.rate_limits is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rpm=lots", "not a number"),
        ("rpm=0", "a whole number >= 1"),
        ("rpm=2.5", "a whole number >= 1"),
        ("tpm=100", "unknown rate-limit setting 'tpm'"),
        ("rpm", "needs a value"),
        ("factor=0.5,change_after=3", "sets no limit"),
        ("rpm=60,change_after=30", "go together"),
        ("rpm=60,change_after=30,factor=0", "above zero"),
        ("rpm=60,change_after=-1,factor=2", "zero or more"),
        ("rpm=60,burst=0", "above zero"),
    ],
)
def test_a_bad_spec_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as error:
        FakeServer(EchoResponder(), rate_limit=spec)
    assert error.value.hint and "--rate-limit" in error.value.hint and "\n" not in str(error.value)


def test_specs_read_back_and_none_is_no_limit() -> None:
    spec = RateLimitSpec.parse(" RPM=600, itpm=200000,otpm=40000,change_after=30,factor=0.5,burst=5 ")
    assert str(spec) == "rpm=600,itpm=200000,otpm=40000,change_after=30,factor=0.5,burst=5"
    assert RateLimitSpec.parse("none") is None and RateLimitSpec.parse(None) is None


def test_reset_formats_are_the_providers() -> None:
    assert [go_duration(s) for s in (0, 0.012, 1, 1.5, 360, 3600.25)] == [
        "0s",
        "12ms",
        "1s",
        "1.5s",
        "6m0s",
        "1h0m0.25s",
    ]
    assert rfc3339(1755780059.2) == "2025-08-21T12:41:00Z"
