"""What the orchestrator costs per agent step: N concurrent hilbert agents against one fake server.

    python bench/loop_overhead.py --agents 1024 [--latency none|realistic] [--steps 10]
                                  [--protocol openai|openai-responses|anthropic] [--keep DIR]

The fake model server runs in its own process (`python -m hilbert.testing.fake_server`) with a
scripted responder: every agent gets the same K-turn script of cheap tool calls (read_file, grep,
write_file + edit_file, shell `true`, list_files, ..., then `finish`), so the tools cost little and
what is measured is the loop, the SDK client, the wire and the event store. All N agents run in this
process on one asyncio loop, share one Model object and one EventStore (as a fleet does), and each
works in its own copy of a tiny generated project. One warm-up agent runs first, unmeasured, so that
one-time costs (lazy imports, SDK schema building) are not charged to the steps.

Figures, per latency profile (without --latency both run, each in a fresh child process, so that one
run's memory does not leak into the other's figures):

    cpu_ms_per_step     this process's user+sys CPU (os.times, not its children) during the run / steps;
                        a step is one model call and the tool calls it asked for
    rss_mb_per_agent    (peak RSS during the run - RSS before the agents start) / N; the peak is VmHWM,
                        reset through /proc/self/clear_refs just before the start
    ttft_p50_ms, _p99   time to first token as the agents saw it: the `ttft_s` of the `model_call`
                        events (client side, so it includes this process's event-loop delay)
    server_cpu_ms_per_step  the server process's CPU / steps (from /proc/PID/stat)

The last line holds the figures of the last run (realistic when both run), e.g.

    agents=1024 latency=realistic protocol=openai steps=10240 completed=1024 cpu_ms_per_step=.. ...
    ... failed=0

An agent fails unless it finishes with `finish` after exactly K model calls and no tool error; the
first failures are printed, and the exit status is 1 if any agent failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from hilbert.agent.loop import AgentResult, run_agent
from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner
from hilbert.models import make_model
from hilbert.models.types import Model
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server.process import start_process

LATENCIES = ("none", "realistic")
PROTOCOLS = ("openai", "openai-responses", "anthropic")
PROJECT_SEED = 7
KEYS = {"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"}


# -- the script every agent follows ----------------------------------------------------------------


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def script_turn(step: int, project: SampleProject) -> dict[str, Any]:
    """Turn `step` (0-based) of the work cycle: short text and one or two cheap tool calls."""
    source = project.source_files[step // 5 % len(project.source_files)]
    note = f"notes/step-{step}.md"
    cycle = [
        ("Let me read the code first.", [call("read_file", path=source)]),
        ("Where are the functions defined?", [call("grep", pattern=r"^def ", path=project.package)]),
        (
            "I will keep a note of what I checked.",
            [
                call("write_file", path=note, content=f"step {step}: looked at {source}\n"),
                call("edit_file", path=note, old=f"step {step}:", new=f"step {step} (checked):"),
            ],
        ),
        ("A quick shell check.", [call("shell", command="true")]),
        ("Which files are there?", [call("list_files", pattern="**/*.py")]),
    ]
    text, calls = cycle[step % len(cycle)]
    return {"text": text, "tool_calls": calls}


def build_script(project: SampleProject, steps: int) -> list[dict[str, Any]]:
    finish = call("finish", claim="looked around; nothing to change", evidence="read, grep, shell: ok")
    return [script_turn(step, project) for step in range(steps - 1)] + [
        {"text": "Done.", "tool_calls": [finish]}
    ]


# -- measurements of processes ----------------------------------------------------------------------


def process_cpu_s() -> float:
    """This process's user+sys CPU seconds, all threads, children excluded: what os.times() reports,
    read from CLOCK_PROCESS_CPUTIME_ID (nanoseconds) rather than in 10 ms clock ticks."""
    return time.process_time()


def server_cpu_s(pid: int) -> float:
    """User+sys CPU seconds of another process, from /proc/PID/stat (0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(field: str) -> int:
    """`VmRSS` or `VmHWM` of this process, in KiB, from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Make VmHWM (the peak RSS) start again from the current RSS (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        print(f"warning: RLIMIT_NOFILE hard limit {hard} < {needed}", file=sys.stderr)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (NaN for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the fake server in its own process -------------------------------------------------------------


def start_server(latency: str, script: Path) -> tuple[subprocess.Popen[str], str]:
    return start_process("--responder", f"scripted:file={script}", "--latency", latency)


def model_for(protocol: str, url: str) -> Model:
    base = f"{url}/v1" if protocol.startswith("openai") else url
    return make_model(f"{protocol}:fake@{base}", env=KEYS)


# -- one measured run -------------------------------------------------------------------------------


class Bench:
    """N agents, one model, one store; `run()` returns the figures as an ordered dict."""

    def __init__(self, args: argparse.Namespace, latency: str, work: Path) -> None:
        self.agents, self.steps, self.protocol = args.agents, args.steps, args.protocol
        self.latency, self.work = latency, work
        self.run_id = f"bench-{latency}"

    def agent(
        self, model: Model, store: EventStore, run: str, name: str, max_turns: int
    ) -> Coroutine[Any, Any, AgentResult]:
        """One agent in its workspace (made beforehand by `workspaces`)."""
        return run_agent(
            run=run, agent=name, task=f"Look around the project (you are {name}).", model=model,
            toolbox=ToolBox(self.work / run / name, runner=Runner.unsandboxed()), store=store,
            policies=[TurnLimit(max_turns)],
        )  # fmt: skip

    def workspaces(self, run: str, names: Sequence[str]) -> None:
        for name in names:  # ~3 ms each
            generate_sample_project(self.work / run / name, PROJECT_SEED, bugs=1)

    async def measure(self, model: Model, store: EventStore, server_pid: int) -> dict[str, Any]:
        names = [f"a{i:04d}" for i in range(self.agents)]
        self.workspaces(self.run_id, names)
        self.workspaces("warmup", ["warmup"])
        await self.agent(model, store, "warmup", "warmup", min(self.steps, 6))  # every tool once
        rss_before = status_kb("VmRSS")
        reset_peak_rss()
        cpu_before, server_before = process_cpu_s(), server_cpu_s(server_pid)
        started = time.perf_counter()
        results = await asyncio.gather(
            *(self.agent(model, store, self.run_id, name, self.steps + 2) for name in names),
            return_exceptions=True,
        )
        wall = time.perf_counter() - started
        cpu = process_cpu_s() - cpu_before
        server_cpu = server_cpu_s(server_pid) - server_before
        peak = status_kb("VmHWM")
        return self.figures(store, names, results, cpu, server_cpu, (peak - rss_before) / 1024, wall)

    def figures(
        self,
        store: EventStore,
        names: list[str],
        results: list[AgentResult | BaseException],
        cpu: float,
        server_cpu: float,
        rss_mb: float,
        wall: float,
    ) -> dict[str, Any]:
        events = store.events(run=self.run_id)
        calls = [e.data for e in events if e.kind == "model_call"]
        tool_errors: dict[str, int] = {}
        for event in events:
            if event.kind == "tool_result" and event.data["is_error"]:
                tool_errors[event.agent] = tool_errors.get(event.agent, 0) + 1
        failures = []
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                failures.append(f"{name}: {type(result).__name__}: {result}")
            elif result.status != "finished" or result.turns != self.steps or name in tool_errors:
                failures.append(
                    f"{name}: {result.status} after {result.turns} turns, "
                    f"{tool_errors.get(name, 0)} tool errors ({result.reason})"
                )
        for line in failures[:10]:
            print(f"failed: {line}")
        steps = len(calls)
        ttfts = [c["ttft_s"] * 1000 for c in calls if c["ttft_s"] is not None]
        return {
            "agents": self.agents,
            "latency": self.latency,
            "protocol": self.protocol,
            "steps": steps,
            "completed": self.agents - len(failures),
            "cpu_ms_per_step": round(cpu * 1000 / max(steps, 1), 2),
            "rss_mb_per_agent": round(rss_mb / self.agents, 3),
            "ttft_p50_ms": round(percentile(ttfts, 0.5), 1),
            "ttft_p99_ms": round(percentile(ttfts, 0.99), 1),
            "server_cpu_ms_per_step": round(server_cpu * 1000 / max(steps, 1), 2),
            "retries": sum(c["attempts"] - 1 for c in calls),
            "wall_s": round(wall, 2),
            "failed": len(failures),
        }

    async def run(self) -> dict[str, Any]:
        script = self.work / "script.json"
        template = generate_sample_project(self.work / "template", PROJECT_SEED, bugs=1)
        script.write_text(json.dumps(build_script(template, self.steps)))
        server, url = start_server(self.latency, script)
        try:
            with EventStore.open(self.work / "log.db") as store:
                return await self.measure(model_for(self.protocol, url), store, server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)


# -- command line -----------------------------------------------------------------------------------


def run_children(args: argparse.Namespace) -> int:
    """Each latency profile in a fresh child process; their output passes straight through."""
    worst = 0
    for latency in LATENCIES:
        command = [sys.executable, __file__, "--agents", str(args.agents), "--steps", str(args.steps)]
        command += ["--protocol", args.protocol, "--latency", latency]
        if args.keep:
            command += ["--keep", str(Path(args.keep) / latency)]
        worst = max(worst, subprocess.run(command).returncode)
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=16, help="concurrent agents (default 16)")
    parser.add_argument("--latency", choices=LATENCIES, help="server latency profile (default: both)")
    parser.add_argument("--steps", type=int, default=10, help="model calls per agent (default 10)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="openai")
    parser.add_argument("--keep", metavar="DIR", help="keep the workspaces and the event log here")
    args = parser.parse_args(argv)
    if args.agents < 1 or args.steps < 1:
        parser.error("--agents and --steps must be at least 1")
    if args.keep and (Path(args.keep) / "log.db").exists():
        parser.error(f"{args.keep} already holds a run (log.db); --keep needs a new or empty folder")
    if args.latency is None:
        return run_children(args)
    raise_open_files(4 * args.agents + 256)
    with tempfile.TemporaryDirectory(prefix="hilbert-bench-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = asyncio.run(Bench(args, args.latency, work).run())
    print(" ".join(f"{key}={value}" for key, value in figures.items()), flush=True)
    return 1 if figures["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
