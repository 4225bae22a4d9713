"""`RunContext`: the pieces of one fleet run that do not change while it runs, built once by the driver
(`hilbert.fleet.run`) and handed to the lead's side (`fleet.lead`) and to each attempt (`fleet.attempt`).

It holds no state of the run: that is the fold (`ctx.fold.state`), which `record` keeps current —
every event the harness appends is folded (with every other event committed since) before `record`
returns, so a decision taken after `record` sees its own effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.agent.policies import CostPool
from hilbert.commands import Runner
from hilbert.fleet.crash import Crashes
from hilbert.fleet.events import FleetEvent, TaskStateChanged, WorkspaceClosed
from hilbert.fleet.scheduler import TaskState
from hilbert.fleet.state import HARNESS, FleetState, Fold
from hilbert.fleet.stop_gate import Panel
from hilbert.models.governor.kvcache import KvCacheGate
from hilbert.models.types import Model
from hilbert.security.envelope import MessageKey
from hilbert.settings import Settings
from hilbert.skills import Skill
from hilbert.store import Event, EventStore
from hilbert.workspaces import Git, Workspaces
from hilbert.workspaces.integration import Integration


@dataclass(frozen=True)
class Models:
    """The run's models: the workers', the lead's (None: escalations stay escalated), the judge's and
    the review panel."""

    worker: Model
    lead: Model | None = None
    judge: Model | None = None
    panel: Panel | None = None


@dataclass(frozen=True)
class RunContext:
    run: str
    root: Path  # the run's private folder
    store: EventStore
    fold: Fold
    settings: Settings
    models: Models
    runner: Runner  # every command of the run's agents, its stop gates and its merge checks
    git: Git
    integration: Integration
    workspaces: Workspaces
    key: MessageKey  # signs every message of the run; outside every workspace
    cost: CostPool  # the run's cap; seeded from the fold's spend on resume
    system_prompt: str  # every worker's (the repository map in it)
    heldout: dict[str, Path] = field(default_factory=dict)
    skills: tuple[Skill, ...] = ()
    crashes: Crashes = field(default_factory=Crashes)
    admission: KvCacheGate | None = None  # a self-hosted engine's KV cache, before each new attempt

    @property
    def state(self) -> FleetState:
        return self.fold.state

    def record(self, event: FleetEvent) -> Event:
        """Append a harness event and fold everything committed up to it."""
        committed = self.store.append(self.run, HARNESS, event.kind, event.data())
        self.fold.catch_up()
        return committed

    def closing(self, worker_id: str, prefix: str = "") -> Callable[[str], None]:
        """What `archive_or_remove` calls before it removes a workspace: `workspace_closed` logged."""

        def closing(kept: str) -> None:
            self.record(WorkspaceClosed(worker=worker_id, message=prefix + kept))

        return closing

    def set_state(self, state: TaskState) -> None:
        self.record(
            TaskStateChanged(
                task=state.task_id,
                status=state.status,
                attempts=state.attempts,
                worker=state.worker,
                reopened=state.reopened,
            )
        )
