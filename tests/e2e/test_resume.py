"""A fleet of 32 workers on 40 bugs and two tasks that escalate to the lead, killed (SIGKILL, at
points its own log defines) again and again and resumed with `hilbert run --resume` each time until
it finishes, through the real command line and a fake model server with latency and faults (the
drill: `resume_support.py`). `make soak` (`HILBERT_RESUME_SOAK=1`) kills it at each named point twice
and 50 times in all; `make test` runs 6 workers on 8 bugs and kills it at each named point once.
A run that finishes before the kills are in is followed by a fresh one.

What a person relies on afterwards, for each run: every task merged exactly once (in the log and on
the branch); the integration branch passes the suite from a fresh clone; every agent's log is whole
(its `seq` runs 1, 2, 3, ...); no workspace holding unmerged work was deleted unarchived; the lead's
proposal waiting for the person survived, held once; a resumed worker's first request is the
conversation the log holds; few attempts start over; `hilbert status` of a killed run says how to
resume it; a second resume of a live run is refused, naming it; resuming a finished run says so.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from resume_support import NAMED, Drill, DrillModel, Life, Sweep, asked_for, holding_resumes, schedule

from hilbert.fleet.proposals import proposals
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.openai_chat_wire import parse
from hilbert.workspaces.integration import INTEGRATION

SOAK = os.environ.get("HILBERT_RESUME_SOAK") == "1"
# `make test`: a small fleet (8 bugs, 6 workers: beside the rest of the suite on two cores), each
# named point once; `make soak`: 40 bugs, 32 workers, each named point twice, 50 kills in all
BUGS, WORKERS, KILLS, TWICE = (40, 32, 50, 2) if SOAK else (8, 6, 4, 1)
if os.environ.get("HILBERT_RESUME_SIZE"):  # BUGS,WORKERS,KILLS: a smaller drill while working on it
    BUGS, WORKERS, KILLS = map(int, os.environ["HILBERT_RESUME_SIZE"].split(","))
LATENCY = "ttft=0.05,tps=2000"
FAULTS = "429=0.05,529=0.02"


@dataclass
class Resumed:
    """What the checks of each run counted, for the sweep's figures."""

    attempts: Counter[str] = field(default_factory=Counter)  # `attempt_resumed` by how
    first_requests: int = 0  # continued attempts whose first request was checked against the log
    proposals: int = 0  # held for the person, and pending still at the end
    holding_messages: int = 0  # continued attempts whose conversation held a message delivered before
    reshown: int = 0  # lead sessions after a kill that were shown the dead session's messages again


@pytest.mark.timeout(3600 if SOAK else 1800)
def test_a_fleet_killed_over_50_times_resumes_to_the_same_end(tmp_path: Path) -> None:
    seed = int(os.environ.get("HILBERT_RESUME_SEED", random.randrange(1_000_000)))
    rng = random.Random(seed)
    resumed = Resumed()
    with FakeServer(DrillModel(seed), seed=seed, latency=LATENCY, faults=FAULTS) as server:
        sweep = Sweep(tmp_path, seed, BUGS, WORKERS, server.openai_base_url)
        drill, refused = sweep.fresh(), False
        while True:
            hits = sweep.kills()
            # until some resumed attempt has held a delivered message, lives die at a delivery
            hold = not any(holding_resumes(d.events()) for d in sweep.drills if d.lives)
            wanted = hits.total() < KILLS or any(hits[point] < TWICE for point in NAMED) or hold
            crash, poisoned = ("", False)
            if wanted:
                crash, poisoned = schedule(rng, drill, hits, named_times=TWICE, hold=hold)
            if len(drill.lives) == 2 and not refused:
                life, refused = refused_while_live(drill, crash, seed), True
            else:
                life = drill.live(crash, poisoned=poisoned)
            why = f"seed {seed}, run {len(sweep.drills)}, life {life.number} ({life.crash or 'no kill'})"
            why += f": {life.output}"
            if not life.killed:  # the run finished: check it; a fresh one if kills are still wanted
                # exit status 1: not every task is done (the lead settled the ask tasks as impossible)
                assert life.returncode == 1 and drill.events(kinds=["fleet_finished"]), why
                check_run(drill, server.requests, resumed, seed)
                if not wanted:
                    break
                drill = sweep.fresh()
                continue
            assert life.point is not None, why  # killed by its own crash point, not by anything else
            assert "Traceback" not in life.output, why
            if sweep.lives in (1, 20):
                status = drill.hilbert("status")
                assert "interrupted" in status.stdout, (why, status.stdout)
                assert f"hilbert run --resume {drill.run}" in status.stdout, (why, status.stdout)
            # a small drill needs more lives per kill: its named points come round less often
            assert sweep.lives < max(4 * KILLS + 20, 60), f"seed {seed}: the sweep does not end: {dict(hits)}"

    kills = sweep.kills()
    print(
        f"seed {seed}: {kills.total()} kills over {sweep.lives} lives of {len(sweep.drills)} run(s):"
        f" {dict(kills)}; resumed attempts {dict(resumed.attempts)};"
        f" first requests checked {resumed.first_requests}; proposals pending {resumed.proposals};"
        f" resumed holding messages {resumed.holding_messages}; lead sessions shown again {resumed.reshown}"
    )
    assert resumed.first_requests and resumed.proposals and resumed.holding_messages, (seed, resumed)
    assert resumed.reshown, (seed, resumed)
    restarted = resumed.attempts["restarted"]
    assert restarted <= 0.1 * resumed.attempts.total(), (seed, dict(resumed.attempts))


def check_run(drill: Drill, requests: list[dict[str, Any]], resumed: Resumed, seed: int) -> None:
    """A finished run of the sweep: resuming it says so; then what a person relies on."""
    finished = drill.hilbert(*drill.resume_args(drill.run))
    assert finished.returncode == 0 and "finished already" in finished.stdout, finished.stdout
    with EventStore.open(drill.db) as store:
        events = store.events(run=drill.run)
        check_merged_once(drill, events, seed)
        check_proposals(drill, store, events, resumed, seed)
        check_green_clone(drill, seed)
        check_sequences(events, seed)
        check_workspaces(drill, events, seed)
        check_resumed_requests(store, events, requests, resumed, seed)


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
    """One `merged` per task once reconciled (a lost merge would be re-merged), one merge on the branch
    (but for a task whose bug another task's fix had fixed already: its candidate changed nothing, so
    no merge commit), no patch applied twice. The ask tasks were settled, never merged."""
    merged = Counter(e.data["task"] for e in events if e.kind == "merged")
    for e in events:
        if e.kind == "merge_reconciled" and e.data["how"] == "merge_lost":
            merged.subtract(e.data["tasks"])
    asks = drill.asks
    tasks = [t.id for t in drill.plan.tasks if t.id not in asks]
    if +merged != Counter(tasks):  # what became of the others, and why
        state = drill.state()
        whys = {t: why[:300] for t, why in state.feedback.items() if t not in merged}
        raise AssertionError((seed, merged, {t: s.status for t, s in state.states.items()}, whys))
    integration = drill.root / "integration.git"
    log = git(integration, "log", "--first-parent", "--format=%H %s", INTEGRATION).splitlines()
    landed = Counter(m.group(1) for line in log if (m := re_merge(line.split(" ", 1)[1])))
    # a task whose worker found its bug fixed already (by another task's fix) has a candidate the branch
    # held before its landing: merging it changed nothing, so it has no merge commit of its own
    before = {task: e.data["old"] for e in events if e.kind == "merge_landing" for task in e.data["tasks"]}
    refs = {e.data["task"]: e.data["ref"] for e in events if e.kind == "merged"}
    empty = {
        task
        for task in set(tasks) - set(landed)
        if task in before and task in refs and _is_ancestor(integration, refs[task], before[task])
    }
    assert landed + Counter(empty) == Counter(tasks), (seed, landed, empty)
    # no patch applied twice: each merge commit's change is its own
    patches = git(integration, "log", "--first-parent", "-m", "--format=%H", "-p", INTEGRATION)
    ids = subprocess.run(
        ["git", "patch-id", "--stable"], input=patches, capture_output=True, text=True, check=True
    ).stdout.split()[::2]
    assert len(ids) == len(set(ids)), (seed, Counter(ids).most_common(3))


def check_proposals(
    drill: Drill, store: EventStore, events: list[Event], resumed: Resumed, seed: int
) -> None:
    """Each ask task was settled by the lead, and a task a worker asked for waits for the person:
    held once (a session killed after holding it left it pending; the next one, shown the same
    messages again, did not hold it again), never applied."""
    final = {e.data["task"]: e.data["status"] for e in events if e.kind == "task_state"}
    for task in drill.asks:
        assert final[task] == "impossible", (seed, task, final[task])
    held = Counter(p.what() for p in proposals(store, drill.run))
    asked = {f'add_task {asked_for(task)} "write RELEASE-{task}.txt"' for task in drill.asks}
    assert set(held) <= asked and set(held.values()) <= {1}, (seed, held)
    assert all(p.status == "pending" for p in proposals(store, drill.run)), seed
    assert not any(e.data["added"] for e in events if e.kind == "plan_changed"), seed
    resumed.proposals += len(held)
    # a session killed while holding a proposal: the next one was shown the messages it had read
    kills = [e for e in events if e.kind == "crash_point" and e.data["point"].startswith("proposal_held")]
    for crash in kills:
        opened = max(e.id for e in events if e.kind == "lead_consulted" and e.id < crash.id)
        reopened = min(e.id for e in events if e.kind == "lead_consulted" and e.id > crash.id)
        read = {e.data.get("source") for e in events if e.agent == "lead" and opened < e.id < crash.id}
        shown = {e.data.get("source") for e in events if e.agent == "lead" and reopened < e.id}
        assert read - {None} and read - {None} <= shown, (seed, read, shown)
        resumed.reshown += 1


def _is_ancestor(repo: Path, commit: str, of: str) -> bool:
    found = subprocess.run(["git", "--git-dir", str(repo), "merge-base", "--is-ancestor", commit, of])
    return found.returncode == 0


def re_merge(subject: str) -> re.Match[str] | None:
    return re.match(r"merge (T\d+) \(", subject)


def check_green_clone(drill: Drill, seed: int) -> None:
    clone = drill.home / "clone"
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
    store: EventStore, events: list[Event], requests: list[dict[str, Any]], resumed: Resumed, seed: int
) -> None:
    """For each attempt continued at a resume: its first model call sent exactly the conversation its
    `agent_started` logged (plus what was injected before the call), and the server received it.
    How the attempts resumed is counted in `resumed` (few may start over, over the whole sweep)."""
    received = set()
    for request in requests:
        if request.get("status") == 200 and request.get("protocol") == "openai-chat":
            conversation = parse(request["body"]).conversation
            received.add(wire((conversation.system, *conversation.messages)))
    attempts = [e for e in events if e.kind == "attempt_resumed"]
    resumed.attempts.update(e.data["how"] for e in attempts)
    for e in attempts:
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
        # and no message its conversation holds was delivered to it again
        held = {x.data["source"] for x in events if x.agent == agent and x.id < e.id and x.data.get("source")}
        again = {x.data.get("source") for x in after if x.kind == "message_injected"}
        assert not again & held, (seed, agent)
        resumed.holding_messages += bool(held)
        sent = store.get_messages(first.data.get("sent") or first.data["request"])
        system = sent[0].content if sent and sent[0].role == "system" else ""
        rest = sent[1:] if system else sent
        assert wire((system, *rest)) in received, (seed, agent, "the server never received it")
        resumed.first_requests += 1


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
