"""What the fleet orchestrator costs at scale: `run_fleet` with N simulated agents working at once.

    python bench/fleet_scale.py --workers 1024 [--steps 6] [--merge-batch 8] [--keep DIR] [--profile FILE]

The real orchestrator runs end to end: the scheduler, one isolated git workspace per worker
(`hilbert.workspaces`), the agent loop and its tools, the harness's verify run on a clean export of
each worker's commit, the merge queue (batches, checks, fast-forward) and the SQLite event log. Only
the model is simulated, in this process and without HTTP (`loop_overhead.py` measures the wire):
every agent gets S - 1 turns of cheap tool calls on its own file (read_file, write_file `done`, grep,
list_files, read_file, ...) and then `finish`; its usage is an honest estimate (characters / 4).

The repository is generated before the clock starts: N one-line files `tasks/f_<i>.txt` ("todo") and
a README, one commit. Task i claims only its own file, so all N tasks may run at once, and N workers
do (`fleet.workers = N`); its verify is `grep -qx done tasks/f_<i>.txt`, the project's test
command `test -s README.md`. One unmeasured one-task fleet runs first (imports, SQLite warm-up).
Every workspace, verify export and merge checkout holds all N + 1 files, so the file work grows as N²:
1,024 workers on a 1,025-file repository. RLIMIT_NOFILE is raised to 8 N + 256 (run_fleet starts one
git process per worker at once; at N = 1024 under a 1,024 limit the harness fails with EMFILE).

Figures (last line, key=value):

    workers, steps              N, and S model calls per agent
    tasks_done, merged          tasks whose final state is done; `merged` events in the log
    files_done                  task files reading `done` on the integration branch afterwards
    wall_s                      run_fleet, from the bare clone to the end of the last merge
    provisioned_s, agents_done_s  from the start until the last worker began / the last agent stopped
    agent_steps                 model calls (`model_call` events) of the run
    orchestrator_cpu_ms_per_step  this process's user+sys CPU (all threads, not its children) / agent_steps
    model_cpu_ms_per_step       of that, the simulated model's own share (its thread CPU in complete())
    children_cpu_s              user+sys CPU of the child processes that ended (git, verify, test command)
    rss_mb_per_worker           (peak RSS during the run - RSS before it) / N; peak = VmHWM, reset just before
    events, events_per_s        events the run appended to the log, and per second of wall time
    append_per_s                raw EventStore.append rate on a fresh file (one writer, tool_result-sized
                                events, 16 agents round-robin), measured after the run
    failed                      tasks that did not end done (each printed as `failed: ...` before the figures)

The exit status is 1 if any task did not end done and merged, or a task file does not read `done`.
`--profile FILE` writes cProfile statistics of the measured run (which slows it down).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hilbert.agent.prompts import task_of
from hilbert.commands import Runner
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import FleetResult, run_fleet
from hilbert.models.types import Completion, Message, TextCallback, ToolCall, ToolSpec, Usage
from hilbert.settings import FleetSettings, Settings
from hilbert.store import Event, EventStore
from hilbert.workspaces.integration import INTEGRATION
from loop_overhead import process_cpu_s, raise_open_files, reset_peak_rss, status_kb

PROJECT_TEST = "test -s README.md"
APPENDS = 5000
TASK_LINE = re.compile(r"^Task (\S+):")
WHY_KINDS = ("task_error", "task_retried", "task_escalated", "task_stopped", "merge_error")


def task_file(i: int) -> str:
    return f"tasks/f_{i:04d}.txt"


# -- the repository and the plan --------------------------------------------------------------------


def make_repo(repo: Path, tasks: int) -> None:
    """A git repository (branch main, one commit) with one `todo` file per task and a README."""
    (repo / "tasks").mkdir(parents=True)
    (repo / "README.md").write_text("fleet_scale benchmark project: every task marks its file done.\n")
    for i in range(tasks):
        (repo / task_file(i)).write_text("todo\n")
    for args in (
        ["init", "--quiet", "--initial-branch=main"],
        ["add", "--all"],
        ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "--quiet", "-m", "tasks"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_plan(tasks: int) -> Plan:
    return Plan(
        goal="mark every task file done",
        tasks=tuple(
            Task(
                id=f"T{i:04d}",
                title=f"mark {task_file(i)} done",
                description=f"Replace the content of {task_file(i)} with the single line `done`.",
                verify=f"grep -qx done {task_file(i)}",
                claims=(task_file(i),),
            )
            for i in range(tasks)
        ),
    )


# -- the simulated model ----------------------------------------------------------------------------


class SimulatedModel:
    """A `Model` that plays every worker of the plan: S - 1 turns of tool calls on the worker's own file
    (found from the task line of its prompt), then `finish`; after `finish` (a verify round that failed
    and resumed it) it finishes again. Usage is estimated at 4 characters a token."""

    def __init__(self, plan: Plan, steps: int) -> None:
        self.name = "bench:simulated"
        self.steps = steps
        self.files = {task.id: task.claims[0] for task in plan.tasks}
        self.cpu_s = 0.0  # this model's own CPU time in complete(), to tell it apart from the orchestrator's
        self._tool_chars: dict[tuple[str, ...], int] = {}  # the offered tools' JSON size, by their names

    def turn(self, path: str, turn: int) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
        """Turn `turn` (0-based): the edit comes second (first when there are only two steps)."""
        if turn >= self.steps - 1:
            evidence = f"`grep -qx done {path}` exits 0"
            return "Done.", [("finish", {"claim": f"{path} reads done", "evidence": evidence})]
        read = ("Let me read my file.", "read_file", {"path": path})
        edit = ("Marking it done.", "write_file", {"path": path, "content": "done\n"})
        after = [
            ("Checking the edit.", "grep", {"pattern": "^done$", "path": path}),
            ("Is it still there?", "list_files", {"pattern": path}),
            read,
        ]
        if self.steps == 2 or turn == 1:
            text, name, arguments = edit
        else:
            text, name, arguments = read if turn == 0 else after[(turn - 2) % 3]
        return text, [(name, arguments)]

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> Completion:
        started, cpu = time.perf_counter(), time.thread_time()
        found = TASK_LINE.match(task_of(messages[1].content)) if len(messages) > 1 else None
        if found is None or found.group(1) not in self.files:
            raise RuntimeError("the simulated model found no task line of the plan in the prompt")
        turn = sum(1 for message in messages if message.role == "assistant")
        text, calls = self.turn(self.files[found.group(1)], turn)
        reply = Message(
            "assistant",
            text,
            tool_calls=tuple(ToolCall(f"call_{turn}_{k}", n, a) for k, (n, a) in enumerate(calls)),
        )
        offered = tuple(spec.name for spec in tools)
        if offered not in self._tool_chars:
            self._tool_chars[offered] = len(json.dumps([vars(spec) for spec in tools]))
        prompt = sum(len(m.content) + 40 * len(m.tool_calls) for m in messages) + self._tool_chars[offered]
        usage = Usage(input_tokens=prompt // 4 + 1, output_tokens=(len(text) + 60 * len(calls)) // 4 + 1)
        if on_text is not None:
            on_text(text)
        self.cpu_s += time.thread_time() - cpu
        await asyncio.sleep(0)  # a real model call yields to the event loop at least once
        latency = time.perf_counter() - started
        return Completion(
            reply, usage, "tool_use", self.name, latency_s=latency, time_to_first_token_s=latency
        )


# -- measurements -----------------------------------------------------------------------------------


def children_cpu_s() -> float:
    """User+sys CPU of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def append_throughput(path: Path, count: int = APPENDS) -> float:
    """Events per second that `EventStore.append` commits into a fresh file, one writer."""
    data = {"call_id": "call_1_0", "name": "read_file", "arguments": {"path": task_file(7)},
            "message": "0" * 64, "is_error": False, "duration_s": 0.0004}  # fmt: skip
    with EventStore.open(path) as store:
        started = time.perf_counter()
        for n in range(count):
            store.append("append-bench", f"a{n % 16}", "tool_result", data)
        return count / (time.perf_counter() - started)


def files_done(integration: Path, tasks: int) -> int:
    """How many task files read exactly `done` on the integration branch."""
    out = subprocess.run(
        ["git", "-C", str(integration), "grep", "-l", "^done$", INTEGRATION, "--", "tasks"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    wanted = {f"{INTEGRATION}:{task_file(i)}" for i in range(tasks)}
    return len(wanted & set(out.splitlines()))


def failures(result: FleetResult, events: list[Event]) -> list[str]:
    """Why each task that did not end done did not, from its state and the harness's last word on it."""
    why: dict[str, str] = {}
    for event in events:
        if event.agent == "harness" and event.kind in WHY_KINDS:
            why[event.data.get("task", "*")] = (
                f"{event.kind}: {event.data.get('why') or event.data.get('error')}"
            )
    merged = {e.data["task"] for e in events if e.agent == "harness" and e.kind == "merged"}
    return [
        f"{task_id} {state.status}{'' if task_id in merged else ' (not merged)'}: "
        f"{why.get(task_id) or why.get('*') or result.stuck.get(task_id) or 'no reason in the log'}"[:500]
        for task_id, state in result.states.items()
        if state.status != "done" or task_id not in merged
    ]


# -- the run -----------------------------------------------------------------------------------------


async def fleet(
    plan: Plan, steps: int, repo: Path, root: Path, run: str, store: EventStore, settings: Settings
) -> tuple[FleetResult, SimulatedModel]:
    """One fleet run with a fresh simulated model (whose own CPU time it reports)."""
    model = SimulatedModel(plan, steps)
    runner = Runner.unsandboxed()
    result = await run_fleet(
        plan, repo=repo, root=root, run=run, model=model, store=store, settings=settings, runner=runner
    )
    return result, model


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    workers, steps = args.workers, args.steps
    settings = Settings.of(
        {
            "fleet.workers": workers,
            "budgets.max_turns": steps + 8,
            "fleet.merge_batch": args.merge_batch,
            "commands.test": PROJECT_TEST,
        }
    )
    make_repo(work / "warmup-repo", 1)
    make_repo(work / "repo", workers)
    plan = make_plan(workers)
    with EventStore.open(work / "log.db") as store:
        warm, _ = asyncio.run(
            fleet(make_plan(1), steps, work / "warmup-repo", work / "warmup", "warmup", store, settings)
        )
        if not warm.all_done:
            raise SystemExit(f"the warm-up fleet did not finish its one task: {dict(warm.states)}")
        profile = cProfile.Profile() if args.profile else None
        rss_before = status_kb("VmRSS")
        reset_peak_rss()
        cpu_before, children_before = process_cpu_s(), children_cpu_s()
        started, wall_start = time.perf_counter(), time.time()
        if profile:
            profile.enable()
        result, model = asyncio.run(fleet(plan, steps, work / "repo", work / "run", "bench", store, settings))
        if profile:
            profile.disable()
        wall = time.perf_counter() - started
        cpu, children = process_cpu_s() - cpu_before, children_cpu_s() - children_before
        peak = status_kb("VmHWM")
        events = store.events(run="bench")
    if profile:
        profile.dump_stats(args.profile)
    why = failures(result, events)
    done_files = files_done(result.integration_repo, workers)
    if done_files != workers:
        why.append(f"only {done_files} of {workers} task files read `done` on {INTEGRATION}")
    for line in why[:10]:
        print(f"failed: {line}", flush=True)
    if len(why) > 10:
        print(f"failed: ... and {len(why) - 10} more", flush=True)
    calls = sum(1 for e in events if e.kind == "model_call")

    def since_start(kind: str) -> float:
        return round(max((e.time for e in events if e.kind == kind), default=wall_start) - wall_start, 2)

    return {
        "workers": workers,
        "steps": steps,
        "tasks_done": sum(1 for state in result.states.values() if state.status == "done"),
        "merged": sum(1 for e in events if e.agent == "harness" and e.kind == "merged"),
        "files_done": done_files,
        "wall_s": round(wall, 2),
        "provisioned_s": since_start("task_started"),
        "agents_done_s": since_start("agent_stopped"),
        "agent_steps": calls,
        "orchestrator_cpu_ms_per_step": round(cpu * 1000 / max(calls, 1), 2),
        "model_cpu_ms_per_step": round(model.cpu_s * 1000 / max(calls, 1), 3),
        "children_cpu_s": round(children, 2),
        "rss_mb_per_worker": round((peak - rss_before) / 1024 / workers, 3),
        "events": len(events),
        "events_per_s": round(len(events) / wall, 1),
        "append_per_s": round(append_throughput(work / "append.db")),
        "failed": len(why),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=16, help="tasks and concurrent workers (default 16)")
    parser.add_argument("--steps", type=int, default=6, help="model calls per agent, >= 2 (default 6)")
    parser.add_argument(
        "--merge-batch", type=int, default=FleetSettings().merge_batch, help="the merge queue's batch size"
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the repository, workspaces and event log here")
    parser.add_argument("--profile", metavar="FILE", help="write cProfile stats of the measured run here")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.steps < 2 or args.merge_batch < 1:
        parser.error("--workers and --merge-batch must be at least 1, --steps at least 2")
    if args.keep and Path(args.keep).exists() and any(Path(args.keep).iterdir()):
        parser.error(f"{args.keep} is not empty; --keep needs a new or empty folder")
    raise_open_files(8 * args.workers + 256)
    with tempfile.TemporaryDirectory(prefix="hilbert-fleet-bench-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = measure(args, work.absolute())
    print(" ".join(f"{key}={value}" for key, value in figures.items()), flush=True)
    return 1 if figures["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
