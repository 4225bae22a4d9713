"""The rate-limit governor through real HTTP: official SDK clients against the fake server's rate limits
and faults, the governor's state in a real SQLite file. Two `Governor`s on one file stand for two
processes here (the real two-process test is `test_governor_processes.py`)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from hilbert.errors import ModelError, RefusedError, UserError
from hilbert.models import RetryPolicy, make_model
from hilbert.models.governor import (
    FallbackModel,
    Governor,
    GovernorStore,
    Knobs,
    Outcome,
    check_fallbacks,
)
from hilbert.models.governor.headers import readings
from hilbert.models.governor.pacing import Admit, BucketState, Wait, decide, report
from hilbert.models.types import Message
from hilbert.models.wire import WireModel
from hilbert.settings import Settings
from hilbert.testing.fake_server import EchoResponder, FakeServer
from hilbert.testing.fake_server.faults import FaultSpec
from hilbert.testing.fake_server.ratelimit import RateLimiter, RateLimitSpec
from hilbert.ui.edge import Models

TASK = [Message("user", "Fix the failing test.")]
FAST = RetryPolicy(max_attempts=1)


def _governor(path: Path, *, breaker_failures: int = 5, breaker_cooldown_s: float = 30.0) -> Governor:
    knobs = Knobs(breaker_failures=breaker_failures, breaker_cooldown_s=breaker_cooldown_s)
    return Governor(GovernorStore(path), knobs, seed=1)


def _model(
    server: FakeServer, governor: Governor, retry: RetryPolicy = FAST, protocol: str = "anthropic"
) -> WireModel:
    url = server.base_url if protocol == "anthropic" else server.openai_base_url
    env = {"ANTHROPIC_API_KEY": "key-1", "OPENAI_API_KEY": "key-1"}
    return make_model(f"{protocol}:fake-claude@{url}", env=env, governor=governor, retry=retry)


def _completions(server: FakeServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"].endswith(("/messages", "/chat/completions"))]


def test_a_429_halves_the_window_once_and_successes_grow_it_back() -> None:
    knobs = Knobs(max_concurrency=16, initial_concurrency=8)
    state, now = BucketState.new(knobs, 1000.0), 1000.0
    state.slow_start = False  # past its first decrease (the test above shows the slow start)
    leases = [decide(state, knobs, now, 10, f"l{i}", 1, "h") for i in range(9)]
    assert [type(d) for d in leases] == [Admit] * 8 + [Wait]  # the window holds 8
    for i in range(8):  # one burst refuses all eight: halved once, not eight times
        report(state, knobs, now + 1, f"l{i}", Outcome("throttled", retry_after_s=2.0))
    assert state.limit == 4.0 and state.paused_until == now + 3
    assert isinstance(decide(state, knobs, now + 2, 10, "x", 1, "h"), Wait)  # paused for everyone
    now += 3
    grown = []
    for round_ in range(40):  # full windows of successes: +1 each window, up to the ceiling
        ids = [f"r{round_}-{i}" for i in range(int(state.limit))]
        assert all(isinstance(decide(state, knobs, now, 10, i, 1, "h"), Admit) for i in ids)
        for lease_id in ids:
            report(state, knobs, now, lease_id, Outcome("ok"))
        grown.append(state.limit)
    assert grown[:3] == [5.0, 6.0, 7.0] and grown[-1] == 16.0  # the ceiling holds


def test_a_fresh_window_doubles_each_round_trip_until_the_first_decrease() -> None:
    knobs = Knobs(max_concurrency=64, initial_concurrency=4)
    state, now = BucketState.new(knobs, 1000.0), 1000.0
    seen = []
    for round_ in range(4):
        ids = [f"r{round_}-{i}" for i in range(int(state.limit))]
        assert all(isinstance(decide(state, knobs, now, 10, i, 1, "h"), Admit) for i in ids)
        for lease_id in ids:
            report(state, knobs, now, lease_id, Outcome("ok"))
        seen.append(state.limit)
    assert seen == [8.0, 16.0, 32.0, 64.0]
    assert isinstance(decide(state, knobs, now, 10, "x0", 1, "h"), Admit)
    report(state, knobs, now + 1, "x0", Outcome("overloaded"))
    assert state.limit == 32.0 and not state.slow_start


def test_retry_after_seen_by_one_caller_pauses_another(tmp_path: Path) -> None:
    async def scenario(server: FakeServer) -> None:
        first, second = _governor(tmp_path / "g.db"), _governor(tmp_path / "g.db")  # two "processes"
        with pytest.raises(ModelError, match="429"):
            await _model(server, first).complete(TASK)
        server.app.faults = FaultSpec.parse(None)
        reply = await _model(server, second).complete(TASK)
        assert reply.attempts == 1 and reply.message.content.startswith("echo")
        notices = first.store.notices()
        assert [n.kind for n in notices] == ["governor_throttled"]

    with FakeServer(EchoResponder(), faults="429=1.0,retry_after=1") as server:
        asyncio.run(scenario(server))
        refused, answered = _completions(server)
    assert (refused["status"], answered["status"]) == (429, 200)
    assert answered["time"] - refused["time"] >= 0.95  # the second caller waited out the first one's 429


def test_limits_are_learned_from_the_response_headers(tmp_path: Path) -> None:
    clock = [1000.0]
    spec = RateLimitSpec.parse("rpm=3,itpm=100000,otpm=50000")
    assert spec is not None
    limiter = RateLimiter(spec, clock=lambda: clock[0])

    async def scenario(server: FakeServer) -> BucketState:
        governor = _governor(tmp_path / "g.db")
        model = _model(server, governor)
        for _ in range(3):
            await model.complete(TASK)
        key = next(iter(governor._queues))[1]
        state = governor.store.state(key)
        assert state is not None
        return state

    with FakeServer(EchoResponder(), rate_limit=limiter) as server:
        state = asyncio.run(scenario(server))
        last = _completions(server)[-1]
    assert {name: level.limit for name, level in state.levels.items()} == {
        "rpm": 3,
        "itpm": 100000,
        "otpm": 50000,
    }
    assert all(level.learned for level in state.levels.values())
    assert last["usage"]["input_tokens"] > 0 and state.levels["rpm"].level < 1  # what the server said
    # nobody told it rpm=3: the fourth call now waits for the bucket instead of drawing a 429
    fourth = decide(state, Knobs(), time.time(), 10, "fourth", 1, "h")
    assert isinstance(fourth, Wait) and fourth.why == "rpm bucket empty" and 15 < (fourth.seconds or 0) <= 20


def test_both_providers_headers_are_read() -> None:
    openai = {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
              "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "29000",
              "x-ratelimit-reset-tokens": "2s"}  # fmt: skip
    anthropic = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                 "anthropic-ratelimit-input-tokens-limit": "80000",
                 "anthropic-ratelimit-input-tokens-remaining": "79000",
                 "anthropic-ratelimit-output-tokens-limit": "16000",
                 "anthropic-ratelimit-output-tokens-remaining": "-3",
                 "anthropic-ratelimit-tokens-limit": "96000",
                 "anthropic-ratelimit-tokens-remaining": "95000"}  # fmt: skip
    assert readings(openai) == {"rpm": (500, 499), "tpm": (30000, 29000)}
    assert readings(anthropic) == {"rpm": (50, 0), "itpm": (80000, 79000), "otpm": (16000, 0)}
    assert readings({"x-ratelimit-limit-requests": "lots"}) == {} == readings(None)


def test_the_breaker_opens_after_consecutive_failures_and_a_probe_closes_it(tmp_path: Path) -> None:
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.01)

    async def scenario(server: FakeServer) -> list[str]:
        governor = _governor(tmp_path / "g.db", breaker_failures=3, breaker_cooldown_s=1.0)
        model = _model(server, governor, retry, protocol="openai")
        with pytest.raises(ModelError, match="gave up after 3 tries"):
            await model.complete(TASK)
        server.app.faults = FaultSpec.parse(None)
        reply = await model.complete(TASK)  # waits for the cool-down, goes as the probe, closes it
        assert reply.attempts == 1
        return [f"{n.kind}: {n.why}" for n in governor.store.notices()]

    with FakeServer(EchoResponder(), faults="500=1.0") as server:
        notices = asyncio.run(scenario(server))
        requests = _completions(server)
    assert [r["status"] for r in requests] == [500, 500, 500, 200]
    assert requests[3]["time"] - requests[2]["time"] >= 0.95  # no call went while it was open
    assert notices == [
        "governor_paused: circuit breaker open for 1 s after 3 consecutive failures: new calls wait,"
        " then one probe",
        "governor_resumed: circuit breaker closed: a probe call succeeded",
    ]


def test_a_fallback_chain_into_the_judges_family_is_refused_in_one_line(tmp_path: Path) -> None:
    settings = Settings.of(
        {
            "model": "anthropic:claude-sonnet-4-5",
            "judge_model": "openai:gpt-5",
            "governor.fallback": {"worker": ["openai:qwen3@http://127.0.0.1:8000/v1"]},
            "home": str(tmp_path),
        }
    )
    with pytest.raises(UserError) as refused:
        Models(settings).check()
    assert "\n" not in str(refused.value) and str(refused.value).startswith(
        "governor.fallback.worker: openai:qwen3@http://127.0.0.1:8000/v1 is of the openai family,"
        " the judge's (openai:gpt-5)"
    )
    families = {"openai:qwen3": "qwen"}  # mapped to its own family, the same chain is fine
    check_fallbacks(settings.governor.fallback, judge="openai:gpt-5", reviewers=(), families=families)
    with pytest.raises(UserError, match="a reviewer's"):
        check_fallbacks({"lead": ["openai:x"]}, judge=None, reviewers=("openai:gpt-5",))
    with pytest.raises(UserError, match="unknown role 'judge'"):
        check_fallbacks({"judge": ["anthropic:x"]}, judge=None, reviewers=())


def test_a_fallback_chain_asks_the_next_model_only_when_one_fails_for_good() -> None:
    async def scenario(down: FakeServer, up: FakeServer, unknown: FakeServer) -> None:
        env = {"ANTHROPIC_API_KEY": "k"}
        chain = FallbackModel(
            [
                make_model(f"anthropic:down@{down.base_url}", env=env, retry=FAST),
                make_model(f"anthropic:up@{up.base_url}", env=env, retry=FAST),
            ]
        )
        reply = await chain.complete(TASK)
        assert reply.message.content.startswith("echo") and reply.model == "up"
        refusing = FallbackModel(
            [
                make_model(f"anthropic:gone@{unknown.base_url}", env=env, retry=FAST),
                make_model(f"anthropic:up@{up.base_url}", env=env, retry=FAST),
            ]
        )
        with pytest.raises(RefusedError, match="unknown model"):  # the request's own fault: no fallback
            await refusing.complete(TASK)

    with (
        FakeServer(EchoResponder(), faults="500=1.0") as down,
        FakeServer(EchoResponder()) as up,
        FakeServer(EchoResponder(), faults="404=1.0") as unknown,
    ):
        asyncio.run(scenario(down, up, unknown))
        assert len(_completions(up)) == 1 and len(_completions(down)) == 1
