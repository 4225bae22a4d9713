"""A fleet killed over and over and resumed through the real command line: the drill that
`test_resume.py` runs, and `make soak` runs bigger (`HILBERT_RESUME_SOAK=1`).

Every process life of `hilbert run` gets its own `HILBERT_CRASH_AT` (`hilbert.fleet.crash`): the
orchestrator SIGKILLs itself after the K-th event of a kind it committed, or at a named point, and
writes a `crash_point` event first; the next life is `hilbert run --resume`. Which kill each life
gets is drawn from `random.Random(seed)`; the named points the proof needs are owed until each was hit
twice. A bisection needs a red merge batch: while `Drill.poisoned` is set, the project's test
command (a wrapper outside the repository) fails every merge build that changes two or more source
files, so the queue bisects; without it the wrapper is the plain suite.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.commands import command_env
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.store.event_store import Event

# fails a merge build (HEAD) that changes two or more of the package's files against the tip, while
# the poison file exists; else runs the suite (the merge queue's "no new failures" reads its output)
CHECK = """\
import pathlib, subprocess, sys
def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True)
TIP = "hilbert/integration"
if pathlib.Path({poison!r}).exists() and git("rev-parse", "-q", "--verify", TIP).returncode == 0:
    changed = git("diff", "--name-only", TIP, "HEAD", "--", {package!r}).stdout.split()
    if len(changed) >= 2:
        print("poisoned: this build changes " + ", ".join(changed))
        sys.exit(3)
sys.exit(subprocess.run([sys.executable, "-m", "pytest", "-q"]).returncode)
"""

# (kind, largest K): the seeded draws; small K, so that every life ends soon after it starts. While no
# attempt has ended yet only the first four can happen (every worker is at work); after, any of them.
# The workers' own kinds (`PER_WORKER`) count per worker: K is drawn from 1 to 4 calls a worker, so that
# a life of a big fleet gets somewhere before it dies (a worker's test run killed at every life would
# never finish).
PER_WORKER = frozenset({"model_call", "tool_result"})
DRAWN = (
    ("model_call", 4),
    ("tool_result", 4),
    ("agent_started", 4),
    ("message_injected", 3),
    ("task_state", 6),
    ("task_started", 4),
    ("gate_step", 4),
    ("task_attempted", 3),
    ("workspace_closed", 3),
    ("merge_batch_started", 2),
    ("merge_landing", 2),
    ("merged", 3),
    ("point:after_landing_logged", 1),
)
NAMED = ("point:after_ref_moved", "merge_bisect", "gate_verdict")


def commit_all(path: Path) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def plan_of(project: SampleProject) -> Plan:
    """One task per broken function; tasks on one file may run at once (they merge, or conflict)."""
    tasks: list[Task] = []
    for bug in project.bugs:
        test_file = f"tests/test_{Path(bug.file).stem}.py"
        source = (project.path / test_file).read_text()
        tests = re.findall(rf"^def (test_{bug.function}_\w+)\(", source, re.MULTILINE)
        tests = tests or [test.split("::")[-1] for test in bug.tests]
        tasks.append(
            Task(
                id=f"T{len(tasks) + 1}",
                title=f"fix {bug.function} in {bug.file}",
                verify="python -m pytest -q " + " ".join(f"{test_file}::{t}" for t in tests),
                claims=(bug.file,),
                allow_shared_claims=True,
            )
        )
    return Plan(goal="make the test suite pass", tasks=tuple(tasks))


@dataclass
class Life:
    number: int
    crash: str  # HILBERT_CRASH_AT, "" for none
    returncode: int = 0
    point: str | None = None  # the crash_point it wrote, if it was killed there
    output: str = ""

    @property
    def killed(self) -> bool:
        return self.returncode in (-9, 137)


@dataclass
class Drill:
    """One run of `hilbert` on a sample project in `home`, lived through many processes."""

    home: Path
    seed: int
    bugs: int
    workers: int
    base_url: str
    lives: list[Life] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.project = generate_sample_project(
            self.home / "repo", self.seed, bugs=self.bugs, modules=(self.bugs + 2) // 3 + 1
        )
        commit_all(self.project.path)
        self.plan = plan_of(self.project)
        (self.home / "PLAN.md").write_text(write_plan(self.plan))
        # a person's config: more attempts per task (the poisoned lives reject some candidates)
        (self.home / "hilbert.toml").write_text("[fleet]\nmax_attempts = 6\nmerge_batch = 8\n")
        # the wrapper and its switch sit in a folder on PATH: the sandbox gives commands a private /tmp
        # but binds PATH's folders back (read-only), so the merge checks see the switch flip
        bin_dir = self.home / "bin"
        bin_dir.mkdir()
        self.poison = bin_dir / "poisoned"
        self.check = bin_dir / "check.py"
        self.check.write_text(CHECK.format(poison=str(self.poison), package=self.project.package))
        env = command_env(hilbert_python_first=True)
        self.env = {**env, "PATH": f"{bin_dir}:{env['PATH']}", "HILBERT_HOME": str(self.home / "hilbert")}
        self.db = self.home / "hilbert" / "hilbert.db"
        self.model = ["--model", f"openai:fake@{self.base_url}", "--unsandboxed"]

    @property
    def guard(self) -> str:
        """No life outlives this, whatever its own point: ten model calls per worker."""
        return f"model_call:{10 * self.workers}"

    def guarded(self, crash: str) -> str:
        """`crash` with the guard, unless it is a model_call point already (one K per kind)."""
        if not crash or crash.startswith("model_call:"):
            return crash
        return f"{crash},{self.guard}"

    def hilbert(self, *args: str, crash: str = "", timeout: int = 900) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, HILBERT_CRASH_AT=crash) if crash else self.env
        return subprocess.run(
            [sys.executable, "-m", "hilbert.ui.cli", *args],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_args(self) -> list[str]:
        test_command = f"python {self.check}"
        return ["run", "--plan", "PLAN.md", "--repo", "repo", "--workers", str(self.workers),
                "--test-command", test_command, *self.model]  # fmt: skip

    def resume_args(self, run: str = "") -> list[str]:
        return ["run", "--resume", *([run] if run else []), "--repo", "repo", *self.model]

    def live(self, crash: str, *, poisoned: bool = False) -> Life:
        """One process life: the run's first, or a resume; killed at `crash` (with the guard)."""
        life = Life(len(self.lives) + 1, crash)
        if poisoned:
            self.poison.touch()
        try:
            args = self.start_args() if not self.lives else self.resume_args()
            spec = self.guarded(crash)
            done = self.hilbert(*args, crash=spec)
        finally:
            self.poison.unlink(missing_ok=True)
        life.returncode, life.output = done.returncode, (done.stdout[-3000:] + done.stderr[-3000:])
        if life.killed:
            points = self.events(kinds=["crash_point"])
            life.point = points[-1].data["point"] if points else None
        self.lives.append(life)
        return life

    def events(self, *, kinds: list[str] | None = None) -> list[Event]:
        with EventStore.open(self.db) as store:
            return store.events(kinds=kinds)

    @property
    def run(self) -> str:
        return self.events(kinds=["fleet_started"])[0].run

    @property
    def root(self) -> Path:
        return self.home / "hilbert" / "runs" / self.run

    def kills(self) -> Counter[str]:
        """Where the lives were killed: `kind` or `point:name`, from the `crash_point` events."""
        return Counter(e.data["point"].rsplit(":", 1)[0] for e in self.events(kinds=["crash_point"]))


def schedule(rng: random.Random, drill: Drill, *, named_times: int = 2) -> Iterator[tuple[str, bool]]:
    """(crash spec, poisoned) for each life: the named points until each was hit `named_times`, mixed
    with seeded draws over event kinds and positions; never ends (the caller stops at the finish)."""
    while True:
        hits = drill.kills()
        owed = [p for p in NAMED if hits[p] < named_times]
        landing = bool(drill.lives) and bool(drill.events(kinds=["task_attempted"]))
        if owed and landing and rng.random() < 0.8:
            point = rng.choice(owed)
            if point == "point:after_ref_moved":
                yield "point:after_ref_moved:1", False
            elif point == "merge_bisect":
                yield "merge_bisect:1", True
            else:
                yield f"gate_verdict:{rng.randint(1, 3)}", False
            continue
        kind, most = rng.choice(DRAWN if landing else DRAWN[:4])
        low, high = (drill.workers, most * drill.workers) if kind in PER_WORKER else (1, most)
        yield (f"{kind}:{rng.randint(low, high)}" if not kind.startswith("point:") else f"{kind}:1"), False
