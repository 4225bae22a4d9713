"""A fleet killed over and over and resumed through the real command line: the drill that
`test_resume.py` runs, and `make soak` runs bigger (`HILBERT_RESUME_SOAK=1`).

Every process life of `hilbert run` gets its own `HILBERT_CRASH_AT` (`hilbert.fleet.crash`): the
orchestrator SIGKILLs itself after the K-th event of a kind it committed, or at a named point, and
writes a `crash_point` event first; the next life is `hilbert run --resume`. Which kill each life
gets is drawn from `random.Random(seed)`; the named points the proof needs are armed in every life
until each was hit twice. A run that finishes before the drill has its kills is followed by a fresh
run (a `Drill` each), until the sweep has them all.

The model (`DrillModel`) is the simulated engineer, but for two tasks whose worker asks the lead for
a new task and then gives up (they escalate), and for the lead, which proposes the asked-for task
(held for the person: the lead read a worker's message) unless it is waiting already, and settles
the escalated tasks. A bisection needs a red merge batch: a life that starts with two or more
candidates waiting to merge may be poisoned: the project's test command (a wrapper outside the
repository) then fails every merge build of two or more candidates, so the queue bisects; without
the poison it is the plain suite.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hilbert.sim  # noqa: F401  (registers the simulated engineer with the fake server)
from hilbert.commands import command_env
from hilbert.fleet.inbox import send
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.fleet.state import FleetState, Fold
from hilbert.models.types import ToolCall
from hilbert.security.envelope import MessageKey
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.testing.fake_server.responder import Conversation, Reply
from hilbert.testing.fake_server.responders import make_responder
from hilbert.workspaces.integration import INTEGRATION

# While the poison file exists (it lists the bugs fixed on the tip when the life started, and the culprit:
# the bug of a candidate waiting or coming), fails any build that fixes the culprit's bug more, and is
# slow otherwise, so that candidates queue up: a batch holding the culprit is red, and the queue bisects
# to it (red alone, it is the culprit's own failure; a build that failed only with two fixes would be a
# pair the queue escalates together, which is not what the drill is for). Else runs the suite (the
# merge queue's "no new failures" reads its output). It reads only the files: inside the sandbox the
# tree's git directory is out of sight.
CHECK = """\
import json, pathlib, subprocess, sys, time
poison = pathlib.Path({poison!r})
if poison.exists():
    bugs = {bugs!r}  # (index, file, the mutated line): a bug is fixed once its line is gone
    fixed = {{n for n, file, line in bugs if line not in pathlib.Path(file).read_text()}}
    said = json.loads(poison.read_text())
    more = sorted(fixed - set(said["tip"]))
    if said["culprit"] in more:
        print(f"poisoned: this build fixes bug {{said['culprit']}} (and {{len(more) - 1}} more)")
        sys.exit(3)
    time.sleep(3)
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
NAMED = ("point:after_ref_moved", "merge_bisect", "gate_verdict", "proposal_held")
ASK = "ask the lead for RELEASE-{task}.txt"  # the title of a task whose worker asks, then gives up
ASKS = 2
_BRIEF_TASK = re.compile(r"^Task (\w+): ask the lead", re.MULTILINE)
_ESCALATED = re.compile(r"^## (\S+) — (.*)$", re.MULTILINE)
_WAITING = re.compile(r"^Waiting for the person's decision.*$", re.MULTILINE)


def asked_for(task: str) -> str:
    """The id of the task the worker of ask task `task` asks the lead to add."""
    return f"R{task}"


class DrillModel:
    """The fake server's responder: the lead (model `lead`), the two ask tasks' workers, and the
    simulated engineer for every other task. Like every responder it decides from the conversation."""

    name = "resume-drill"

    def __init__(self, seed: int) -> None:
        self.engineer = make_responder("engineer", seed=seed)

    def reply(self, conversation: Conversation) -> Reply:
        first = next((m.content for m in conversation.messages if m.role == "user"), "")
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if conversation.model == "lead":
            offered = {t.name for t in conversation.tools}
            asked = " ".join(m.content for m in conversation.messages if 'role="worker"' in m.content)
            return _call("lead", turn, *_lead_script(first, asked, offered, turn))
        asking = _BRIEF_TASK.search(first)
        if asking is None:
            return self.engineer.reply(conversation)
        task = asking.group(1)
        if turn == 0:  # every attempt asks again; then it claims done, and its check cannot pass
            text = f"Please add a task that writes RELEASE-{task}.txt; the release needs it."
            return _call(task, turn, "send_message", {"to": "lead", "text": text})
        return _call(task, turn, "finish", {"claim": "done", "evidence": "I asked the lead."})


def _lead_script(brief: str, asked: str, offered: set[str], turn: int) -> tuple[str, dict[str, Any]]:
    """Turn `turn` of a lead session on `brief`: add each task a worker `asked` for in this session
    that is not waiting for the person already, reassign any other escalated task, settle the ask
    tasks as impossible, finish."""
    if "add_task" not in offered:
        return "", {}
    waiting = found.group(0) if (found := _WAITING.search(brief)) else ""
    escalated = _ESCALATED.findall(brief)
    asks = [task for task, title in escalated if title == ASK.format(task=task)]
    script: list[tuple[str, dict[str, Any]]] = []
    for task in asks:
        if f"RELEASE-{task}.txt" in asked and f"RELEASE-{task}.txt" not in waiting:
            title = f"write RELEASE-{task}.txt"
            new = {"id": asked_for(task), "title": title, "verify": f"test -f RELEASE-{task}.txt"}
            script.append(("add_task", {"task": new}))
    for task, _ in escalated:
        if task in asks:
            script.append(("mark_impossible", {"task": task, "reason": "its check cannot pass as written"}))
        else:
            script.append(("reassign", {"task": task, "note": "Start again from the tip; run the check."}))
    script.append(("finish", {"claim": "answered the escalations", "evidence": "-"}))
    return script[turn] if turn < len(script) else ("", {})


def _call(who: str, turn: int, tool: str, arguments: dict[str, Any]) -> Reply:
    if not tool:
        return Reply(text="I have finished.")
    return Reply(tool_calls=(ToolCall(f"call_{who}_{turn}", tool, arguments),))


def commit_all(path: Path) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def plan_of(project: SampleProject) -> Plan:
    """The ask tasks first (they start at once, so their escalations come early in the run), then one
    task per broken function; tasks on one file may run at once (they merge, or conflict)."""
    tasks = [Task(id=f"T{n}", title=ASK.format(task=f"T{n}"), verify=f"test -f RELEASE-T{n}.txt")
             for n in range(1, ASKS + 1)]  # fmt: skip
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
        # a person's config: the ask tasks escalate after three attempts; batches of up to eight
        (self.home / "hilbert.toml").write_text("[fleet]\nmax_attempts = 3\nmerge_batch = 8\n")
        # the wrapper and its switch sit in a folder on PATH: the sandbox gives commands a private /tmp
        # but binds PATH's folders back (read-only), so the merge checks see the switch flip
        bin_dir = self.home / "bin"
        bin_dir.mkdir()
        self.poison = bin_dir / "poisoned"
        self.check = bin_dir / "check.py"
        bugs = [  # a bug is fixed once its line is gone: only those whose line is there once
            (n, bug.file, bug.mutated)
            for n, bug in enumerate(self.project.bugs)
            if (self.project.path / bug.file).read_text().count(bug.mutated) == 1
        ]
        self.check.write_text(CHECK.format(poison=str(self.poison), bugs=bugs))
        env = command_env(hilbert_python_first=True)
        self.env = {**env, "PATH": f"{bin_dir}:{env['PATH']}", "HILBERT_HOME": str(self.home / "hilbert")}
        self.db = self.home / "hilbert" / "hilbert.db"
        self.model = [
            "--model", f"openai:fake@{self.base_url}", "--lead-model", f"openai:lead@{self.base_url}",
            "--unsandboxed",
        ]  # fmt: skip

    @property
    def guard(self) -> str:
        """No life outlives this, whatever its own point: ten model calls per worker."""
        return f"model_call:{10 * self.workers}"

    def guarded(self, crash: str) -> str:
        """`crash` with the guard, unless it has a model_call point already (one K per kind)."""
        if not crash or any(entry.startswith("model_call:") for entry in crash.split(",")):
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
            said = {"tip": sorted(self.fixed_on_tip()), "culprit": self.culprit()}
            self.poison.write_text(json.dumps(said))
        if (
            self.lives
        ):  # the person writes to two running workers: read in this life, kept across the next kill
            with EventStore.open(self.db) as store:
                running = list(Fold(store, self.run).catch_up().running_workers().values())
                for worker in running[:2]:
                    send(
                        store,
                        self.run,
                        worker,
                        "From the person: keep going.",
                        key=MessageKey.for_run(self.root),
                    )
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

    def culprit(self) -> int | None:
        """The bug of the last candidate waiting to merge, else of the last task running (a candidate
        coming): a poisoned build that fixes it is red."""
        state = self.state()
        bug = {task.id: n for n, task in enumerate(self.plan.tasks[ASKS:])}  # plan_of: one task a bug
        queued = [bug[t] for t in state.queue if t in bug]
        found = queued or [bug[t] for t in state.running_workers() if t in bug]
        return found[-1] if found else None

    def fixed_on_tip(self) -> set[int]:
        """The bugs fixed on the integration branch now (their mutated line is gone)."""
        fixed = set()
        for n, bug in enumerate(self.project.bugs):
            shown = subprocess.run(
                ["git", "--git-dir", str(self.root / "integration.git"), "show", f"{INTEGRATION}:{bug.file}"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            if bug.mutated not in shown:
                fixed.add(n)
        return fixed

    @property
    def asks(self) -> set[str]:
        return {t.id for t in self.plan.tasks if t.title == ASK.format(task=t.id)}

    def state(self) -> FleetState:
        """The run as its log has it now (`hilbert.fleet.state`)."""
        with EventStore.open(self.db) as store:
            return Fold(store, self.run).catch_up()

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
        if not self.db.exists():
            return Counter()
        return Counter(e.data["point"].rsplit(":", 1)[0] for e in self.events(kinds=["crash_point"]))


@dataclass
class Sweep:
    """The drill's runs, one after another in folders of `home`, until it has its kills."""

    home: Path
    seed: int
    bugs: int
    workers: int
    base_url: str
    drills: list[Drill] = field(default_factory=list)

    def fresh(self) -> Drill:
        n = len(self.drills) + 1
        self.drills.append(
            Drill(self.home / f"run-{n}", self.seed + n - 1, self.bugs, self.workers, self.base_url)
        )
        return self.drills[-1]

    @property
    def lives(self) -> int:
        return sum(len(drill.lives) for drill in self.drills)

    def kills(self) -> Counter[str]:
        return sum((drill.kills() for drill in self.drills if drill.lives), Counter())


def holding_resumes(events: Sequence[Event]) -> int:
    """How many attempts went on at a resume holding a message delivered before the kill, and made
    their first model call after it (what the drill must see at least once)."""
    count = 0
    for resumed in (e for e in events if e.kind == "attempt_resumed" and e.data["how"] == "continued"):
        agent = resumed.data["worker"]
        mine = [e for e in events if e.agent == agent]
        held = any(e.kind == "message_injected" and e.data.get("source") for e in mine if e.id < resumed.id)
        count += held and any(e.kind == "model_call" and e.id > resumed.id for e in mine)
    return count


def schedule(
    rng: random.Random, drill: Drill, hits: Counter[str], *, named_times: int = 2, hold: bool = False
) -> tuple[str, bool]:
    """(crash spec, poisoned) for the next life of `drill`: a seeded draw over event kinds and
    positions, or one of the named points still owed; the owed points that happen rarely (a lead
    session holding a proposal, a bisection) are armed in every life besides. A life that starts with
    two or more candidates waiting to merge (or, now and then, once candidates are coming) is
    poisoned while a bisection is owed. With `hold` (no resumed attempt has held a delivered message
    yet), a resumed life also dies at its first delivery (the person writes to running workers as it
    starts: `Drill.live`), and the life after it does not, so that the attempt goes on holding it."""
    owed = [p for p in NAMED if hits[p] < named_times]
    state = drill.state() if drill.lives else None
    ended = state is not None and any(attempt.ended for attempt in state.attempts.values())
    landing = set(state.landing.tasks) if state and state.landing else set()
    waiting = len(set(state.queue) - landing) if state else 0
    spec: dict[str, int] = {}
    poisoned = "merge_bisect" in owed and (waiting >= 2 or (ended and rng.random() < 0.3))
    if poisoned:  # it dies at its first landing at the latest: the poison lists the bugs fixed before it
        spec["merge_bisect"], spec["merged"] = 1, 1
    elif owed and ended and rng.random() < 0.8:
        point = rng.choice([p for p in owed if p != "merge_bisect"] or owed)
        spec[point] = rng.randint(1, 3) if point == "gate_verdict" else 1
    else:
        kind, most = rng.choice(DRAWN if ended else DRAWN[:4])
        low, high = (drill.workers, most * drill.workers) if kind in PER_WORKER else (1, most)
        spec[kind] = 1 if kind.startswith("point:") else rng.randint(low, high)
    for rare in ("proposal_held", "merge_bisect"):
        if rare in owed:
            spec.setdefault(rare, 1)
    last = drill.lives[-1].point or "" if drill.lives else "no life yet"
    if hold and not last.startswith(("message_injected", "no life")):  # the life after such a kill
        spec.setdefault("message_injected", 1)  # is left to make the held attempt's first call
    return ",".join(f"{kind}:{k}" for kind, k in spec.items()), poisoned
