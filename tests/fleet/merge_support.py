"""The merge queue tests' project: a tiny Python project in real git repositories (the integration
repository, a work tree that commits candidates into it) whose "test suite" is `check.py`, or pytest
over `PYTEST_SUITE`; and what the run makes of the queue's outcomes, folded from a real event store."""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.commands import Runner
from hilbert.fleet import events as ev
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.fleet.outcomes import after_merge
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.scheduler import TaskState
from hilbert.fleet.state import HARNESS, FleetState, Fold
from hilbert.settings import TimeoutSettings
from hilbert.store import EventStore
from hilbert.workspaces import Git
from hilbert.workspaces.integration import Integration

PY = shlex.quote(sys.executable)

CHECK_PY = """\
import importlib, pathlib, sys
sys.path.insert(0, "src")
bad = [p.stem for p in sorted(pathlib.Path("src").glob("*.py")) if not importlib.import_module(p.stem).ok()]
if bad:
    print("FAILED:", *bad)
    sys.exit(1)
print("all ok")
"""


@dataclass
class Project:
    tmp: Path
    git: Git
    integ: Path
    work: Path
    events: list[tuple[str, dict]] = field(default_factory=list)

    @property
    def runs_file(self) -> Path:
        return self.tmp / "test-runs.txt"

    @property
    def verify_file(self) -> Path:
        return self.tmp / "verify-runs.txt"

    def test_command(self, prefix: str = "") -> str:
        return f"{prefix}echo run >> {shlex.quote(str(self.runs_file))} && {PY} check.py"

    def runs(self) -> int:
        return len(self.runs_file.read_text().splitlines()) if self.runs_file.exists() else 0

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def queue(self, test_command: str | None = None, command_timeout_s: float = 60.0) -> MergeQueue:
        return MergeQueue(
            Integration(self.integ, self.git, branch="main"),
            self.tmp / "scratch",
            test_command=test_command or self.test_command(),
            record=lambda event: self.events.append((event.kind, event.data())),
            runner=Runner.unsandboxed(timeouts=TimeoutSettings(merge_s=command_timeout_s)),
        )

    async def tip(self) -> str:
        return (await self.git.run("rev-parse", "refs/heads/main", cwd=self.integ)).stdout.strip()

    async def commit(self, name: str, files: dict[str, str], ref: str) -> str:
        """Commit `files` on top of the first commit; put it into the integration repo at `ref`."""
        await self.git.run("checkout", "-q", "-B", name, "base", cwd=self.work)
        for path, text in files.items():
            (self.work / path).parent.mkdir(parents=True, exist_ok=True)
            (self.work / path).write_text(text)
        await self.git.run("add", "-A", cwd=self.work)
        await self.git.run("commit", "-q", "-m", name, cwd=self.work)
        await self.git.run("push", "-q", self.integ, f"{name}:{ref}", cwd=self.work)
        return (await self.git.run("rev-parse", "HEAD", cwd=self.work)).stdout.strip()

    async def candidate(
        self, task: str, *, good: bool = True, extra: dict[str, str] | None = None
    ) -> Candidate:
        module = f"def ok():\n    return {good}\n"
        await self.commit(
            task, {f"src/{task}.py": module, **(extra or {})}, f"refs/hilbert/candidates/{task}"
        )
        verify = f"echo {task} >> {shlex.quote(str(self.verify_file))} && test -f src/{task}.py"
        return Candidate(task, f"refs/hilbert/candidates/{task}", verify)

    async def assert_never_broken(self) -> None:
        """The tip, and every commit the queue moved the branch to, passes the project's checks."""
        landed = {data["commit"] for kind, data in self.events if kind == "merged"}
        for n, commit in enumerate(sorted(landed | {await self.tip()})):
            tree = self.tmp / f"verify-{n}"
            await self.git.run("worktree", "add", "-q", "--detach", tree, commit, cwd=self.integ)
            done = subprocess.run([sys.executable, "check.py"], cwd=tree, capture_output=True, text=True)
            assert done.returncode == 0, f"{commit} is broken: {done.stdout}"

    async def files_at_tip(self) -> set[str]:
        listing = await self.git.run("ls-tree", "-r", "--name-only", "refs/heads/main", cwd=self.integ)
        return set(listing.stdout.split())


async def make_project(tmp: Path) -> Project:
    (tmp / "home").mkdir()
    git = Git(home=tmp / "home")
    project = Project(tmp=tmp, git=git, integ=tmp / "integ.git", work=tmp / "work")
    await git.run("init", "-q", "--bare", "-b", "main", project.integ)
    await git.run("init", "-q", "-b", "main", project.work)
    (project.work / "src").mkdir()
    (project.work / "check.py").write_text(CHECK_PY)
    (project.work / "src" / "shared.py").write_text("def ok():\n    return True\n\nVALUE = 1\n")
    await git.run("add", "-A", cwd=project.work)
    await git.run("commit", "-q", "-m", "base", cwd=project.work)
    await git.run("branch", "base", cwd=project.work)
    await git.run("push", "-q", project.integ, "main:main", cwd=project.work)
    return project


def by_task(outcomes: list[Outcome]) -> dict[str, Outcome]:
    assert len({o.task_id for o in outcomes}) == len(outcomes), outcomes
    return {o.task_id: o for o in outcomes}


PYTEST_SUITE = """\
import importlib, pathlib, sys

import pytest

sys.path.insert(0, "src")
if pathlib.Path("src/broken_collection.py").exists():
    raise ImportError("a collection error")


@pytest.mark.parametrize("name", [p.stem for p in sorted(pathlib.Path("src").glob("*.py"))])
def test_ok(name):
    assert importlib.import_module(name).ok()
"""


def escalations(p: Project, outcomes: dict[str, Outcome]) -> FleetState:
    """What the run makes of the queue's outcomes (`after_merge`), folded from the log as `hilbert status`
    and a resume read it: the queue's events and the run's, in a real event store."""
    tasks = {t: Task(id=t, title=t, verify="true") for t in outcomes}
    plan = Plan(goal="g", tasks=tuple(tasks.values()))
    log: list[ev.FleetEvent] = [ev.FleetStarted(tasks=list(tasks), plan=plan.model_dump(mode="json"))]
    for task in tasks:  # each candidate's worker is named as its ref's last part
        log += [
            ev.TaskStarted(task=task, worker=task, worker_id=task),
            ev.TaskAttempted(task=task, worker=task),
        ]
        log.append(ev.TaskStateChanged(task=task, status="verifying", worker=task))
    log += [ev.EVENTS[kind](**data) for kind, data in p.events]
    for task, outcome in outcomes.items():
        log += after_merge(tasks[task], TaskState(task, "verifying", worker=task), outcome, max_attempts=3)
    with EventStore.open(p.tmp / "log.db") as store:
        for event in log:
            store.append("r", HARNESS, event.kind, event.data())
        return Fold(store, "r").catch_up()
