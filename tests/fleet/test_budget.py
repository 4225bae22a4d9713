"""Budgets (`hilbert.fleet.budget`) as a fold of the run's log: what a run, an agent and a task (across
all its attempts) spent, with cache reads apart; the guard that makes a worker wait on a soft cap (one
question for every worker it covers), halts it on a hard or refused one, or lets a person's stop
through; the person's answers; and what `hilbert status` says. The proof through the real CLI is
`test_budget_cli.py`."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hilbert.agent.policies import Halt
from hilbert.errors import ConfigError, UserError
from hilbert.fleet.budget import BudgetGuard, Caps, answer, run_stopped
from hilbert.fleet.budget_lines import answer_budget, budget_lines
from hilbert.fleet.events import BudgetRaised, FleetEvent, FleetStarted, TaskStarted
from hilbert.fleet.inbox import EVERYONE, PERSON, request_stop
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.state import FleetState, Fold, apply
from hilbert.settings import BudgetSettings, Settings
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.ui.config_command import load_settings
from hilbert.ui.fleet_views import runs_table, status_lines, worker_states
from hilbert.ui.top_view import budget_lines as top_budgets
from hilbert.views import RunLog

PLAN = Plan(
    goal="g", tasks=(Task(id="T1", title="one", verify="true"), Task(id="T2", title="two", verify="true"))
)


class Run:
    """A run's log in a real SQLite file, written as the harness and the workers write it."""

    def __init__(self, path: Path, pid: int = 0, **caps: Any) -> None:
        self.store = EventStore.open(path)
        self.fold = Fold(self.store, "r")
        self.budgets = BudgetSettings(**caps)
        settings = {f"budgets.{k}": v for k, v in caps.items()}
        started = FleetStarted(
            plan=PLAN.model_dump(mode="json"), settings=settings, host=socket.gethostname(), pid=pid
        )
        self.record(started)

    def record(self, event: FleetEvent) -> None:
        self.store.append("r", "harness", event.kind, event.data())

    def attempt(self, task: str, worker: str) -> None:
        self.record(TaskStarted(task=task, worker=worker, worker_id=worker.lower()))
        self.store.append("r", worker, "agent_started", {"task": task, "model": "m"})

    def call(self, agent: str, usd: float, *, inp: int = 100, out: int = 10, cached: int = 0) -> None:
        usage = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": cached}
        self.store.append("r", agent, "model_call", {"usage": usage, "cost_usd": usd, "priced": True})

    def guard(self, agent: str, task: str) -> BudgetGuard:
        return BudgetGuard(self.fold.catch_up, self.record, Caps.of(self.budgets), agent, task)


def test_a_task_counts_every_attempt_and_the_judge_cache_reads_apart_and_the_lead_only_for_the_run(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "log.db")
    run.attempt("T1", "Poincaré")
    run.call("Poincaré", 0.01, inp=1000, out=50, cached=800)
    run.store.append("r", "Poincaré", "agent_stopped", {"status": "halted"})
    run.store.append("r", "harness", "gate_verdict", {"task": "T1", "model_cost_usd": 0.002})
    run.attempt("T1", "Noether")  # the task again, by another worker
    run.call("Noether", 0.02)
    run.call("lead", 0.5)
    spend = run.fold.catch_up().spend
    task = spend.tasks["T1"]
    assert (round(task.usd, 6), task.tokens, task.cache_read, task.turns) == (0.032, 250 + 110, 800, 2)
    assert round(spend.run.usd, 6) == 0.532 and spend.run.turns == 3
    assert spend.agents["Poincaré"].tokens == 250 and spend.agents["Poincaré"].since is None  # stopped
    assert "T1" in spend.tasks and "T2" not in spend.tasks  # the lead's call is no task's


def test_a_soft_cap_asks_once_and_every_worker_it_covers_waits_until_the_person_raises_it(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "log.db", run_usd=0.05)
    run.attempt("T1", "Poincaré")
    run.attempt("T2", "Noether")
    first, second = run.guard("Poincaré", "T1"), run.guard("Noether", "T2")
    assert first.look(run.fold.catch_up(), 0.0) == []  # nothing spent: go on
    run.call("Poincaré", 0.06)
    assert first.look(run.fold.catch_up(), 0.0) is None and first.waiting == "B1"
    assert second.look(run.fold.catch_up(), 0.0) is None and second.waiting == "B1"  # one question
    state = Fold(run.store, "r").catch_up()  # a fresh fold (a resumed run, a view) reads the same
    (question,) = state.spend.waiting()
    assert (question.asked.cap, question.asked.scope, question.asked.agent) == ("run_usd", "", "Poincaré")
    assert worker_states(state) == {"Poincaré": "paused", "Noether": "paused"}
    waiting = [line for line in status_lines(state) if "waiting for you: B1" in line]
    assert waiting and "`hilbert approve B1 --run r [--by N]`" in waiting[0], status_lines(state)
    with pytest.raises(UserError, match="no budget question 'B7'"):
        answer(run.store, state, "B7", approve=True)
    run.store.append("r", "Poincaré", "budget_raised", {"id": "B1", "by": 1.0})  # not the person's to give
    assert first.look(run.fold.catch_up(), 0.0) is None
    answer(run.store, run.fold.catch_up(), "b1", approve=True)  # by the cap as set: $0.05 more
    assert first.look(run.fold.catch_up(), 0.0) == [] and second.look(run.fold.catch_up(), 0.0) == []
    with pytest.raises(UserError, match="B1 was already raised"):
        answer(run.store, run.fold.catch_up(), "B1", approve=False)
    run.call("Noether", 0.05)  # $0.11 of $0.10: reached again, a new question
    assert second.look(run.fold.catch_up(), 0.0) is None and second.waiting == "B2"
    answer(run.store, run.fold.catch_up(), "B2", approve=False, why="enough")
    (halt,) = second.look(run.fold.catch_up(), 0.0) or []
    assert isinstance(halt, Halt) and halt.cause == "budget" and "refused" in halt.reason
    assert run_stopped(run.fold.catch_up(), Caps.of(run.budgets))  # nothing new starts
    header, row = runs_table([run.fold.catch_up()], {"r": 0.0}, now=1.0)
    assert row.split()[header.split().index("SPENT") - 1] == "$0.1100", (header, row)  # NEEDS YOU: 2 words


def test_a_hard_task_cap_halts_only_its_task_once_and_a_raise_lets_a_retry_go_on(tmp_path: Path) -> None:
    run = Run(tmp_path / "log.db", task_turns=2, hard=("task_turns",))
    run.attempt("T1", "Poincaré")
    run.call("Poincaré", 0.0)
    run.call("Poincaré", 0.0)
    run.attempt("T2", "Noether")
    one, two = run.guard("Poincaré", "T1"), run.guard("Noether", "T2")
    (halt,) = one.look(run.fold.catch_up(), 0.0) or []
    assert isinstance(halt, Halt) and halt.cause == "budget" and "hard cap task_turns of T1" in halt.reason
    assert one.look(run.fold.catch_up(), 0.0) == [halt]  # halts again, asks nothing more
    state = run.fold.catch_up()
    assert [q.asked.id for q in state.spend.questions.values()] == ["B1"] and not state.spend.waiting()
    assert two.look(state, 0.0) == [] and not run_stopped(state, Caps.of(run.budgets))
    with pytest.raises(UserError, match="hard cap"):
        answer(run.store, state, "B1", approve=False)
    answer(run.store, state, "B1", approve=True, by=3)
    run.attempt("T1", "Euler")  # `hilbert retry`: a fresh attempt, the task's spend goes on
    assert run.guard("Euler", "T1").look(run.fold.catch_up(), 0.0) == []
    lines = budget_lines(run.fold.catch_up(), 0.0)
    assert "task_turns T1 2 turns of 5 turns hard, 3 turns left" in lines[1], lines
    assert lines[1].strip() in top_budgets(run.fold.catch_up())  # so does `hilbert top`'s panel
    reported = RunLog.read(run.store, "r").view().summary.budgets  # and `hilbert report`
    assert reported[0].startswith("budgets: task_turns T1 2 turns of 5 turns hard, 3 turns left;"), reported


def test_a_person_stop_reaches_a_waiting_worker_and_rates_and_walls_count_by_time(tmp_path: Path) -> None:
    run = Run(tmp_path / "log.db", rate_tokens=1000, rate_window_s=60, agent_wall_s=100)
    run.attempt("T1", "Poincaré")
    started = run.fold.catch_up().spend.agents["Poincaré"].since or 0.0
    run.call("Poincaré", 0.0, inp=900, out=200)
    guard = run.guard("Poincaré", "T1")
    assert guard.look(run.fold.catch_up(), started) is None and guard.waiting == "B1"  # 1,100 tokens a minute
    request_stop(run.store, "r", EVERYONE)
    (halt,) = guard.look(run.fold.catch_up(), started) or []
    assert isinstance(halt, Halt) and halt.cause == "person"
    other = Run(tmp_path / "other.db", rate_tokens=1000, rate_window_s=60, agent_wall_s=100)
    other.attempt("T1", "Poincaré")
    other.call("Poincaré", 0.0, inp=900, out=200)
    since = other.fold.catch_up().spend.agents["Poincaré"].since or 0.0
    late = other.guard("Poincaré", "T1")
    assert late.look(other.fold.catch_up(), since + 101) is None  # the window moved on, but the wall:
    (question,) = other.fold.catch_up().spend.waiting()
    assert question.asked.cap == "agent_wall_s"


def test_budgets_are_settings_under_budget_or_budgets_and_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hilbert.toml").write_text('[budget]\ntask_usd = 2.5\nhard = ["run_usd"]\n')
    settings = load_settings(budget=("run_usd=10", "agent_turns=40"))
    assert (settings.budgets.task_usd, settings.budgets.run_usd, settings.budgets.agent_turns) == (
        2.5,
        10,
        40,
    )
    assert settings.budgets.hard == ("run_usd",) and settings.source("budgets.run_usd") == "--budget"
    assert Caps.of(settings.budgets).dollars and not Caps.of(BudgetSettings()).dollars
    with pytest.raises(ConfigError, match="not a cap"):
        Settings.of({"budgets.hard": ["task_dollars"]})
    with pytest.raises(ConfigError, match="not CAP=VALUE"):
        load_settings(budget=("task_usd",))


def test_waiting_for_the_person_spends_no_wall_time_so_approving_a_wall_cap_lets_the_worker_go_on() -> None:
    """A wall cap's question answered after ten minutes: the raise (the cap again) is not already spent
    on the wait, so the worker goes on instead of asking again at once."""
    caps = Caps.of(BudgetSettings(agent_wall_s=100))
    state, log = FleetState(run="r"), []

    def at(time: float, agent: str, record: FleetEvent | None = None, **raw: Any) -> FleetState:
        kind, data = (record.kind, record.data()) if record is not None else (raw.pop("kind"), raw)
        log.append(Event(len(log) + 1, "r", agent, 1, time, kind, data))
        return apply(state, log[-1])

    at(1000.0, "harness", FleetStarted(plan=PLAN.model_dump(mode="json"), settings={}, host="h"))
    at(1000.0, "harness", TaskStarted(task="T1", worker="Poincaré", worker_id="poincare"))
    at(1000.0, "Poincaré", kind="agent_started", task="T1", model="m")
    clock = [1101.0]
    guard = BudgetGuard(lambda: state, lambda e: at(clock[0], "Poincaré", e), caps, "Poincaré", "T1")
    assert guard.look(state, clock[0]) is None and guard.waiting == "B1"
    at(1700.0, PERSON, BudgetRaised(id="B1", by=100))  # ten minutes later: now 200 s
    assert guard.look(state, 1710.0) == [], state.spend.questions  # 111 s worked of 200
    clock[0] = 1800.0
    assert guard.look(state, clock[0]) is None and guard.waiting == "B2"  # 201 s worked: asks again
    at(1900.0, "harness", kind="fleet_resumed")  # killed while waiting; answered once resumed
    at(2000.0, PERSON, BudgetRaised(id="B2", by=100))
    assert state.spend.agents["Poincaré"].wall(5000.0) == 201.0  # its loop is gone: no wall time runs


def test_a_rate_question_holds_its_workers_until_answered_as_status_says_it_does(tmp_path: Path) -> None:
    """Once a rate cap asked, the window sliding on does not let the workers spend again unanswered
    while `hilbert status` says they are paused for B1: the person decides."""
    run = Run(tmp_path / "log.db", rate_tokens=1000, rate_window_s=60)
    run.attempt("T1", "Poincaré")
    run.call("Poincaré", 0.0, inp=900, out=200)
    since = run.fold.catch_up().spend.agents["Poincaré"].since or 0.0
    guard = run.guard("Poincaré", "T1")
    assert guard.look(run.fold.catch_up(), since) is None and guard.waiting == "B1"
    later = since + 3600  # the window moved on: no cap is reached any more
    run.store.append("r", "lead", "agent_started", {"model": "m"})  # never paused by a budget
    run.call("lead", 0.0)
    assert worker_states(run.fold.catch_up(), since) == {"Poincaré": "paused", "lead": "working"}
    assert guard.look(run.fold.catch_up(), later) is None and guard.waiting == "B1"
    answer(run.store, run.fold.catch_up(), "B1", approve=True)
    assert guard.look(run.fold.catch_up(), later) == []


def test_a_run_whose_process_is_gone_spends_no_wall_time_in_status_after_its_last_event(
    tmp_path: Path,
) -> None:
    run = Run(tmp_path / "log.db", pid=ended_pid(), run_wall_s=3600, agent_wall_s=3600)
    run.attempt("T1", "Poincaré")
    state = run.fold.catch_up()  # its orchestrator died here: no `fleet_interrupted`, no pid alive
    later = state.spend.last_time + 7200  # two hours on, nobody resumed it
    lines = status_lines(state, later)
    assert any("interrupted" in line for line in lines), lines
    shown = "\n".join(lines)
    assert "run_wall_s 0 s of 60.0 min" in shown and "agent_wall_s Poincaré 0 s of 60.0 min" in shown, shown
    assert "· 0 s" in shown, shown  # the spend line's wall time too


def ended_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_worker_reads_paused_only_once_its_guard_waits_never_while_its_model_call_spends(
    tmp_path: Path,
) -> None:
    """A status never reads idle while money is being spent: a run-wide question covers every worker,
    but one whose model call is in flight when it is asked spends until that call ends, so it reads
    working (thinking once quiet for long) until its own guard says it waits."""
    run = Run(tmp_path / "log.db", run_usd=0.05)
    run.attempt("T1", "Poincaré")
    run.attempt("T2", "Noether")
    run.store.append("r", "Noether", "tool_result", {"name": "shell"})  # its next model call goes out
    run.call("Poincaré", 0.06)
    first, second = run.guard("Poincaré", "T1"), run.guard("Noether", "T2")
    assert first.look(run.fold.catch_up(), 0.0) is None and first.waiting == "B1"  # asked, waits
    state = run.fold.catch_up()
    now = state.agents["Noether"].last_event_at
    assert worker_states(state, now) == {"Poincaré": "paused", "Noether": "working"}
    assert worker_states(state, now + 3600)["Noether"] == "thinking"  # its call still spends
    for _ in range(3):  # however often it looks, the log hears once that it waits
        assert second.look(run.fold.catch_up(), 0.0) is None and second.waiting == "B1"
    assert worker_states(run.fold.catch_up(), now + 3600) == {"Poincaré": "paused", "Noether": "paused"}
    told = run.store.events(run="r", kinds=["budget_waiting"])
    assert [(e.data["agent"], e.data["id"]) for e in told] == [("Poincaré", "B1"), ("Noether", "B1")]
    answer(run.store, run.fold.catch_up(), "B1", approve=True)
    assert second.look(run.fold.catch_up(), 0.0) == []
    assert worker_states(run.fold.catch_up(), now)["Noether"] == "working"  # answered: it goes on


def test_a_refused_cap_can_be_raised_later_and_the_halted_task_goes_on_when_retried(tmp_path: Path) -> None:
    run = Run(tmp_path / "log.db", task_usd=0.05)
    run.attempt("T1", "Poincaré")
    run.call("Poincaré", 0.06)
    guard = run.guard("Poincaré", "T1")
    assert guard.look(run.fold.catch_up(), 0.0) is None and guard.waiting == "B1"
    said = answer_budget(run.store, run.fold.catch_up(), "B1", approve=False, why="not now")
    assert "`hilbert approve B1 --run r` raises it later after all" in said, said
    (halt,) = guard.look(run.fold.catch_up(), 0.0) or []
    assert isinstance(halt, Halt) and "refused" in halt.reason
    run.store.append("r", "Poincaré", "agent_stopped", {"status": "halted", "cause": "budget"})
    shown = "\n".join(budget_lines(run.fold.catch_up(), 0.0))
    assert "B1 — you refused to raise task_usd of task T1" in shown, shown
    assert "`hilbert approve B1 --run r [--by N]` raises it after all; then `hilbert retry r T1`" in shown
    with pytest.raises(UserError, match="B1 was already refused"):
        answer(run.store, run.fold.catch_up(), "B1", approve=False)
    said = answer_budget(run.store, run.fold.catch_up(), "B1", approve=True, by=1.0)
    assert said.startswith("raised task_usd of task T1 by $1.0000 to $1.0500"), said
    assert "`hilbert retry r T1` goes on" in said, said
    state = run.fold.catch_up()
    assert not state.spend.refused and "you refused" not in "\n".join(budget_lines(state, 0.0))
    with pytest.raises(UserError, match="B1 was already raised"):
        answer(run.store, state, "B1", approve=True)
    run.attempt("T1", "Euler")  # `hilbert retry`: a fresh attempt goes on within the raised cap
    assert run.guard("Euler", "T1").look(run.fold.catch_up(), 0.0) == []


def test_a_worker_whose_wait_was_answered_reads_working_while_its_next_call_spends_under_a_new_question(
    tmp_path: Path,
) -> None:
    """The wait a worker's guard logged ends with the person's answer, not with the worker's next model
    call: once B1 is raised, its call in flight when B2 is asked spends, so it reads working — never
    paused on B2, which its guard has not waited on yet."""
    run = Run(tmp_path / "log.db", run_usd=0.05)
    run.attempt("T1", "Poincaré")
    run.attempt("T2", "Noether")
    run.call("Poincaré", 0.06)
    first, second = run.guard("Poincaré", "T1"), run.guard("Noether", "T2")
    assert first.look(run.fold.catch_up(), 0.0) is None and second.look(run.fold.catch_up(), 0.0) is None
    answer(run.store, run.fold.catch_up(), "B1", approve=True)  # the run's cap: $0.10
    assert second.look(run.fold.catch_up(), 0.0) == []  # Noether's next call goes out, in flight
    run.store.append("r", "Noether", "tool_result", {"name": "shell"})  # (its last event: now)
    assert first.look(run.fold.catch_up(), 0.0) == []
    run.call("Poincaré", 0.06)  # $0.12: over the raised cap
    assert first.look(run.fold.catch_up(), 0.0) is None and first.waiting == "B2"
    state = run.fold.catch_up()
    now = state.agents["Noether"].last_event_at
    assert worker_states(state, now) == {"Poincaré": "paused", "Noether": "working"}
