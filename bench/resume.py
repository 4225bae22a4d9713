"""What a resume costs: a fleet killed K times (SIGKILL at seeded points of its log) and resumed with
`hilbert run --resume` each time, through the real command line and the fake server.

    python bench/resume.py --bugs 40 --workers 32 --kills 20 [--seed 1] [--keep DIR]

Each process life gets `HILBERT_CRASH_AT=KIND:K` (`hilbert.fleet.crash`) drawn from
`random.Random(seed)` over `model_call`, `tool_result` (K from 1 to 12), `task_state`, `gate_verdict`
and `merged` (K up to 6 or 3), with a guard of four model calls per worker so that every life ends
soon; after the last kill the run goes to its end. The fake server (in this process,
latency `ttft=0.05,tps=2000`, faults `429=0.05,529=0.02`) keeps every request it answered; the log
keeps every `model_call`. What a kill costs:

- the time from the restart (the resume's process started) to its first new `model_call` committed,
  and from its `fleet_resumed` event (imports, lock, leftovers killed, reconciliation done);
- tokens spent again: the requests the server answered that the log never recorded (the server's
  conversations minus the logged ones, as multisets: the call in flight at the kill, sent again by
  the resumed worker), plus every token of attempts that were `restarted` rather than continued.
  Tokens are uncached input + output; cache reads are counted apart (`*_cache_read`).

Figures (last line, key=value): workers, bugs, kills, lives, tasks_done, restart_to_call_p50_s,
restart_to_call_max_s, resumed_to_call_p50_s, calls, unlogged_calls, restarted_attempts, tokens,
respent_tokens, respent_share (respent / tokens, the aim is <= 0.05), cache_read, respent_cache_read,
wall_s, failed (1 if the run did not end with every task merged).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import hilbert.sim  # noqa: F401  (registers the engineer with the fake server)
from hilbert.commands import command_env
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.models.types import Message
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.openai_chat_wire import parse

KINDS = {"model_call": 12, "tool_result": 12, "task_state": 6, "gate_verdict": 3, "merged": 3}  # kind: most K
LATENCY = "ttft=0.05,tps=2000"
FAULTS = "429=0.05,529=0.02"


def plan_of(project: SampleProject) -> Plan:
    tasks: list[Task] = []
    for bug in project.bugs:
        test_file = f"tests/test_{Path(bug.file).stem}.py"
        source = (project.path / test_file).read_text()
        tests = re.findall(rf"^def (test_{bug.function}_\w+)\(", source, re.MULTILINE)
        tests = tests or [test.split("::")[-1] for test in bug.tests]
        verify = "python -m pytest -q " + " ".join(f"{test_file}::{t}" for t in tests)
        tasks.append(
            Task(
                id=f"T{len(tasks) + 1}",
                title=f"fix {bug.function} in {bug.file}",
                verify=verify,
                claims=(bug.file,),
                allow_shared_claims=True,
            )
        )
    return Plan(goal="make the test suite pass", tasks=tuple(tasks))


def wire(messages: list[Message] | tuple[Message, ...], system: str | None = None) -> tuple[Any, ...]:
    """What both sides agree on: role, text and tool-call ids of each message, the system prompt first."""
    if system is None:
        system, messages = (
            (messages[0].content, messages[1:]) if messages[0].role == "system" else ("", messages)
        )
    rows = [("system", system, ())]
    for m in messages:
        rows.append(
            (
                m.role,
                m.content,
                tuple(c.id for c in m.tool_calls) + ((m.tool_call_id,) if m.tool_call_id else ()),
            )
        )
    return tuple(rows)


def tokens(usage: dict[str, int]) -> tuple[int, int]:
    """(uncached input + output, cache reads) of one call."""
    cached = int(usage.get("cache_read_tokens", 0))
    return int(usage.get("input_tokens", 0)) - cached + int(usage.get("output_tokens", 0)), cached


def measure(
    events: list[Event], store: EventStore, requests: list[dict[str, Any]], starts: list[float]
) -> dict[str, Any]:
    answered = [
        r
        for r in requests
        if r.get("status") == 200 and r.get("protocol") == "openai-chat" and r.get("usage")
    ]
    served: Counter[tuple[Any, ...]] = Counter()
    usage_of: dict[tuple[Any, ...], dict[str, int]] = {}
    for request in answered:
        conversation = parse(request["body"]).conversation
        key = wire(conversation.messages, conversation.system)
        served[key] += 1
        usage_of[key] = request["usage"]
    calls = [e for e in events if e.kind == "model_call"]
    logged: Counter[tuple[Any, ...]] = Counter(
        wire(store.get_messages(c.data.get("sent") or c.data["request"])) for c in calls
    )
    unlogged = served - logged
    total = sum(tokens(r["usage"])[0] for r in answered)
    cache_read = sum(tokens(r["usage"])[1] for r in answered)
    respent = sum(tokens(usage_of[k])[0] * n for k, n in unlogged.items())
    respent_cached = sum(tokens(usage_of[k])[1] * n for k, n in unlogged.items())
    restarted = {
        e.data["worker"]: e.id for e in events if e.kind == "attempt_resumed" and e.data["how"] == "restarted"
    }
    for call in calls:
        if call.agent in restarted and call.id < restarted[call.agent]:
            spent, cached = tokens(call.data.get("usage") or {})
            respent, respent_cached = respent + spent, respent_cached + cached
    # restart -> the first model call that life committed
    resumes = [e for e in events if e.kind == "fleet_resumed"]
    to_call, from_resumed = [], []
    for start, resumed in zip(starts[1:], resumes, strict=False):
        first = next((c for c in calls if c.id > resumed.id), None)
        if first is not None and (
            resumed is resumes[-1] or first.id < resumes[resumes.index(resumed) + 1].id
        ):
            to_call.append(first.time - start)
            from_resumed.append(first.time - resumed.time)
    return {
        "restart_to_call_p50_s": f"{statistics.median(to_call):.2f}" if to_call else "nan",
        "restart_to_call_max_s": f"{max(to_call):.2f}" if to_call else "nan",
        "resumed_to_call_p50_s": f"{statistics.median(from_resumed):.2f}" if from_resumed else "nan",
        "calls": len(calls),
        "unlogged_calls": unlogged.total(),
        "restarted_attempts": len(restarted),
        "tokens": total,
        "respent_tokens": respent,
        "respent_share": f"{respent / total:.4f}" if total else "nan",
        "cache_read": cache_read,
        "respent_cache_read": respent_cached,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bugs", type=int, default=40)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        home = args.keep or Path(scratch)
        home.mkdir(parents=True, exist_ok=True)
        return drill(home, args)


def drill(home: Path, args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    project = generate_sample_project(
        home / "repo", args.seed, bugs=args.bugs, modules=(args.bugs + 2) // 3 + 1
    )
    for git in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *git], cwd=project.path, check=True)
    plan = plan_of(project)
    (home / "PLAN.md").write_text(write_plan(plan))
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(home / "hilbert")}
    db = home / "hilbert" / "hilbert.db"
    began = time.monotonic()
    starts: list[float] = []
    lives = 0
    with FakeServer("engineer", seed=args.seed, latency=LATENCY, faults=FAULTS) as server:
        model = [
            "--model",
            f"openai:fake@{server.openai_base_url}",
            "--unsandboxed",
            "--workers",
            str(args.workers),
        ]
        first = ["run", "--plan", "PLAN.md", "--repo", "repo", *model]
        while True:
            kills = lives
            kind = rng.choice(sorted(KINDS))
            guard = f"model_call:{4 * args.workers}"  # no life outlives it, whatever its own point
            crash = f"{kind}:{rng.randint(1, KINDS[kind])}" if kills < args.kills else ""
            crash += f",{guard}" if crash and kind != "model_call" else ""  # one K per kind
            command = first if lives == 0 else ["run", "--resume", "--repo", "repo", *model]
            starts.append(time.time())
            done = subprocess.run(
                [sys.executable, "-m", "hilbert.ui.cli", *command],
                cwd=home,
                env={**env, "HILBERT_CRASH_AT": crash} if crash else env,
                capture_output=True,
                text=True,
            )
            lives += 1
            if done.returncode not in (-9, 137):
                break
        requests = server.requests
    with EventStore.open(db) as store:
        events = store.events()
        figures = measure(events, store, requests, starts)
        finished = [e for e in events if e.kind == "fleet_finished"]
    states = finished[-1].data["states"] if finished else {}
    tasks_done = sum(s == "done" for s in states.values())
    killed = sum(e.kind == "crash_point" for e in events)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:])
    failed = int(done.returncode != 0 or tasks_done != len(plan.tasks))
    line = {
        "workers": args.workers,
        "bugs": args.bugs,
        "kills": killed,
        "lives": lives,
        "tasks_done": tasks_done,
        **figures,
        "wall_s": f"{time.monotonic() - began:.1f}",
        "failed": failed,
    }
    print(" ".join(f"{k}={v}" for k, v in line.items()))
    return failed


if __name__ == "__main__":
    sys.exit(main())
