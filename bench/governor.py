"""The rate-limit governor against fixed concurrency: 128 workers, three limit profiles.

    python bench/governor.py                 # all three profiles, every row (≈19 min on 2 cores)
    python bench/governor.py --quick         # a smoke: one short profile, two rows

Each row starts a fresh fake server in its own process (`python -m hilbert.testing.fake_server`,
echo responder, Anthropic protocol, `--rate-limit` of the profile, `--record` to count what it
refused) and runs `--workers` workers in this process for the profile's length. A worker runs tasks
back to back; a task is `--calls` model calls on one growing conversation (each call sends the
conversation so far plus a new ~150-token request, so input tokens grow as an agent's do), each call
through `make_model` with hilbert's retries (6 tries, Retry-After honoured). Rows:

- `fixed N`: at most N calls at once (a semaphore around `complete`), no governor — what a fleet of
  N workers does today;
- `governor`: no semaphore, every call through a `Governor` with the default `[governor]` settings
  (the same on every profile; nothing tells it the limits: it learns them from the headers).

Profiles (limits per API key and model; each bucket holds `burst=2` seconds of its refill, so the
first minute is not one free burst):
- `rpm`: 1,200 requests per minute;
- `tpm`: 270,000 input tokens per minute (requests unlimited);
- `halving`: 1,200 requests per minute, halved 25 s after the first request.

When a row's time is up its workers start no new task and finish the one they are on (at most
`DRAIN_S` more; nothing completed then is counted as the row's goodput, but it tells which tasks
completed). Figures per row: goodput (the calls completed between a warm-up of `--warmup` s and the
row's end, per minute, of the tasks that completed: a task abandoned when one of its calls failed for
good counts none — its work is thrown away and the worker starts a new task, as a fleet's attempt is
thrown away when its model fails for good); all calls completed in that time per minute, abandoned
tasks' included; the input tokens of the completed
calls per minute (calls differ in size: a task's second call sends three times the first one's
prompt, so under a token limit a row that abandons tasks after their first call completes more,
smaller calls — more calls, not more work);
refused (429s / all completion requests the server saw, the whole row), p99 task time (tasks ended
after the warm-up), calls that failed for good, and on `halving` the re-convergence time: from the
change to the first moment after which every 5-s window's goodput stays within 15 % of the new limit
with no 429 (the bench knows the new limit; the governor does not). The last line gives, per profile,
the governor's goodput over the best fixed row's (`ratio_P`), the same over all completed calls
(`calls_ratio_P`, the measure before abandoned work was taken out), its refused share, and the
re-convergence time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.errors import ModelError
from hilbert.models import make_model
from hilbert.models.governor import governor_from
from hilbert.models.types import Completion, Message
from hilbert.settings import GovernorSettings
from hilbert.testing.fake_server.process import start_process


@dataclass(frozen=True)
class Profile:
    spec: str
    seconds: float
    change_s: float | None = None  # when the limits change, after the server's first request
    after_per_min: float | None = None  # the calls a minute the new limit allows (to measure only)


PROFILES = {
    "rpm": Profile("rpm=1200,burst=2", 40),
    "tpm": Profile("itpm=270000,burst=2", 40),
    "halving": Profile("rpm=1200,burst=2,change_after=25,factor=0.5", 70, change_s=25, after_per_min=600),
}
ROWS = ("8", "16", "64", "128", "governor")
DRAIN_S = 30.0  # at the end of a row, how long its workers may take to finish the task they are on
LATENCY = "ttft=uniform:0.5:1.5"
REQUEST = " ".join(["Please read the module, run its tests and fix the failing assertion."] * 10)


@dataclass
class Row:
    profile: str
    row: str
    goodput: float = 0.0
    refused: float = 0.0
    requests: int = 0
    p99_task_s: float = math.nan
    failed: int = 0
    reconverge_s: float | None = None
    started: float = 0.0  # when the workers started (unix seconds)
    calls: list[float] = field(default_factory=list)  # when each call completed (unix seconds)
    useful: list[float] = field(default_factory=list)  # when each call of a completed task completed
    all_calls: float = 0.0  # every call completed after the warm-up, per minute (abandoned tasks' too)
    tokens: list[int] = field(default_factory=list)  # the input tokens of each completed call
    input_tpm: float = 0.0  # input tokens of the calls completed after the warm-up, per minute
    tasks: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of completed tasks


async def drive(url: str, row: str, seconds: float, workers: int, calls: int, home: Path) -> Row:
    """Run the workers for `seconds`; the completion times of calls, the tasks, the failures."""
    governor = governor_from(GovernorSettings(path=home / "governor.db"), home) if row == "governor" else None
    model = make_model(f"anthropic:bench-model@{url}", env={"ANTHROPIC_API_KEY": "bench"}, governor=governor)
    gate = asyncio.Semaphore(int(row)) if governor is None else None
    result = Row("", row, started=time.time())

    async def call(messages: list[Message]) -> Completion:
        if gate is None:
            return await model.complete(messages)
        async with gate:
            return await model.complete(messages)

    closing = asyncio.Event()  # the row's time is up: finish the task on hand, start no other

    async def worker(number: int) -> None:
        task = 0
        while not closing.is_set():
            started = time.time()
            messages = [Message("user", f"worker {number} task {task}: {REQUEST}")]
            done: list[float] = []  # when this task's calls completed
            for step in range(calls):
                try:
                    reply = await call(messages)
                except ModelError:
                    result.failed += 1
                    break
                done.append(time.time())
                result.calls.append(done[-1])
                result.tokens.append(reply.usage.input_tokens)
                messages += [reply.message, Message("user", f"step {step + 1}: {REQUEST}")]
            else:
                result.tasks.append((started, time.time()))
                result.useful += done
            task += 1

    running = [asyncio.create_task(worker(n)) for n in range(workers)]
    await asyncio.sleep(seconds)
    closing.set()
    await asyncio.wait(running, timeout=DRAIN_S)
    for job in running:
        job.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    if governor is not None:
        governor.close()
    return result


def _p99(values: list[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def run_row(profile_name: str, profile: Profile, row: str, args: argparse.Namespace) -> Row:
    with tempfile.TemporaryDirectory(prefix="bench-governor-") as tmp:
        record = Path(tmp) / "requests.jsonl"
        server, url = start_process(
            "--responder", "echo", "--latency", LATENCY, "--rate-limit", profile.spec, "--record", str(record)
        )
        try:
            result = asyncio.run(drive(url, row, profile.seconds, args.workers, args.calls, Path(tmp)))
        finally:
            server.terminate()
            server.wait(timeout=30)
        seen = [json.loads(line) for line in record.read_text().splitlines()]
    completions = [(r["time"], r["status"]) for r in seen if r["path"].endswith("/messages")]
    result.profile = profile_name
    began = result.started
    warm_from, ends = began + args.warmup, began + profile.seconds
    measured = profile.seconds - args.warmup
    result.all_calls = sum(1 for t in result.calls if warm_from <= t < ends) / measured * 60
    result.goodput = sum(1 for t in result.useful if warm_from <= t < ends) / measured * 60
    counted = [n for t, n in zip(result.calls, result.tokens, strict=True) if warm_from <= t < ends]
    result.input_tpm = sum(counted) / measured * 60
    result.p99_task_s = _p99([end - start for start, end in result.tasks if end >= warm_from])
    result.requests = len(completions)
    refused = [t for t, status in completions if status == 429]
    result.refused = len(refused) / max(1, len(completions))
    if profile.change_s is not None and profile.after_per_min and completions:
        change = completions[0][0] + profile.change_s
        result.reconverge_s = _reconverge(result.calls, refused, change, began + profile.seconds, profile)
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
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds not counted in goodput")
    parser.add_argument("--profiles", default=",".join(PROFILES), help="a comma-separated subset")
    parser.add_argument("--rows", default=",".join(ROWS), help="fixed concurrencies and/or governor")
    parser.add_argument("--seconds", type=float, help="every profile this long (halving: change at 40 %%)")
    parser.add_argument("--quick", action="store_true", help="a smoke: rpm only, fixed 16 and governor, 8 s")
    args = parser.parse_args()
    if args.quick:
        args.profiles, args.rows, args.seconds, args.warmup, args.workers = "rpm", "16,governor", 8, 2, 32
    profiles = {name: PROFILES[name] for name in args.profiles.split(",")}
    if args.seconds:
        profiles = {name: _shortened(p, args.seconds) for name, p in profiles.items()}
    rows = args.rows.split(",")
    header = "| profile | row | goodput (calls/min) | all calls/min | input tokens/min | refused | requests"
    print(header + " | p99 task (s) | failed | re-converged (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    results: dict[str, list[Row]] = {}
    for name, profile in profiles.items():
        for row in rows:
            result = run_row(name, profile, row, args)
            results.setdefault(name, []).append(result)
            label = "governor" if row == "governor" else f"fixed {row}"
            reconverged = "-" if result.reconverge_s is None else f"{result.reconverge_s:.1f}"
            if profile.change_s is not None and result.reconverge_s is None:
                reconverged = "never"
            print(
                f"| {name} | {label} | {result.goodput:.0f} | {result.all_calls:.0f}"
                f" | {result.input_tpm:,.0f} | {result.refused:.1%}"
                f" | {result.requests} |"
                f" {result.p99_task_s:.1f} | {result.failed} | {reconverged} |",
                flush=True,
            )
    print(" ".join(_summary(name, rows) for name, rows in results.items()))
    return 0


def _shortened(profile: Profile, seconds: float) -> Profile:
    change = None if profile.change_s is None else round(seconds * 0.4, 1)
    spec = profile.spec.replace("change_after=25", f"change_after={change}") if change else profile.spec
    return Profile(spec, seconds, change, profile.after_per_min)


def _summary(name: str, rows: list[Row]) -> str:
    governed = [r for r in rows if r.row == "governor"]
    fixed = [r for r in rows if r.row != "governor"]
    if not governed:
        return f"best_fixed_{name}={max(r.goodput for r in fixed):.0f}"
    governor = governed[0]
    best = max((r.goodput for r in fixed), default=math.nan)
    best_calls = max((r.all_calls for r in fixed), default=math.nan)
    parts = [
        f"ratio_{name}={governor.goodput / best:.3f}" if fixed else f"goodput_{name}={governor.goodput:.0f}",
        f"calls_ratio_{name}={governor.all_calls / best_calls:.3f}" if fixed else "",
        f"refused_{name}={governor.refused:.4f}",
    ]
    if PROFILES[name].change_s is not None:
        reconverged = "never" if governor.reconverge_s is None else f"{governor.reconverge_s:.1f}"
        parts.append(f"reconverge_s_{name}={reconverged}")
    return " ".join(part for part in parts if part)


if __name__ == "__main__":
    sys.exit(main())
