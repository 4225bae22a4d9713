"""Liveness: who is making progress, who is idle, who is stuck, who is dead — and what to do about it.

Progress is any event an agent writes (a model call, a tool result, an injected message). A worker
that writes none for `nudge_after_s` is *idle*: still alive (its asyncio task runs — the process
check; a model call or a command may simply be slow), so it is nudged with a message it reads at its
next turn boundary. After `stuck_after_s` it is reported stuck (an event; `hilbert status` shows it).
After `dead_after_s` with no heartbeat at all it is treated as dead, like a worker whose task crashed:
it is restarted from its workspace and its conversation rebuilt from the log, not from scratch, up to
`restarts` times per attempt. Decisions are pure (`assess`); `watch` is the fleet's loop that applies
them (the restart itself is the fleet's: it owns the workers' loops). The thresholds are the
settings' `liveness` section (`hilbert.settings.LivenessSettings`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from hilbert.fleet.events import FleetEvent, LivenessError, WorkerHung, WorkerStuck
from hilbert.fleet.inbox import HARNESS, send
from hilbert.fleet.state import Fold
from hilbert.security.envelope import MessageKey
from hilbert.settings import LivenessSettings

Decision = Literal["nudge", "stuck", "restart"]
NUDGE = (
    "Reminder: the harness has seen no progress from you for {minutes} — no model call, no tool result. "
    "If something blocks you, say what; otherwise run `{verify}` and carry on with the task."
)


@dataclass
class Watch:
    """What the fleet tracks of one running worker; `last_progress` is a Unix time."""

    worker: str
    task: str
    last_progress: float
    nudged: bool = False
    stuck: bool = False
    busy: Callable[[], bool] = field(default=lambda: False)  # the harness is judging its stop: not quiet

    def progressed(self, at: float) -> None:
        if at > self.last_progress:
            self.last_progress, self.nudged, self.stuck = at, False, False


def assess(watch: Watch, now: float, config: LivenessSettings) -> Decision | None:
    """The one thing to do about `watch` now, if any (each of nudge and stuck once per quiet spell).
    A worker whose stop the harness is judging is not quiet: the gate's commands may take minutes."""
    if watch.busy():
        return None
    quiet = now - watch.last_progress
    if quiet >= config.dead_after_s:
        return "restart"
    if quiet >= config.stuck_after_s and not watch.stuck:
        return "stuck"
    if quiet >= config.nudge_after_s and not watch.nudged:
        return "nudge"
    return None


def minutes(seconds: float) -> str:
    """A quiet spell for a person: `12 min`, `45 s`, `0.4 s`."""
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


async def watch(
    fold: Fold,
    watches: dict[str, Watch],
    config: LivenessSettings,
    *,
    verify_of: Callable[[str], str],
    record: Callable[[FleetEvent], object],
    restart: Callable[[str], None],
    key: MessageKey | None = None,
) -> None:
    """Every `check_s`: note each watched worker's progress from the run's fold (`watches`: task ->
    watch, kept by the fleet), then nudge it (a message its inbox delivers), report it stuck, or have
    the fleet `restart` it. Runs until cancelled."""
    while True:
        await asyncio.sleep(config.check_s)
        try:
            _look(fold, watches, config, verify_of=verify_of, record=record, restart=restart, key=key)
        except Exception as error:  # a failed look must not stop the run: say so, keep watching
            record(LivenessError(error=f"{type(error).__name__}: {error}"))


def _look(
    fold: Fold,
    watches: dict[str, Watch],
    config: LivenessSettings,
    *,
    verify_of: Callable[[str], str],
    record: Callable[[FleetEvent], object],
    restart: Callable[[str], None],
    key: MessageKey | None,
) -> None:
    state = fold.catch_up()
    now = time.time()
    for watched in watches.values():
        agent = state.agents.get(watched.worker)
        if agent is not None:
            watched.progressed(agent.last_event_at)
        if watched.busy():
            watched.progressed(now)
    for task_id, watched in list(watches.items()):
        decision = assess(watched, now, config)
        quiet = round(now - watched.last_progress)
        if decision == "nudge":
            watched.nudged = True
            text = NUDGE.format(minutes=minutes(now - watched.last_progress), verify=verify_of(task_id))
            send(fold.store, state.run, watched.worker, text, sender=HARNESS, key=key)
        elif decision == "stuck":
            watched.stuck = True
            record(WorkerStuck(task=task_id, worker=watched.worker, quiet_s=quiet))
        elif decision == "restart":
            watched.last_progress = now  # one restart per quiet spell
            record(WorkerHung(task=task_id, worker=watched.worker, quiet_s=quiet))
            restart(task_id)


__all__ = ["NUDGE", "Decision", "Watch", "assess", "minutes", "watch"]
