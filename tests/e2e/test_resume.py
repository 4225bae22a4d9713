"""A fleet of 32 workers on 40 bugs, killed (SIGKILL, at points its own log defines) more than 50
times and resumed with `hilbert run --resume` each time until it finishes, through the real command
line and a fake model server with latency and faults (the drill: `resume_support.py`).

What a person relies on afterwards: every task merged exactly once (in the log and on the branch);
the integration branch passes the suite from a fresh clone; every agent's log is whole (its `seq`
runs 1, 2, 3, ...); no workspace holding unmerged work was deleted unarchived; a resumed worker's
first request is the conversation the log holds; few attempts start over; `hilbert status` of a
killed run says how to resume it; a second resume of a live run is refused, naming it; resuming a
finished run says so. `HILBERT_RESUME_SOAK=1` (`make soak`) runs bigger fleets and more kills.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from resume_support import NAMED, Drill, Life, schedule

from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.openai_chat_wire import parse
from hilbert.workspaces.integration import INTEGRATION

SOAK = os.environ.get("HILBERT_RESUME_SOAK") == "1"
BUGS, WORKERS, KILLS = (40, 32, 50) if SOAK else (40, 32, 12)  # make test: 12 kills, named points among them
# every named point twice in the soak; in `make test` a mid-bisection kill is tried, not required (a red
# batch of two or more candidates needs candidates to queue up at the right moment: not every seed does)
REQUIRED = NAMED if SOAK else tuple(point for point in NAMED if point != "merge_bisect")
if os.environ.get("HILBERT_RESUME_SIZE"):  # BUGS,WORKERS,KILLS: a smaller drill while working on it
    BUGS, WORKERS, KILLS = map(int, os.environ["HILBERT_RESUME_SIZE"].split(","))
LATENCY = "ttft=0.05,tps=2000"
FAULTS = "429=0.05,529=0.02"


@pytest.mark.soak  # issue 13: a run can end before its kill quota (a drawn point past its end); see the notes
@pytest.mark.timeout(3600 if SOAK else 1200)
def test_a_fleet_killed_over_50_times_resumes_to_the_same_end(tmp_path: Path) -> None:
    seed = int(os.environ.get("HILBERT_RESUME_SEED", random.randrange(1_000_000)))
    rng = random.Random(seed)
    with FakeServer("engineer", seed=seed, latency=LATENCY, faults=FAULTS) as server:
        drill = Drill(tmp_path, seed, BUGS, WORKERS, server.openai_base_url)
        draws = schedule(rng, drill)
        while True:
            kills = drill.kills()
            owed = any(kills[point] < 2 for point in REQUIRED)
            crash, poisoned = next(draws) if kills.total() < KILLS or owed else ("", False)
            if len(drill.lives) == 3:
                life = refused_while_live(drill, crash, seed)
            else:
                life = drill.live(crash, poisoned=poisoned)
            why = f"seed {seed}, life {life.number} ({life.crash or 'no kill'}): {life.output}"
            if not life.killed:
                assert life.returncode == 0, why
                break
            assert life.point is not None, why  # killed by its own crash point, not by anything else
            assert "Traceback" not in life.output, why
            if len(drill.lives) in (1, 20):
                status = drill.hilbert("status")
                assert "interrupted" in status.stdout, (why, status.stdout)
                assert f"hilbert run --resume {drill.run}" in status.stdout, (why, status.stdout)
            assert len(drill.lives) < 4 * KILLS, f"seed {seed}: the run does not finish"
        requests = server.requests

    kills = drill.kills()
    lives = [f"{life.number}:{life.crash}->{life.point}" for life in drill.lives]
    print(f"seed {seed}: {kills.total()} kills over {len(drill.lives)} lives: {dict(kills)}")
    assert kills.total() >= KILLS, (seed, lives)
    assert all(kills[point] >= 2 for point in REQUIRED), (seed, dict(kills), lives)
    finished = drill.hilbert(*drill.resume_args(drill.run))
    assert finished.returncode == 0 and "finished already" in finished.stdout, finished.stdout

    with EventStore.open(drill.db) as store:
        events = store.events(run=drill.run)
        check_merged_once(drill, events, seed)
        check_green_clone(drill, tmp_path, seed)
        check_sequences(events, seed)
        check_workspaces(drill, events, seed)
        check_resumed_requests(store, events, requests, seed)


def refused_while_live(drill: Drill, crash: str, seed: int) -> Life:
    """A life held still (SIGSTOP) once its resume is logged: a second `--resume` must be refused,
    naming the live process; then the life goes on to its own crash point."""
    env = dict(drill.env, HILBERT_CRASH_AT=drill.guarded(crash))
    before = len(drill.events(kinds=["fleet_resumed"]))
    life = Life(len(drill.lives) + 1, crash)
    output = drill.home / f"life-{life.number}.txt"
    with output.open("w") as sink:  # a file, not a pipe: nobody reads a pipe while the life is held
        proc = subprocess.Popen(
            [sys.executable, "-m", "hilbert.ui.cli", *drill.resume_args()],
            cwd=drill.home, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        while len(drill.events(kinds=["fleet_resumed"])) == before and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGSTOP)
        second = drill.hilbert(*drill.resume_args(drill.run))
        os.kill(proc.pid, signal.SIGCONT)
        said = second.stdout + second.stderr
        assert second.returncode != 0 and "is live" in said and str(proc.pid) in said, (seed, said)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    life.returncode, life.output = proc.returncode, output.read_text()[-6000:]
    if life.killed:
        life.point = drill.events(kinds=["crash_point"])[-1].data["point"]
    drill.lives.append(life)
    return life


def check_merged_once(drill: Drill, events: list[Event], seed: int) -> None:
    """One `merged` per task once reconciled (a lost merge would be re-merged), one merge on the branch."""
    merged = Counter(e.data["task"] for e in events if e.kind == "merged")
    for e in events:
        if e.kind == "merge_reconciled" and e.data["how"] == "merge_lost":
            merged.subtract(e.data["tasks"])
    tasks = [t.id for t in drill.plan.tasks]
    assert merged == Counter(tasks), (seed, merged)
    integration = drill.root / "integration.git"
    log = git(integration, "log", "--first-parent", "--format=%s", INTEGRATION).splitlines()
    landed = Counter(m.group(1) for line in log if (m := re_merge(line)))
    assert landed == Counter(tasks), (seed, landed)
    # no patch applied twice: each merge commit's change is its own
    patches = git(integration, "log", "--first-parent", "-m", "--format=%H", "-p", INTEGRATION)
    ids = subprocess.run(
        ["git", "patch-id", "--stable"], input=patches, capture_output=True, text=True, check=True
    ).stdout.split()[::2]
    assert len(ids) == len(set(ids)), (seed, Counter(ids).most_common(3))


def re_merge(subject: str) -> re.Match[str] | None:
    return re.match(r"merge (T\d+) \(", subject)


def check_green_clone(drill: Drill, tmp_path: Path, seed: int) -> None:
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "-b", INTEGRATION, str(drill.root / "integration.git"), str(clone)], check=True
    )
    suite = subprocess.run(
        ["python", "-m", "pytest", "-q"], cwd=clone, env=drill.env, capture_output=True, text=True
    )
    assert suite.returncode == 0, (seed, suite.stdout[-2000:])


def check_sequences(events: list[Event], seed: int) -> None:
    by_agent: dict[str, list[int]] = defaultdict(list)
    for e in events:
        by_agent[e.agent].append(e.seq)
    for agent, seqs in by_agent.items():
        assert seqs == list(range(1, len(seqs) + 1)), (seed, agent, seqs[:5])


def check_workspaces(drill: Drill, events: list[Event], seed: int) -> None:
    """Every worker's workspace is there still, or was closed: removed with its work in the integration
    repository, or archived (and the archive is there)."""
    closed = {e.data["worker"]: e.data["message"] for e in events if e.kind == "workspace_closed"}
    archive = drill.root / "archive"
    for e in events:
        if e.kind != "task_started":
            continue
        worker, workspace = e.data["worker_id"], Path(e.data["workspace"])
        if workspace.exists():
            continue
        message = closed.get(worker)
        assert message is not None, (seed, worker, "its workspace is gone, and the log never closed it")
        if "archived" in message:
            assert archive.is_dir() and any(worker in p.name for p in archive.iterdir()), (seed, message)
        else:
            ref = re_ref(message)
            assert ref is not None, (seed, message)
            found = subprocess.run(
                ["git", "--git-dir", str(drill.root / "integration.git"), "rev-parse", "--verify", "-q", ref],
                capture_output=True,
            )
            assert found.returncode == 0, (seed, message)


def re_ref(message: str) -> str | None:
    found = re.search(r"merged into (\S+?)\)", message)
    return found.group(1) if found else None


def check_resumed_requests(
    store: EventStore, events: list[Event], requests: list[dict[str, Any]], seed: int
) -> None:
    """For each attempt continued at a resume: its first model call sent exactly the conversation its
    `agent_started` logged (plus what was injected before the call), and the server received it.
    Few resumed attempts start over."""
    received = set()
    for request in requests:
        if request.get("status") == 200 and request.get("protocol") == "openai-chat":
            conversation = parse(request["body"]).conversation
            received.add(wire((conversation.system, *conversation.messages)))
    resumed = [e for e in events if e.kind == "attempt_resumed"]
    assert resumed, seed
    restarted = [e for e in resumed if e.data["how"] == "restarted"]
    assert len(restarted) <= 0.1 * len(resumed), (seed, Counter(e.data["how"] for e in resumed))
    checked = 0
    for e in resumed:
        if e.data["how"] != "continued":
            continue
        agent = e.data["worker"]
        after = [x for x in events if x.agent == agent and x.id > e.id]
        started = next(x for x in after if x.kind == "agent_started")
        first = next((x for x in after if x.kind == "model_call" and x.id > started.id), None)
        if first is None:  # killed again before its first call was logged
            continue
        injected = [
            x.data["message"] for x in after if x.kind == "message_injected" and started.id < x.id < first.id
        ]
        assert first.data["request"] == started.data["messages"] + injected, (seed, agent)
        sent = store.get_messages(first.data.get("sent") or first.data["request"])
        system = sent[0].content if sent and sent[0].role == "system" else ""
        rest = sent[1:] if system else sent
        assert wire((system, *rest)) in received, (seed, agent, "the server never received it")
        checked += 1
    assert checked, seed


def wire(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    system, *messages = parts
    rows = [("system", system, ())]
    for m in messages:
        ids = tuple(c.id for c in m.tool_calls) + ((m.tool_call_id,) if m.tool_call_id else ())
        rows.append((m.role, m.content, ids))
    return tuple(rows)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout
