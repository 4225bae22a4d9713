"""The loop's one plug-in interface, and the simplest policies.

A policy is a small object that looks at the loop's state at three moments and answers with
*actions* (data), never by raising or by reaching into the loop. A hook may also be `async def`
(the loop awaits it) when answering needs I/O — e.g. the harness running a verify command at
`on_stop` without blocking the other agents:

- `before_model_call(state)`  → e.g. inject a reminder, halt on a budget;
- `after_tool_call(state, call, outcome)` → e.g. notice repeated failing edits;
- `on_stop(state, stop)`      → accept the stop (no action) or `Resume` with feedback (the judge);
- `shape(state, messages)`    → not an action: the messages to send instead of `messages` (compaction,
  `hilbert.context.policy`); applied in order before each model call, the history itself unchanged.

Judge, reminders, compaction, budgets and messages arrive as policies; the loop does not grow.
Every action a policy takes is recorded in the event log by the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from hilbert.agent.tools import ToolOutcome
from hilbert.models.types import Message, ToolCall, Usage

StopStatus = Literal["finished", "no_finish", "halted", "error", "interrupted", "resumed"]
Cause = Literal[
    "",  # the status says it all (finished, no_finish, error, interrupted)
    "halted",  # a policy halted it for a reason of its own
    "turn_limit",
    "cost_limit",
    "cost_cap",  # the run's shared cap
    "budget",  # a fleet's budget: a hard cap reached, or the person refused to raise a soft one
    "person",  # the person (or the run's stop) asked it to stop
    "impossible",  # the judge says the task cannot be done
    "gate_refused",  # the stop gate refused its stops for every allowed round
    "panel_refused",  # the review panel sent it back for every allowed round
]
"""Why a run was halted, as data: the fleet decides from it, never from the reason's text."""


@dataclass(frozen=True)
class Stop:
    """Why the loop wants to stop: the agent finished (with a claim and evidence), replied without a
    tool call, a policy halted it, the model failed for good, or the process was interrupted.
    ("resumed" is the loop's own note that a policy refused a stop; no run ends with it.)"""

    status: StopStatus
    reason: str = ""
    claim: str = ""
    evidence: str = ""
    cause: Cause = ""


@dataclass(frozen=True)
class AgentResult:
    """How an agent's run ended, and what it used."""

    status: StopStatus
    reason: str
    claim: str
    evidence: str
    turns: int
    usage: Usage
    cost_usd: float
    cause: Cause = ""


@dataclass(frozen=True)
class Inject:
    """Append a user-role message to the conversation (a reminder, a note, feedback); `source`: the id
    of the event it delivers (a message from the inbox), 0 for none."""

    message: Message
    kind: Literal["inject"] = "inject"
    source: int = 0


@dataclass(frozen=True)
class Halt:
    """Stop the run now, with a reason for people (a budget reached, the person said stop) and its
    cause as data."""

    reason: str
    cause: Cause = "halted"
    kind: Literal["halt"] = "halt"


@dataclass(frozen=True)
class Resume:
    """Refuse a stop: the agent continues, with this message as feedback."""

    message: Message
    kind: Literal["resume"] = "resume"


Action = Inject | Halt | Resume
Actions = Sequence[Action] | Awaitable[Sequence[Action]]  # a hook may be sync or async


@dataclass
class LoopState:
    """What policies may read about the run. The loop owns it; policies must not mutate it, but for
    one thing: a policy that makes a model call on the agent's behalf (compaction's summaries) adds
    its usage and cost, so budgets and the agent's result count it."""

    run: str
    agent: str
    task: str
    messages: list[Message]
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0


class Policy:
    """Base with no-op hooks; a policy overrides only the moments it cares about."""

    name = "policy"

    def before_model_call(self, state: LoopState) -> Actions:
        return ()

    def after_tool_call(self, state: LoopState, call: ToolCall, outcome: ToolOutcome) -> Actions:
        return ()

    def on_stop(self, state: LoopState, stop: Stop) -> Actions:
        return ()

    def shape(
        self, state: LoopState, messages: Sequence[Message]
    ) -> Sequence[Message] | Awaitable[Sequence[Message]]:
        return messages


class TurnLimit(Policy):
    """Halt once the agent has used `max_turns` model calls."""

    name = "turn_limit"

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        if state.turns >= self.max_turns:
            return [Halt(f"turn limit reached ({self.max_turns} model calls)", "turn_limit")]
        return ()


class CostLimit(Policy):
    """Halt once the agent's estimated model cost reaches `max_usd`."""

    name = "cost_limit"

    def __init__(self, max_usd: float) -> None:
        self.max_usd = max_usd

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        if state.cost_usd >= self.max_usd:
            return [Halt(f"cost limit reached (${state.cost_usd:.4f} of ${self.max_usd:.2f})", "cost_limit")]
        return ()


COST_CAP = "the run's cost cap is reached"


class CostPool:
    """Spend shared by many agents (a run's cost cap): each agent's `SharedCostLimit` adds to it."""

    def __init__(self, max_usd: float) -> None:
        self.max_usd = max_usd
        self.spent_usd = 0.0


class SharedCostLimit(Policy):
    """Halt this agent once the pool it shares with the rest of the run is spent."""

    name = "run_cost_limit"

    def __init__(self, pool: CostPool) -> None:
        self.pool = pool
        self.counted = 0.0

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        self.settle(state.cost_usd)
        if self.pool.spent_usd >= self.pool.max_usd:
            return [Halt(f"{COST_CAP} (${self.pool.spent_usd:.4f} of ${self.pool.max_usd:.2f})", "cost_cap")]
        return ()

    def settle(self, cost_usd: float) -> None:
        """Count what the agent has spent since the last count (the runner calls it once more at the
        end, for the final model call no later check would see)."""
        self.pool.spent_usd += cost_usd - self.counted
        self.counted = cost_usd
