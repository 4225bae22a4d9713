"""The rate-limit governor against fixed concurrency: 128 workers, three limit profiles.

    python bench/governor.py                 # all three profiles, every row (≈17 min on 2 cores)
    python bench/governor.py --quick         # a smoke: one short profile, two rows

Each row starts a fresh fake server in its own process (`python -m hilbert.testing.fake_server`,
echo responder, Anthropic protocol, `--rate-limit` of the profile, `--record` to count what it
refused) and runs `--workers` workers in this process until the profile's work is done. Every row
does the same work, so that one figure compares them:

- the same calls: the profile's work is a list of tasks, which the workers take one at a time; a task
  is `--calls` model calls on one growing conversation (each call sends the conversation so far plus a
  new request), and each new request is 2 to 18 sentences of ~17 tokens, its length drawn from a
  random source seeded by (`--seed`, task, step) — task T's calls are the same in every row;
- the same rule for a refused call: it is retried until it completes, never abandoned — through
  `make_model`'s own retry (Retry-After honoured, as hilbert's per-call retry does) with its try limit
  raised to `MAX_TRIES` for every row (a call that fails otherwise, say a 400, stops its worker:
  `failed`, its task `unfinished`, the first error on stderr);
- the same amount: a row ends when its last call completes (a row not done in `ROW_LIMIT_S` is
  stopped and its unfinished tasks printed). Counting calls in a fixed time window instead let a
  row that starved its large calls (a token bucket lets small ones through first) complete more,
  smaller calls in the window and leave the large ones for after it.

Rows:
- `fixed N`: at most N calls at once (a semaphore around `complete`), no governor — what a fleet of
  N workers does today;
- `governor`: no semaphore, every call through a `Governor` with the default `[governor]` settings
  (the same on every profile; nothing tells it the limits: it learns them from the headers).

Profiles (limits per API key and model; each bucket holds `burst=2` seconds of its refill, so the
first minute is not one free burst), sized so that the best rows take about 40 s:
- `rpm`: 1,200 requests per minute, 400 tasks;
- `tpm`: 270,000 input tokens per minute (requests unlimited), 220 tasks;
- `halving`: 1,200 requests per minute, halved 25 s after the first request, 480 tasks (≈70 s).

Figures per row: **goodput**, the model calls completed from a warm-up of `--warmup` s to the row's
last completion, per minute (the issue's measure: completed model calls per minute); the input tokens
of those calls per minute; refused (429s / all completion requests the server saw, the whole row);
p99 task time (tasks ended after the warm-up); the row's time; `failed` (above); and on `halving` the
re-convergence time: from the change to the first moment after which every 5-s window's completed
calls stay within 15 % of the new limit with no 429, up to when the last task was taken (after that
workers go idle; the bench knows the new limit, the governor does not). The last line gives, per
profile, the governor's goodput over the best fixed row's (`ratio_P`), its goodput (`goodput_P`),
refused share (`refused_P`), p99 task time (`p99_task_s_P`), and the re-convergence time. `--trace
FILE` writes the governor row's state every 0.5 s (JSON lines) to see why it paces as it does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from hilbert.errors import ModelError
from hilbert.models import make_model
from hilbert.models.governor import Governor, governor_from
from hilbert.models.governor.store import read_file
from hilbert.models.types import Message
from hilbert.settings import GovernorSettings
from hilbert.testing.fake_server.process import start_process


@dataclass(frozen=True)
class Profile:
    spec: str
    tasks: int  # the row's work: the best rows take about 40 s (halving: 70 s)
    change_s: float | None = None  # when the limits change, after the server's first request
    after_per_min: float | None = None  # the calls a minute the new limit allows (to measure only)


PROFILES = {
    "rpm": Profile("rpm=1200,burst=2", 400),
    "tpm": Profile("itpm=270000,burst=2", 220),
    "halving": Profile("rpm=1200,burst=2,change_after=25,factor=0.5", 480, change_s=25, after_per_min=600),
}
ROWS = ("8", "16", "64", "128", "governor")
ROW_LIMIT_S = 400.0  # a row not done by then is stopped (its unfinished tasks are printed)
MAX_TRIES = 1000  # every row's per-call try limit: a refused call is retried, never abandoned
LATENCY = "ttft=uniform:0.5:1.5"
SENTENCE = "Please read the module, run its tests and fix the failing assertion."
SAMPLE_S = 0.5  # --trace: how often the governor's state is written


def request(seed: int, task: int, step: int) -> str:
    """The new request of one call: 2 to 18 sentences, the same in every row (seeded by its place)."""
    return " ".join([SENTENCE] * random.Random(f"{seed}/{task}/{step}").randint(2, 18))


@dataclass
class Row:
    profile: str
    row: str
    goodput: float = 0.0
    refused: float = 0.0
    requests: int = 0
    p99_task_s: float = math.nan
    failed: int = 0
    unfinished: int = 0  # tasks not done within ROW_LIMIT_S
    elapsed: float = 0.0  # from the start to the last call's completion
    reconverge_s: float | None = None
    started: float = 0.0  # when the workers started (unix seconds)
    last_taken: float = 0.0  # when the last task was taken (until then no worker was idle)
    calls: list[float] = field(default_factory=list)  # when each call completed (unix seconds)
    tokens: list[int] = field(default_factory=list)  # the input tokens of each completed call
    input_tpm: float = 0.0  # input tokens of the calls completed after the warm-up, per minute
    tasks: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of completed tasks


async def drive(
    url: str, row: str, tasks: int, args: argparse.Namespace, home: Path, trace: IO[str] | None
) -> Row:
    """Run the workers until `tasks` tasks are done; the completion times of calls, the tasks."""
    governor = governor_from(GovernorSettings(path=home / "governor.db"), home) if row == "governor" else None
    model = make_model(
        f"anthropic:bench-model@{url}",
        env={"ANTHROPIC_API_KEY": "bench"},
        governor=governor,
        max_attempts=MAX_TRIES,
    )
    gate = asyncio.Semaphore(int(row)) if governor is None else None
    result = Row("", row, started=time.time())
    asking = 0  # calls asked for and not yet returned (waiting for the governor, or on the wire)

    async def call(messages: list[Message]) -> Message:
        """One model call; hilbert's retry tries it until it completes (`MAX_TRIES`, every row)."""
        nonlocal asking
        asking += 1
        try:
            if gate is None:
                reply = await model.complete(messages)
            else:
                async with gate:
                    reply = await model.complete(messages)
        except ModelError as error:  # not a refusal (those are retried): the worker stops, said once
            result.failed += 1
            if result.failed == 1:
                print(f"failed: {error}", file=sys.stderr)
            raise
        finally:
            asking -= 1
        result.calls.append(time.time())
        result.tokens.append(reply.usage.input_tokens)
        return reply.message

    work = iter(range(tasks))  # the row's tasks, shared: each worker takes the next one

    async def worker() -> None:
        for task in work:
            started = time.time()
            if task == tasks - 1:
                result.last_taken = started
            messages = [Message("user", f"task {task}: {request(args.seed, task, 0)}")]
            for step in range(args.calls):
                messages.append(await call(messages))
                messages.append(Message("user", f"step {step + 1}: {request(args.seed, task, step + 1)}"))
            result.tasks.append((started, time.time()))

    running = [asyncio.create_task(worker()) for _ in range(args.workers)]
    sampler = (
        asyncio.create_task(sample(governor, trace, result, lambda: asking))
        if governor is not None and trace is not None
        else None
    )
    await asyncio.wait(running, timeout=ROW_LIMIT_S)
    result.unfinished = tasks - len(result.tasks)
    for job in [*running, *([sampler] if sampler else [])]:
        job.cancel()
    await asyncio.gather(*running, *([sampler] if sampler else []), return_exceptions=True)
    if governor is not None:
        governor.close()
    return result


async def sample(governor: Governor, trace: IO[str], result: Row, asking: Callable[[], int]) -> None:
    """Every `SAMPLE_S`, the governor's bucket as its file holds it and the bench's own counts."""
    while True:
        await asyncio.sleep(SAMPLE_S)
        now = time.time()
        buckets, _ = read_file(governor.store.path, lambda key: True)
        for key, state in buckets.items():
            levels = {name: [round(b.level), round(b.limit)] for name, b in state.levels.items()}
            line = {
                "t": round(now - result.started, 2),
                "key": key,
                "window": state.limit,
                "in_flight": len(state.leases),
                "asking": asking(),
                "completed": len(result.calls),
                "paused_s": round(max(0.0, state.paused_until - now), 2),
                "token_ratio": round(state.token_ratio, 3),
                "slow_start": state.slow_start,
                "levels": levels,
            }
            trace.write(json.dumps(line) + "\n")
        trace.flush()


def _p99(values: list[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def run_row(
    profile_name: str, profile: Profile, row: str, args: argparse.Namespace, trace: IO[str] | None
) -> Row:
    with tempfile.TemporaryDirectory(prefix="bench-governor-") as tmp:
        record = Path(tmp) / "requests.jsonl"
        server, url = start_process(
            "--responder", "echo", "--latency", LATENCY, "--rate-limit", profile.spec, "--record", str(record)
        )
        try:
            result = asyncio.run(drive(url, row, profile.tasks, args, Path(tmp), trace))
        finally:
            server.terminate()
            server.wait(timeout=30)
        seen = [json.loads(line) for line in record.read_text().splitlines()]
    completions = [(r["time"], r["status"]) for r in seen if r["path"].endswith("/messages")]
    result.profile = profile_name
    began = result.started
    warm_from, ends = began + args.warmup, max(result.calls, default=began)
    measured = max(1e-9, ends - warm_from)
    result.goodput = sum(1 for t in result.calls if warm_from <= t) / measured * 60
    counted = [n for t, n in zip(result.calls, result.tokens, strict=True) if warm_from <= t]
    result.input_tpm = sum(counted) / measured * 60
    result.p99_task_s = _p99([end - start for start, end in result.tasks if end >= warm_from])
    result.elapsed = ends - began
    result.requests = len(completions)
    refused = [t for t, status in completions if status == 429]
    result.refused = len(refused) / max(1, len(completions))
    if profile.change_s is not None and profile.after_per_min and completions:
        change = completions[0][0] + profile.change_s
        result.reconverge_s = _reconverge(result.calls, refused, change, result.last_taken, profile)
    return result


def _reconverge(
    calls: list[float], refused: list[float], change: float, end: float, profile: Profile
) -> float | None:
    """Seconds from the change until every later 5-s window is within 15 % of the new limit, 429-free."""
    assert profile.after_per_min is not None
    ideal = profile.after_per_min / 60 * 5
    window, step = 5.0, 0.5
    starts = [change + i * step for i in range(int((end - window - change) / step) + 1)]
    good = [
        abs(sum(1 for c in calls if s <= c < s + window) - ideal) <= 0.15 * ideal
        and not any(s <= r < s + window for r in refused)
        for s in starts
    ]
    for index in range(len(starts)):
        if all(good[index:]):
            return starts[index] - change
    return None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=128)
    parser.add_argument("--calls", type=int, default=2, help="model calls per task")
    parser.add_argument("--seed", type=int, default=17, help="seeds the requests' lengths (every row alike)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds not counted in goodput")
    parser.add_argument("--profiles", default=",".join(PROFILES), help="a comma-separated subset")
    parser.add_argument("--rows", default=",".join(ROWS), help="fixed concurrencies and/or governor")
    parser.add_argument("--tasks", type=int, help="every profile's work, in tasks (default: the profile's)")
    parser.add_argument(
        "--trace", type=Path, help="write the governor row's state every 0.5 s here (JSON lines)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke: rpm only, fixed 16 and governor, 8 s")
    args = parser.parse_args()
    if args.quick:
        args.profiles, args.rows, args.tasks, args.warmup, args.workers = "rpm", "16,governor", 60, 2, 32
    profiles = {name: PROFILES[name] for name in args.profiles.split(",")}
    if args.tasks:
        profiles = {name: replace(p, tasks=args.tasks) for name, p in profiles.items()}
    rows = args.rows.split(",")
    print(
        "| profile | row | goodput (calls/min) | input tokens/min | refused | requests | p99 task (s)"
        " | row time (s) | failed | unfinished | re-converged (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results: dict[str, list[Row]] = {}
    trace = args.trace.open("w") if args.trace else None
    for name, profile in profiles.items():
        for row in rows:
            if trace is not None:
                trace.write(json.dumps({"profile": name, "row": row}) + "\n")
            result = run_row(name, profile, row, args, trace)
            results.setdefault(name, []).append(result)
            label = "governor" if row == "governor" else f"fixed {row}"
            reconverged = "-" if result.reconverge_s is None else f"{result.reconverge_s:.1f}"
            if profile.change_s is not None and result.reconverge_s is None:
                reconverged = "never"
            print(
                f"| {name} | {label} | {result.goodput:.0f} | {result.input_tpm:,.0f} | {result.refused:.1%}"
                f" | {result.requests} | {result.p99_task_s:.1f} | {result.elapsed:.1f}"
                f" | {result.failed} | {result.unfinished} | {reconverged} |",
                flush=True,
            )
    if trace is not None:
        trace.close()
    print(" ".join(_summary(name, rows) for name, rows in results.items()))
    return 0


def _summary(name: str, rows: list[Row]) -> str:
    governed = [r for r in rows if r.row == "governor"]
    fixed = [r for r in rows if r.row != "governor"]
    if not governed:
        return f"best_fixed_{name}={max(r.goodput for r in fixed):.0f}"
    governor = governed[0]
    parts = [f"ratio_{name}={governor.goodput / max(r.goodput for r in fixed):.3f}"] if fixed else []
    parts += [
        f"goodput_{name}={governor.goodput:.0f}",
        f"refused_{name}={governor.refused:.4f}",
        f"p99_task_s_{name}={governor.p99_task_s:.1f}",
    ]
    if PROFILES[name].change_s is not None:
        reconverged = "never" if governor.reconverge_s is None else f"{governor.reconverge_s:.1f}"
        parts.append(f"reconverge_s_{name}={reconverged}")
    return " ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
