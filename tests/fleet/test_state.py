"""The fleet's state as a fold of its log: a million events fold incrementally within a stated time, and
the fold tells each worker's own story (a task finished by a second worker after the first was sent
back), a resumed run's interrupted lead session, and a landing whose `merged` events are missing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.state import FleetState, Fold, apply
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.ui.fleet_views import worker_states

TASKS = 128
FOLD_1M_WITHIN_S = 60.0  # typically 4–6 s on the 2-core CI machine; generous for a loaded one


def _plan(n: int) -> Plan:
    return Plan(goal="g", tasks=tuple(Task(id=f"T{i}", title="t", verify="true") for i in range(1, n + 1)))


def synthetic(n: int, start: int = 1) -> Iterator[Event]:
    """A run's log as a fleet of 128 writes it: mostly model calls and tool results, with task states,
    gate verdicts and merges between them (ids `start`..`start + n - 1`)."""
    for i in range(start, start + n):
        task, worker = f"T{i % TASKS + 1}", f"w{i % TASKS}"
        k = i % 20
        if i == 1:
            data = {"plan": _plan(TASKS).model_dump(mode="json"), "pid": 1, "host": "elsewhere"}
            yield Event(i, "r", "harness", i, float(i), "fleet_started", data)
        elif k < 10:
            usage = {"input_tokens": 100, "output_tokens": 10, "cache_read_tokens": 90}
            yield Event(i, "r", worker, i, float(i), "model_call", {"usage": usage, "cost_usd": 0.001})
        elif k < 16:
            yield Event(i, "r", worker, i, float(i), "tool_result", {"name": "shell", "is_error": False})
        elif k < 18:
            data = {"task": task, "status": "running", "attempts": i % 3, "worker": worker}
            yield Event(i, "r", "harness", i, float(i), "task_state", data)
        elif k == 18:
            data = {"task": task, "worker": worker, "commit": f"c{i}", "round": 1, "verdict": "not_done"}
            yield Event(i, "r", "harness", i, float(i), "gate_verdict", data)
        else:
            yield Event(
                i, "r", "harness", i, float(i), "merged", {"task": task, "ref": f"r/{worker}", "commit": "c"}
            )


def digest(state: FleetState) -> tuple[object, ...]:
    agents = {a: (v.turns, v.tool_calls, tuple(v.tokens)) for a, v in state.agents.items()}
    tasks = sorted((t, (s.status, s.attempts, s.worker)) for t, s in state.states.items())
    return (round(state.spent_usd, 6), tasks, sorted(agents.items()), sorted(state.merged))


def test_a_million_events_fold_within_the_stated_time_and_incrementally_to_the_same_state() -> None:
    whole = FleetState("r")
    started = time.perf_counter()
    for event in synthetic(1_000_000):
        apply(whole, event)
    took = time.perf_counter() - started
    assert took < FOLD_1M_WITHIN_S, f"folding 1M events took {took:.1f} s"
    assert whole.last_id == 1_000_000 and len(whole.states) == TASKS
    assert whole.agents["w3"].turns == sum(
        1 for i in range(1, 1_000_001) if i % 128 == 3 and i % 20 < 10 and i > 1
    )


def test_a_fold_catches_up_with_only_the_events_committed_since_its_last_look(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        for event in synthetic(3_000):
            store.append("r", event.agent, event.kind, event.data)
        store.append("other", "harness", "task_state", {"task": "T1", "status": "done"})  # another run's
        view = Fold(store, "r")
        first = view.catch_up()
        seen = first.last_id
        for event in synthetic(2_000, start=3_001):
            store.append("r", event.agent, event.kind, event.data)
        later = view.catch_up()
        assert later.last_id > seen
        # counts add up event by event: a view that read old events again would count them twice
        assert digest(later) == digest(Fold(EventStore.open(tmp_path / "log.db"), "r").catch_up())


def _event(i: int, agent: str, kind: str, **data: object) -> Event:
    return Event(i, "r", agent, i, 1000.0 + i, kind, dict(data))


def test_a_task_finished_by_a_second_worker_after_the_first_was_sent_back() -> None:
    log = [
        _event(1, "harness", "fleet_started", plan=_plan(1).model_dump(mode="json"), pid=1, host="elsewhere"),
        _event(2, "harness", "task_started", task="T1", worker="Poincaré", worker_id="poincare"),
        _event(3, "Poincaré", "agent_started", task="x"),
        _event(4, "Poincaré", "agent_stopped", status="finished"),
        _event(
            5,
            "harness",
            "task_attempted",
            task="T1",
            worker="Poincaré",
            status="finished",
            candidate="refs/c/T1/poincare",
        ),
        _event(6, "harness", "merge_conflict", task="T1", ref="refs/c/T1/poincare"),
        _event(7, "harness", "task_state", task="T1", status="pending", attempts=1),
        _event(8, "harness", "task_started", task="T1", worker="Noether", worker_id="noether"),
        _event(9, "Noether", "agent_started", task="x"),
        _event(10, "Noether", "agent_stopped", status="finished"),
        _event(
            11,
            "harness",
            "task_attempted",
            task="T1",
            worker="Noether",
            status="finished",
            candidate="refs/c/T1/noether",
        ),
        _event(12, "harness", "task_state", task="T1", status="verifying", attempts=1, worker="Noether"),
        _event(13, "harness", "merge_landing", tasks=["T1"], refs=["refs/c/T1/noether"], commit="abc"),
        _event(14, "harness", "merged", task="T1", ref="refs/c/T1/noether", commit="abc"),
        _event(15, "harness", "task_state", task="T1", status="done", attempts=1, worker="Noether"),
        _event(16, "harness", "fleet_finished", states={"T1": "done"}),
    ]
    state = FleetState("r")
    for event in log[:13]:
        apply(state, event)
    assert worker_states(state, now=1020.0) == {"Poincaré": "sent back", "Noether": "waiting"}
    assert state.landing is not None and state.queue == {"T1": "refs/c/T1/noether"}
    for event in log[13:]:
        apply(state, event)
    assert worker_states(state, now=1020.0) == {"Poincaré": "sent back", "Noether": "done"}
    assert state.landing is None and state.queue == {} and state.states["T1"].status == "done"


def test_a_lead_session_that_died_with_its_process_goes_to_a_new_session_on_resume() -> None:
    state = FleetState("r")
    for event in [
        _event(1, "harness", "fleet_started", plan=_plan(2).model_dump(mode="json"), pid=1, host="elsewhere"),
        _event(2, "harness", "task_state", task="T1", status="escalated", attempts=2),
        _event(3, "harness", "task_state", task="T2", status="escalated", attempts=2),
        _event(4, "harness", "task_stopped", task="T2", why="the person asked this agent to stop"),
        _event(5, "harness", "lead_consulted", tasks=["T1"], session=1),
    ]:
        apply(state, event)
    assert state.unanswered() == [] and state.lead_open == ["T1"]  # T2 is the person's, not the lead's
    apply(state, _event(6, "harness", "fleet_resumed", pid=2, host="elsewhere"))
    assert state.unanswered() == ["T1"] and state.lead_sessions == 1 and state.lead_open is None


def test_a_merge_found_lost_at_resume_waits_in_the_queue_again_whatever_happens_next() -> None:
    """A `merged` whose commit is not on the branch (reconciled as `merge_lost`) puts the candidate back
    in the fold's queue, so that a second kill before it lands again still finds it waiting."""
    state = FleetState("r")
    ref = "refs/hilbert/candidates/T1/poincare"
    for event in [
        _event(1, "harness", "fleet_started", plan=_plan(1).model_dump(mode="json"), pid=1, host="h"),
        _event(2, "harness", "task_started", task="T1", worker="Poincaré", worker_id="poincare", base="b"),
        _event(
            3, "harness", "task_attempted", task="T1", worker="Poincaré", status="finished", candidate=ref
        ),
        _event(4, "harness", "merged", task="T1", ref=ref, commit="c1"),
        _event(5, "harness", "merge_reconciled", tasks=["T1"], commit="c1", how="merge_lost"),
    ]:
        apply(state, event)
    assert state.queue == {"T1": ref} and "T1" not in state.merged
    assert state.attempts["Poincaré"].landed is None and state.attempts["Poincaré"].joined == 2
