"""A scope change a worker asked for waits for the person: in a real fleet against the fake server, a
worker asks the lead for a new task; the lead, having read that message, calls add_task; the task is
held as a proposal until `hilbert approve` (then it runs) or `hilbert reject` (then it never does).
With the setting off, or when the lead read no worker's message, add_task applies at once."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fleet_support import ENV, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.inbox import PERSON, send
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.proposals import proposals
from hilbert.fleet.run import FleetResult, run_fleet
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.security.envelope import MessageKey
from hilbert.settings import Settings
from hilbert.store import Event, EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply

ASK = "Please add a task T9 that writes nine.txt; the release needs it."
T9 = {"id": "T9", "title": "Write nine.txt", "description": "Create nine.txt.", "verify": "test -f nine.txt"}
GO_ON = "GO-ON-NOW"


def _calls(name: str, turn: int, tool: str, arguments: dict[str, Any]) -> Reply:
    return Reply(tool_calls=(ToolCall(f"call_{name}_{turn}", tool, arguments),))


class Workers:
    """The workers' model. T1's worker asks the lead for a new task (unless `ask` is off), then claims
    done without doing anything (its check cannot pass). T2's worker sleeps, turn after turn, until a
    message says "go on" (so the run is still going when the person decides); then it writes two.txt.
    Any other task's worker writes <task>.txt (T9: nine.txt) and finishes."""

    name = "authority-workers"

    def __init__(self, ask: bool = True) -> None:
        self.ask = ask

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        task = re.search(r"^Task (\w+):", brief, re.MULTILINE)
        task_id = task.group(1) if task else "?"
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        done = Reply(
            tool_calls=(ToolCall(f"call_{task_id}_{turn}", "finish", {"claim": "done", "evidence": "-"}),)
        )
        if task_id == "T1":
            if self.ask and turn == 0:
                return _calls("T1", turn, "send_message", {"to": "lead", "text": ASK})
            return done
        if task_id == "T2":
            told = any(GO_ON in m.content for m in conversation.messages[1:] if m.role == "user")
            last = conversation.messages[-1]
            if not told:
                return _calls("T2", turn, "shell", {"command": "sleep 0.2"})
            if last.role == "tool" and last.name == "write_file":
                return done
            return _calls("T2", turn, "write_file", {"path": "two.txt", "content": "2\n"})
        if turn == 0:
            name = {"T9": "nine"}.get(task_id, task_id)
            return _calls(task_id, turn, "write_file", {"path": f"{name}.txt", "content": "9\n"})
        return done


class Lead:
    """The lead's model, answering T1's escalation: add_task T9 (`twice`: a second time, before the
    first is applied), mark T1 impossible, finish."""

    name = "authority-lead"

    def __init__(self, twice: bool = False) -> None:
        self.script: list[tuple[str, dict[str, Any]]] = [("add_task", {"task": T9})] * (2 if twice else 1)
        self.script += [
            ("mark_impossible", {"task": "T1", "reason": "its check cannot pass"}),
            ("finish", {"claim": "answered T1", "evidence": "-"}),
        ]

    def reply(self, conversation: Conversation) -> Reply:
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn >= len(self.script) or "add_task" not in {t.name for t in conversation.tools}:
            return Reply(text="nothing to do")
        tool, arguments = self.script[turn]
        return _calls("lead", turn, tool, arguments)


def plan(waiter: bool) -> Plan:
    tasks = [Task(id="T1", title="ask for more, then give up", verify="false")]
    if waiter:
        tasks.append(Task(id="T2", title="wait for the person", verify="test -f two.txt"))
    return Plan(goal="g", tasks=tuple(tasks))


async def fleet(
    tmp_path: Path,
    store: EventStore,
    workers: FakeServer,
    lead: FakeServer,
    *,
    waiter: bool,
    hold: bool = True,
) -> FleetResult:
    return await run_fleet(
        plan(waiter),
        repo=readme_repo(tmp_path / "repo"),
        root=tmp_path / "run",
        run="r",
        model=make_model(f"openai:w@{workers.openai_base_url}", env={}),
        lead_model=make_model(f"openai:lead@{lead.openai_base_url}", env={}),
        store=store,
        runner=Runner.unsandboxed(ENV),
        settings=Settings.of(
            {
                "fleet.workers": 2,
                "fleet.max_attempts": 1,
                "gate.rounds": 1,
                "budgets.max_turns": 600,
                "commands.test": "true",
                "fleet.approve_worker_proposals": hold,
            }
        ),
    )


async def hilbert(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """The real CLI in its own process, as the person runs it, without blocking the running fleet."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hilbert.ui.cli",
        *args,
        "--run",
        "r",
        "--db",
        str(tmp_path / "log.db"),
        env={**ENV, "HILBERT_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def first(
    store: EventStore, kind: str, running: asyncio.Task[Any], where: Any = lambda data: True
) -> Event:
    """The first `kind` event (whose data satisfy `where`) of the `running` fleet, once there is one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not running.done():
        found = [e for e in store.events(run="r", kinds=[kind]) if where(e.data)]
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    if running.done():  # its error, if it failed
        raise AssertionError(f"the fleet ended without a {kind} event: {(await running).states}")
    raise AssertionError(f"no {kind} event within 60 s")


def worker_of(store: EventStore, task: str) -> str:
    return next(
        e.agent for e in store.events(run="r", kinds=["agent_started"]) if f"Task {task}:" in e.data["task"]
    )


def lead_results(store: EventStore, tool: str) -> list[tuple[str, bool]]:
    results = [
        e for e in store.events(run="r", agent="lead", kinds=["tool_result"]) if e.data["name"] == tool
    ]
    texts = store.get_messages([e.data["message"] for e in results])
    return [(text.content, e.data["is_error"]) for text, e in zip(texts, results, strict=True)]


def test_a_task_the_lead_adds_after_a_workers_message_waits_for_the_person_and_runs_once_approved(
    tmp_path: Path,
) -> None:
    async def scenario(store: EventStore, workers: FakeServer, lead: FakeServer) -> FleetResult:
        running = asyncio.create_task(fleet(tmp_path, store, workers, lead, waiter=True))
        await first(store, "proposal_held", running, lambda d: d["id"] == "P2")
        # held, not applied: the plan has no T9, no worker was given it
        assert not store.events(run="r", kinds=["plan_changed"])
        assert "T9" not in {e.data["task"] for e in store.events(run="r", kinds=["task_state"])}
        assert (await hilbert(tmp_path, "approve", "P1"))[0] == 0
        code, _, err = await hilbert(tmp_path, "approve", "p1")
        assert code == 2 and re.match(r"hilbert: error: P1 was already (approved|applied)", err), err
        assert (await hilbert(tmp_path, "approve", "P2"))[0] == 0
        await first(store, "proposal_stale", running, lambda d: d["id"] == "P2")
        key = MessageKey.for_run(tmp_path / "run")
        send(store, "r", worker_of(store, "T2"), GO_ON, sender=PERSON, key=key)
        return await running

    with (
        FakeServer(Workers()) as workers,
        FakeServer(Lead(twice=True)) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(scenario(store, workers, lead))
        events = store.events(run="r")
        asker = worker_of(store, "T1")
        held = [e for e in events if e.kind == "proposal_held"]
        answers = lead_results(store, "add_task")
        to_lead = [e.data["text"] for e in events if e.kind == "worker_nudged" and e.data["to"] == "lead"]
        states = {p.id: (p.status, p.why) for p in proposals(store, "r")}
    assert {task: state.status for task, state in result.states.items()} == {
        "T1": "impossible",
        "T2": "done",
        "T9": "done",
    }
    message_id = next(e.id for e in events if e.kind == "agent_message" and e.data["sender"] == asker)
    assert held[0].data["worker_messages"] == [{"sender": asker, "id": message_id}]
    assert held[0].data["action"] == "add_task" and held[0].data["added"][0]["id"] == "T9"
    # the lead was told, as a result and not an error, that the person decides, and how
    assert [error for _, error in answers] == [False, False]
    assert "held for the person's approval as P1" in answers[0][0] and "`hilbert approve P1`" in answers[0][0]
    # applied only after the person's approval, as the lead's tool would have, and said so
    approved = next(e.id for e in events if e.kind == "proposal_approved")
    changed = next(e for e in events if e.kind == "plan_changed")
    assert changed.id > approved and changed.data["tasks"] == ["T1", "T2", "T9"]
    action = next(e.data for e in events if e.kind == "lead_action" and e.data["action"] == "add_task")
    assert action["proposal"] == "P1" and action["approved_by"] == "person"
    # P2 asked for the same task: checked again when approved, it no longer applies
    assert states == {"P1": ("applied", ""), "P2": ("stale", states["P2"][1])}
    assert "'T9' is already in the plan" in states["P2"][1]
    assert any("approved P1" in t and "it is applied" in t for t in to_lead)
    assert any("approved P2" in t and "no longer applies" in t for t in to_lead)
    assert "T9" in (tmp_path / "run" / "PLAN.md").read_text()


def test_a_rejected_proposal_is_never_applied(tmp_path: Path) -> None:
    async def scenario(store: EventStore, workers: FakeServer, lead: FakeServer) -> FleetResult:
        running = asyncio.create_task(fleet(tmp_path, store, workers, lead, waiter=True))
        await first(store, "proposal_held", running)
        code, out, _ = await hilbert(tmp_path, "status")
        assert code == 0 and f'P1 add_task T9 "Write nine.txt" — asked by {worker_of(store, "T1")}' in out
        code, out, _ = await hilbert(tmp_path, "reject", "P1", "--why", "not this release")
        assert code == 0 and out.startswith("rejected P1 add_task T9"), out
        await first(
            store, "worker_nudged", running, lambda d: d["to"] == "lead" and "rejected P1" in d["text"]
        )
        send(
            store, "r", worker_of(store, "T2"), GO_ON, sender=PERSON, key=MessageKey.for_run(tmp_path / "run")
        )
        return await running

    with (
        FakeServer(Workers()) as workers,
        FakeServer(Lead()) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(scenario(store, workers, lead))
        events = store.events(run="r")
        [proposal] = proposals(store, "r")
    assert {task: state.status for task, state in result.states.items()} == {"T1": "impossible", "T2": "done"}
    assert not [e for e in events if e.kind == "plan_changed"]
    assert [e.data["action"] for e in events if e.kind == "lead_action"] == ["mark_impossible"]
    assert (proposal.status, proposal.why) == ("rejected", "not this release")


def test_with_the_setting_off_the_task_is_added_at_once_and_the_messages_read_are_recorded(
    tmp_path: Path,
) -> None:
    with (
        FakeServer(Workers()) as workers,
        FakeServer(Lead()) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(fleet(tmp_path, store, workers, lead, waiter=False, hold=False))
        events = store.events(run="r")
        asker = worker_of(store, "T1")
    assert result.states["T9"].status == "done"
    assert not [e for e in events if e.kind == "proposal_held"]
    action = next(e.data for e in events if e.kind == "lead_action" and e.data["action"] == "add_task")
    message_id = next(e.id for e in events if e.kind == "agent_message")
    assert action["worker_messages_read"] == [{"sender": asker, "id": message_id}]


def test_a_lead_session_that_read_no_workers_message_adds_the_task_at_once(tmp_path: Path) -> None:
    with (
        FakeServer(Workers(ask=False)) as workers,
        FakeServer(Lead()) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(fleet(tmp_path, store, workers, lead, waiter=False))
        events = store.events(run="r")
    assert result.states["T9"].status == "done"
    assert not [e for e in events if e.kind in ("proposal_held", "agent_message")]
    action = next(e.data for e in events if e.kind == "lead_action" and e.data["action"] == "add_task")
    assert "worker_messages_read" not in action and "proposal" not in action


def test_a_run_that_ends_with_a_proposal_pending_lists_it_and_the_cli_says_what_it_cannot_do(
    tmp_path: Path,
) -> None:
    with (
        FakeServer(Workers()) as workers,
        FakeServer(Lead()) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(fleet(tmp_path, store, workers, lead, waiter=False))
        asker = worker_of(store, "T1")

    async def cli() -> list[tuple[int, str, str]]:
        return [
            await hilbert(tmp_path, "status"),
            await hilbert(tmp_path, "approve", "P1"),
            await hilbert(tmp_path, "reject", "P7"),
            await hilbert(tmp_path, "reject", "P1", "--why", "too late anyway"),
            await hilbert(tmp_path, "reject", "P1"),
            await hilbert(tmp_path, "status"),
        ]

    status, approve, unknown, reject, again, after = asyncio.run(cli())
    assert "T9" not in result.states
    assert status[0] == 0 and "1 scope change(s) a worker asked for were not applied" in status[1]
    assert f'  P1 add_task T9 "Write nine.txt" — asked by {asker}' in status[1]
    assert approve[0] == 2 and approve[2].startswith("hilbert: error: run r has ended"), approve
    assert unknown[0] == 2 and unknown[2].startswith("hilbert: error: no proposal 'P7' in run r"), unknown
    assert unknown[2].count("\n") == 1  # one line, no traceback
    assert reject[0] == 0 and reject[1].startswith("rejected P1"), reject
    assert again[0] == 2 and "P1 was already rejected (too late anyway)" in again[2], again
    assert after[0] == 0 and "P1" not in after[1]


class Answering(Workers):
    """As `Workers`, but T2's worker, once told to go on, first answers whoever told it (the lead)."""

    def reply(self, conversation: Conversation) -> Reply:
        told = any(GO_ON in m.content for m in conversation.messages[1:] if m.role == "user")
        sent = any(c.name == "send_message" for m in conversation.messages for c in m.tool_calls)
        brief = next(m.content for m in conversation.messages if m.role == "user")
        if told and not sent and re.search(r"^Task T2:", brief, re.MULTILINE):
            turn = sum(1 for m in conversation.messages if m.role == "assistant")
            return _calls("T2", turn, "send_message", {"to": "lead", "text": "On it: writing two.txt now."})
        return super().reply(conversation)


class MessagingLead:
    """The lead's model, answering T1's escalation: it tells T2's worker (named in its brief) to go on,
    marks T1 impossible, finishes."""

    name = "messaging-lead"

    def reply(self, conversation: Conversation) -> Reply:
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if "message_worker" not in {t.name for t in conversation.tools}:
            return Reply(text="nothing to do")
        brief = next(m.content for m in conversation.messages if m.role == "user")
        worker = re.search(r"T2 \((\w+)\)", brief)
        script: list[tuple[str, dict[str, Any]]] = [
            ("message_worker", {"worker": worker.group(1) if worker else "?", "text": GO_ON}),
            ("mark_impossible", {"task": "T1", "reason": "its check cannot pass"}),
            ("finish", {"claim": "answered T1", "evidence": "-"}),
        ]
        return _calls("lead", turn, *script[turn]) if turn < len(script) else Reply(text="done")


def test_the_leads_message_after_a_workers_is_one_deeper_and_the_worker_it_wakes_still_answers(
    tmp_path: Path,
) -> None:
    """Hops follow what each agent read: T1's worker asks the lead (hop 0); the lead, having read it,
    tells T2's worker to go on (hop 1); T2's worker answers the lead (hop 2, within the limit)."""
    with (
        FakeServer(Answering()) as workers,
        FakeServer(MessagingLead()) as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(fleet(tmp_path, store, workers, lead, waiter=True))
        messages = [
            (e.kind, e.data["sender"], e.data["hop"])
            for e in store.events(run="r", kinds=["agent_message", "lead_message"])
        ]
        refused = store.events(run="r", kinds=["message_refused"])
        t1, t2 = worker_of(store, "T1"), worker_of(store, "T2")
    assert {task: state.status for task, state in result.states.items()} == {"T1": "impossible", "T2": "done"}
    assert messages == [("agent_message", t1, 0), ("lead_message", "lead", 1), ("agent_message", t2, 2)]
    assert not refused
