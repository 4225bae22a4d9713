"""The Worker and Runtime seams with implementations that are not hilbert's: a worker that is a separate
OS process (`seam_child.py`: its own agent loop, the `openai` SDK, nothing of hilbert), reaching the fake
server only through its grant and gated by the harness when it exits; and a `subprocess` runtime that
hands each attempt a task spec, a base bundle and a grant, and gets back a candidate bundle and an
outcome. Both go through a real `run_fleet` on a sample project: its tasks merge, the integration branch
is green, the child's events are in the log under its name, and the child never saw the harness's env."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_support import ENV, git_repo
from test_run import plan_for

from hilbert.agent.policies import AgentResult
from hilbert.commands import Runner
from hilbert.fleet.attempt import close, landed, spec_for, stop_gate
from hilbert.fleet.context import RunContext
from hilbert.fleet.events import TaskStarted
from hilbert.fleet.liveness import Watch
from hilbert.fleet.names import Name
from hilbert.fleet.outcomes import AttemptOutcome, FleetResult
from hilbert.fleet.plan import Task
from hilbert.fleet.run import run_fleet
from hilbert.fleet.seams import WORKER_EVENT, Emit, External, GatewayGrant, Grant, TaskSpec, run_external
from hilbert.fleet.state import AttemptView
from hilbert.models import make_model
from hilbert.models.gateway import TokenBook
from hilbert.models.types import Usage
from hilbert.settings import Settings
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.workspaces import Checkout
from hilbert.workspaces.integration import INTEGRATION

CHILD = Path(__file__).with_name("seam_child.py")
SECRET = "HILBERT_SEAM_TEST_SECRET"


def child_env(home: Path) -> dict[str, str]:
    """All a child gets from the harness: where programs are, a home of its own. No keys, no secrets.
    No bytecode written, as hilbert's runner does for its workers: an edit back and forth within one
    second keeps a file's size and mtime, so a cached `.pyc` of the line tried before would be run."""
    home.mkdir(parents=True, exist_ok=True)
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


async def run_child(request: dict[str, Any], cwd: Path, env: dict[str, str], emit: Emit) -> AgentResult:
    """Start the child, hand it `request` on stdin, turn its JSON lines into events, read its outcome."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), cwd=cwd, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child.stdin.write(json.dumps(request).encode())
    child.stdin.close()
    outcome: dict[str, Any] | None = None
    async for line in child.stdout:
        said = json.loads(line)
        if "outcome" in said:
            outcome = said["outcome"]
        else:
            emit(said["event"], said["data"])
    errors = await child.stderr.read()
    await child.wait()
    if outcome is None:
        return AgentResult("error", f"the child exited {child.returncode}: {errors.decode()[-2000:]}", "", "",
                           0, Usage(), 0.0)  # fmt: skip
    usage = Usage(
        input_tokens=outcome["usage"]["input_tokens"], output_tokens=outcome["usage"]["output_tokens"]
    )
    return AgentResult(
        outcome["status"], "", outcome["claim"], outcome["evidence"], outcome["turns"], usage, 0.0
    )


class ProcessWorker:
    """A `Worker` that is a separate OS process working in the attempt's workspace."""

    def __init__(self, private: Path) -> None:
        self.private = private  # outside every workspace: the children's conversations and homes

    async def attempt(self, spec: TaskSpec, checkout: Checkout, grant: Grant, emit: Emit) -> AgentResult:
        assert isinstance(grant, GatewayGrant)
        request = {
            "spec": spec.to_json(),
            "grant": grant.to_json(),
            "session": str(self.private / f"{spec.worker}.json"),
        }
        return await run_child(request, checkout.work_tree, child_env(self.private / "home"), emit)


class SubprocessRuntime:
    """A `Runtime` that places each attempt in a child process of its own: the child gets a task spec,
    a git bundle of the base and a grant, works in its own clone and hands back a candidate bundle and
    an outcome. The candidate lands in a checkout here, where the stop gate judges it as usual."""

    def __init__(self, ctx: RunContext, roster: Any, external: External | None) -> None:
        assert external is not None
        self.ctx, self.external = ctx, external
        self.watches: dict[str, Watch] = {}  # a child is not watched: it cannot be nudged or restarted
        self.interrupted = False

    def restart(self, task_id: str) -> None:
        pass

    async def run(self, task: Task, name: Name, resumed: AttemptView | None = None) -> AttemptOutcome:
        assert resumed is None
        ctx = self.ctx
        tip = await ctx.integration.tip()
        checkout = await ctx.workspaces.provision(name.id, tip)  # where its candidates land
        place = ctx.root / "places" / name.id
        place.mkdir(parents=True)
        started = TaskStarted(
            task=task.id, worker=name.display, worker_id=name.id, base=tip, workspace=str(place)
        )
        ctx.record(started)
        outcome = AttemptOutcome("error", "", "the attempt did not end")
        try:
            gate, spec = stop_gate(ctx, task, checkout), spec_for(ctx, task, name)
            result = await run_external(ctx, self.external, gate, spec, checkout, _Placed(ctx, place))
            outcome = await landed(
                ctx, task, name, checkout, AttemptOutcome(result.status, result.cause, result.reason)
            )
        finally:
            if not self.interrupted:
                await close(ctx, checkout, outcome)
        return outcome


class _Placed:
    """One round of a placed attempt: base bundle in, the child, candidate bundle out (into `checkout`)."""

    def __init__(self, ctx: RunContext, place: Path) -> None:
        self.ctx, self.place = ctx, place

    async def attempt(self, spec: TaskSpec, checkout: Checkout, grant: Grant, emit: Emit) -> AgentResult:
        assert isinstance(grant, GatewayGrant)
        git_dir, round_ = f"--git-dir={checkout.git_dir}", spec.round
        base, candidate = self.place / "base.bundle", self.place / f"candidate-{round_}.bundle"
        await self.ctx.git.run(git_dir, "bundle", "create", "-q", str(base), checkout.branch, cwd=self.place)
        request = {
            "spec": spec.to_json(),
            "grant": grant.to_json(),
            "session": str(self.place / "session.json"),
            "base_bundle": str(base),
            "base_ref": checkout.branch,
            "clone": str(self.place / "clone"),
            "candidate_bundle": str(candidate),
        }
        result = await run_child(request, self.place, child_env(self.place / "home"), emit)
        if candidate.exists():  # what the child made becomes the checkout's branch, for the gate
            await self.ctx.git.run(git_dir, "fetch", "-q", str(candidate), "+work:refs/hilbert/incoming",
                                   cwd=self.place)  # fmt: skip
            await self.ctx.git.run(git_dir, f"--work-tree={checkout.work_tree}", "reset", "-q", "--hard",
                                   "refs/hilbert/incoming", cwd=checkout.work_tree)  # fmt: skip
        return result


def fleet(tmp_path: Path, seed: int, **seams: Any) -> tuple[FleetResult, list[Any]]:
    """A two-bug sample project fixed by a fleet whose workers stop early once (then fix it when sent
    back), through `run_fleet` with the given seams; the result and the run's events."""
    project = generate_sample_project(tmp_path / "repo", seed, bugs=2)
    git_repo(project)
    with (
        FakeServer("engineer:stop_early=1", seed=seed) as server,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        gateway = TokenBook(f"{server.base_url}/v1")
        external = External(ProcessWorker(tmp_path / "private"), gateway, "fake")
        result = asyncio.run(
            run_fleet(
                plan_for(project),
                repo=project.path,
                root=tmp_path / "run",
                run="r1",
                model=make_model(f"openai:fake@{server.base_url}/v1", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of({"fleet.workers": 2}),
                worker=external,
                **seams,
            )
        )
        events = store.events(run="r1")
    return result, events


def assert_merged_green_gated_and_scrubbed(result: FleetResult, events: list[Any]) -> None:
    assert result.all_done, (result.states, result.stuck)
    merged = sorted(e.data["task"] for e in events if e.kind == "merged")
    assert merged == sorted(result.states)
    check = result.integration_repo.parent / "check"
    subprocess.run(
        ["git", "clone", "-q", "-b", INTEGRATION, str(result.integration_repo), str(check)], check=True
    )
    suite = subprocess.run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=check, env=ENV,
                           capture_output=True, text=True)  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-2000:]
    workers = {e.data["worker"]: e.data["task"] for e in events if e.kind == "task_started"}
    for worker in workers:
        mine = [e for e in events if e.agent == worker]
        emitted = [e.data["event"] for e in mine if e.kind == WORKER_EVENT]
        assert "model_call" in emitted and "command" in emitted, emitted  # its events, under its name
        # the stop gate sent it back once (it stopped early), then accepted its fix
        rounds = [e.data for e in events if e.kind == "gate_verdict" and e.data["task"] == workers[worker]]
        verdicts = [r["verdict"] for r in rounds]
        # (CI saw four send-backs when the child wrote bytecode: an edit undone within a second ran stale)
        said = [(r["verdict"], r["reasons"]) for r in rounds]
        assert verdicts[0] == "not_done" and verdicts[-1] == "done" and len(verdicts) <= 3, said
        assert [e.data["by"] for e in mine if e.kind == "message_injected"] == ["stop_gate"] * (
            len(verdicts) - 1
        ), said
        stopped = [e.data for e in mine if e.kind == "agent_stopped"]
        assert stopped[-1]["status"] == "finished" and stopped[-1]["usage"]["output_tokens"] > 0
    seen = [
        e.data["data"]["names"] for e in events if e.kind == WORKER_EVENT and e.data["event"] == "environment"
    ]
    assert seen and all(SECRET not in names and "OPENAI_API_KEY" not in names for names in seen)
    assert not any(SECRET in e.kind or "s3cret-value" in json.dumps(e.data) for e in events)


def test_a_worker_in_another_process_is_gated_when_it_exits_and_its_work_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET, "s3cret-value")  # the harness's environment: the child must not see it
    monkeypatch.setenv("OPENAI_API_KEY", "s3cret-value")
    result, events = fleet(tmp_path, seed=11)
    assert_merged_green_gated_and_scrubbed(result, events)
    workspaces = {e.data["worker"]: e.data["workspace"] for e in events if e.kind == "task_started"}
    assert all(Path(w).is_relative_to(tmp_path / "run" / "workspaces") for w in workspaces.values())


def test_a_subprocess_runtime_moves_a_base_bundle_in_and_a_candidate_bundle_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET, "s3cret-value")
    monkeypatch.setenv("OPENAI_API_KEY", "s3cret-value")
    result, events = fleet(tmp_path, seed=12, runtime=SubprocessRuntime)
    assert_merged_green_gated_and_scrubbed(result, events)
    places = [Path(e.data["workspace"]) for e in events if e.kind == "task_started"]
    assert places and all(p.parent == tmp_path / "run" / "places" for p in places)
    for place in places:  # the child worked in its own clone, and handed back a bundle per round
        assert (place / "clone" / ".git").is_dir()
        assert (place / "candidate-0.bundle").exists() and (place / "candidate-1.bundle").exists()
