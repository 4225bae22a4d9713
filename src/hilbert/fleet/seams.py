"""The fleet's two seams: what a worker is (`Worker`) and what places attempts (`Runtime`).

    Worker.attempt(spec, checkout, grant, emit) -> AgentResult
        takes a task spec, a workspace and a grant to reach a model; emits events; returns a typed
        outcome (status, cause, reason, claim, evidence, turns, usage, cost).
    Runtime.run(task, name, resumed) -> AttemptOutcome
        places one attempt (workspace, worker, gate) and returns its outcome; `restart`, `watches`
        and `interrupted` are what liveness and Ctrl-C need from it.

hilbert's own loop (`fleet.attempt.HilbertLoop`) is the first worker: its `grant` is a `ModelGrant`
(the harness makes its model calls), it writes its own events, and the stop gate is its `on_stop`
policy, so a worker sent back continues its conversation. A worker whose loop is not hilbert's (an
`External`: a CLI agent, a process) gets a `GatewayGrant` (a base URL, its own token, a model name —
nothing else from the harness's environment), reports progress through `emit(kind, data)` (recorded
under its name as `worker_event`, never as a fleet kind), and is gated when it exits (`gated`): the
stop gate judges its stop; a `Resume` runs it again with the feedback, a `Halt` ends it with its cause.
Its prompt and feedback are defanged here (`run_external`, `gated`): hilbert's loop, which does that for
its own workers (`hilbert.agent.defanging`), is not the one that reads them.
`fleet.attempt.Attempts` is the local asyncio runtime; `run_fleet` takes another as a `Place`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from hilbert.agent.policies import AgentResult, Halt, LoopState, Resume, Stop
from hilbert.fleet.plan import Task
from hilbert.models.gateway import ModelGateway
from hilbert.models.types import Message, Model, Usage
from hilbert.security.envelope import defang

if TYPE_CHECKING:
    from hilbert.fleet.context import RunContext
    from hilbert.fleet.liveness import Watch
    from hilbert.fleet.names import Name
    from hilbert.fleet.outcomes import AttemptOutcome
    from hilbert.fleet.state import AttemptView
    from hilbert.fleet.stop_gate import StopGate
    from hilbert.workspaces import Checkout

Emit = Callable[[str, dict[str, Any]], None]
"""How a worker reports progress: a kind of its own and JSON data; the harness logs it under its name."""
WORKER_EVENT = "worker_event"  # what an emitted event is stored as: {"event": kind, "data": data}


@dataclass(frozen=True)
class TaskSpec:
    """What a worker is asked: the task, its own name, the prompt and system prompt the harness wrote,
    and, when the stop gate sent it back, the gate's feedback and the round it is in."""

    task: Task
    worker: str
    prompt: str
    system_prompt: str
    feedback: str = ""
    round: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task.model_dump(mode="json"),
            "worker": self.worker,
            "prompt": self.prompt,
            "system_prompt": self.system_prompt,
            "feedback": self.feedback,
            "round": self.round,
        }


@dataclass(frozen=True)
class ModelGrant:
    """hilbert's own loop: the harness makes its model calls through this `Model`."""

    model: Model
    kind: Literal["model"] = "model"


@dataclass(frozen=True)
class GatewayGrant:
    """A worker outside hilbert's loop: where it sends model requests, its own token, which model."""

    base_url: str
    token: str
    model: str
    protocol: Literal["openai", "anthropic"] = "openai"
    kind: Literal["gateway"] = "gateway"

    def __repr__(self) -> str:  # a grant may be logged; its token may not
        return f"GatewayGrant(base_url={self.base_url!r}, model={self.model!r}, token='***')"

    def to_json(self) -> dict[str, str]:
        """What is handed to the worker's process, and nothing more."""
        return {
            "base_url": self.base_url,
            "token": self.token,
            "model": self.model,
            "protocol": self.protocol,
        }


Grant = ModelGrant | GatewayGrant


class Worker(Protocol):
    """Works on one task in one workspace, reaching its model only through its grant."""

    async def attempt(self, spec: TaskSpec, checkout: Checkout, grant: Grant, emit: Emit) -> AgentResult: ...


@dataclass(frozen=True)
class External:
    """A worker whose loop is not hilbert's, and how it reaches models: each attempt gets its own
    token from `gateway` for `model` (revoked when the attempt ends)."""

    worker: Worker
    gateway: ModelGateway
    model: str
    protocol: Literal["openai", "anthropic"] = "openai"

    def grant(self, name: str) -> GatewayGrant:
        given = self.gateway.token_for(name)
        return GatewayGrant(given.base_url, given.token, self.model, self.protocol)


class Runtime(Protocol):
    """Places the run's attempts. The driver calls `run` for each; liveness reads `watches` (running
    task -> its worker's progress) and calls `restart(task)` for a hung worker; Ctrl-C sets
    `interrupted`, after which every workspace is kept for the resume."""

    watches: dict[str, Watch]
    interrupted: bool

    async def run(self, task: Task, name: Name, resumed: AttemptView | None = None) -> AttemptOutcome: ...

    def restart(self, task_id: str) -> None: ...


Place = Callable[["RunContext", Callable[[], list["Name"]], External | None], Runtime]
"""How `run_fleet` builds its runtime: from the run's context, the roster of running workers and the
external worker (None: hilbert's loop). `fleet.attempt.Attempts` is one."""


async def gated(
    worker: Worker,
    gate: StopGate,
    spec: TaskSpec,
    checkout: Checkout,
    grant: Grant,
    emit: Emit,
    sent_back: Callable[[Message], object] = lambda message: None,
) -> AgentResult:
    """Run a worker whose loop is not hilbert's, then the stop gate on its stop; on a `Resume` run it
    again with the gate's feedback (`sent_back` first; the gate halts it after its rounds), on a `Halt`
    end with its cause. The result adds up what every run of the worker used."""
    turns, usage, cost = 0, None, 0.0
    while True:
        result = await worker.attempt(spec, checkout, grant, emit)
        turns, cost = turns + result.turns, cost + result.cost_usd
        usage = result.usage if usage is None else usage + result.usage
        total = replace(result, turns=turns, usage=usage, cost_usd=cost)
        stop = Stop(result.status, result.reason, result.claim, result.evidence, result.cause)
        actions = await gate.on_stop(LoopState("", spec.worker, spec.prompt, []), stop)
        halt = next((a for a in actions if isinstance(a, Halt)), None)
        if halt is not None:
            return replace(total, status="halted", reason=halt.reason, cause=halt.cause)
        resume = next((a for a in actions if isinstance(a, Resume)), None)
        if resume is None:
            return total
        feedback = Message(
            resume.message.role, defang(resume.message.content)
        )  # it reads it outside our loop
        sent_back(feedback)
        spec = replace(spec, feedback=feedback.content, round=spec.round + 1)


def emitter(ctx: RunContext, agent: str) -> Emit:
    """`emit` for an external worker: each event goes into the log under `agent` as a `worker_event`
    (its own kind inside), so nothing a worker sends can pass for a fleet or loop event."""

    def emit(kind: str, data: dict[str, Any]) -> None:
        payload = json.loads(json.dumps(data, default=str))  # JSON only, whatever the worker handed us
        ctx.store.append(ctx.run, agent, WORKER_EVENT, {"event": str(kind), "data": payload})

    return emit


async def run_external(
    ctx: RunContext, external: External, gate: StopGate, spec: TaskSpec, checkout: Checkout, worker: Worker
) -> AgentResult:
    """An external worker's attempt, as the log tells it: `agent_started`, its events, the gate's rounds,
    `agent_stopped` (with what it used, which counts toward the run's cost cap); its token is revoked
    when it ends. `worker` is what runs it (`external.worker`, or a runtime's way of placing it)."""
    agent = spec.worker
    # the worker's own loop reads these, not hilbert's: defanged here, as hilbert's loop does
    spec = replace(spec, prompt=defang(spec.prompt), system_prompt=defang(spec.system_prompt))
    started = {"task": spec.prompt, "model": external.model, "workspace": str(checkout.work_tree)}
    messages = ctx.store.put_messages([Message("system", spec.system_prompt), Message("user", spec.prompt)])
    data = {**started, "tools": [], "messages": messages, "external": True}  # its spend: in agent_stopped
    ctx.store.append(ctx.run, agent, "agent_started", data)
    result = AgentResult("interrupted", "the run was interrupted", "", "", 0, Usage(), 0.0)

    def sent_back(message: Message) -> None:  # as hilbert's loop logs the gate's Resume
        hashed = ctx.store.put_messages([message])[0]
        injected = {"by": gate.name, "moment": "on_stop", "action": "resume", "message": hashed}
        ctx.store.append(ctx.run, agent, "message_injected", injected)

    try:
        grant = external.grant(agent)
        result = await gated(worker, gate, spec, checkout, grant, emitter(ctx, agent), sent_back)
    except Exception as bug:
        result = replace(result, status="error", reason=f"{type(bug).__name__}: {bug}")
        raise
    finally:
        external.gateway.revoke(agent)
        ctx.cost.spent_usd += result.cost_usd
        ctx.store.append(ctx.run, agent, "agent_stopped", asdict(result))
    return result


__all__ = [
    "WORKER_EVENT",
    "Emit",
    "External",
    "GatewayGrant",
    "Grant",
    "ModelGrant",
    "Place",
    "Runtime",
    "TaskSpec",
    "Worker",
    "emitter",
    "gated",
    "run_external",
]
