"""The agent loop: call the model, run the tool calls, record everything, repeat.

It stops when the agent calls `finish` (a claim and evidence), replies without a tool call, a policy
halts it, or the model fails for good — and policies see every stop first and may `Resume` it.

Write-ahead: every event is committed to the store before anything acts on it. The model's reply is
in the log before its tool calls run; each tool result is in the log before the model call that
sees it. The conversation can therefore be rebuilt from the log exactly (`hilbert.store`).

Everything else (budgets, reminders, the judge, compaction, messages) is a `Policy`; this file
should not grow when they arrive.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hilbert.agent.policies import Halt, LoopState, Policy, Resume, Stop, StopStatus
from hilbert.agent.prompts import SYSTEM_PROMPT
from hilbert.agent.tools import FINISH, ToolBox, ToolOutcome
from hilbert.errors import ModelError
from hilbert.models.types import Message, Model, ToolCall, Usage
from hilbert.store import EventStore


@dataclass(frozen=True)
class AgentResult:
    status: StopStatus
    reason: str
    claim: str
    evidence: str
    turns: int
    usage: Usage
    cost_usd: float


async def run_agent(
    *,
    run: str,
    agent: str,
    task: str,
    model: Model,
    toolbox: ToolBox,
    store: EventStore,
    policies: Sequence[Policy] = (),
    system_prompt: str = SYSTEM_PROMPT,
) -> AgentResult:
    """Run one agent on `task` until it stops; every step is an event in `store`."""
    loop = _Loop(run, agent, model, toolbox, store, policies)
    messages = [Message("system", system_prompt.format(agent=agent)), Message("user", task)]
    loop.state = LoopState(run=run, agent=agent, task=task, messages=messages)
    loop.record(
        "agent_started",
        task=task,
        model=model.name,
        workspace=str(toolbox.root),
        tools=[s.name for s in toolbox.specs()],
        messages=store.put_messages(messages),
    )
    stop = await loop.run()
    state = loop.state
    loop.record(
        "agent_stopped",
        status=stop.status,
        reason=stop.reason,
        claim=stop.claim,
        evidence=stop.evidence,
        turns=state.turns,
        usage=vars(state.usage),
        cost_usd=state.cost_usd,
    )
    return AgentResult(
        stop.status, stop.reason, stop.claim, stop.evidence, state.turns, state.usage, state.cost_usd
    )


class _Loop:
    state: LoopState

    def __init__(
        self,
        run: str,
        agent: str,
        model: Model,
        toolbox: ToolBox,
        store: EventStore,
        policies: Sequence[Policy],
    ) -> None:
        self.run_id, self.agent, self.model, self.toolbox = run, agent, model, toolbox
        self.store, self.policies = store, policies

    def record(self, kind: str, **data: object) -> None:
        self.store.append(self.run_id, self.agent, kind, data)

    async def run(self) -> Stop:
        while True:
            halted = self.apply("before_model_call", self.state)
            stop = halted if isinstance(halted, Stop) else await self.turn()
            if stop is None:
                continue
            if stop.status == "halted":
                return stop
            verdict = self.apply("on_stop", self.state, stop)
            if verdict is not True:
                return verdict if isinstance(verdict, Stop) else stop

    async def turn(self) -> Stop | None:
        """One model call and its tool calls; returns a Stop when the agent stopped."""
        state, sent = self.state, list(self.state.messages)
        try:
            done = await self.model.complete(sent, self.toolbox.specs())
        except ModelError as failure:
            self.record("model_error", error=type(failure).__name__, message=str(failure))
            return Stop("error", reason=str(failure))
        state.turns += 1
        state.usage += done.usage
        state.cost_usd += done.cost_usd
        reply = done.message
        self.record(
            "model_call",
            request=self.store.put_messages(sent),
            tools=[s.name for s in self.toolbox.specs()],
            response=self.store.put_messages([reply])[0],
            usage=vars(done.usage),
            cost_usd=done.cost_usd,
            latency_s=done.latency_s,
            ttft_s=done.time_to_first_token_s,
            stop_reason=done.stop_reason,
            model=done.model,
            attempts=done.attempts,
        )
        state.messages.append(reply)
        if not reply.tool_calls:
            return Stop("no_finish", reason="the agent replied without a tool call")
        stop: Stop | None = None
        for call in reply.tool_calls:
            started = time.monotonic()
            if call.name == FINISH:
                stop = Stop(
                    "finished",
                    claim=str(call.arguments.get("claim", "")),
                    evidence=str(call.arguments.get("evidence", "")),
                )
                outcome = ToolOutcome("finish recorded; your claim will be checked")
            else:
                outcome = await self.toolbox.run(call)
            self.add_tool_result(call, outcome, time.monotonic() - started)
            halted = self.apply("after_tool_call", state, call, outcome)
            stop = stop or (halted if isinstance(halted, Stop) else None)
        return stop

    def add_tool_result(self, call: ToolCall, outcome: ToolOutcome, duration_s: float) -> None:
        message = Message(
            "tool", outcome.content, tool_call_id=call.id, name=call.name, is_error=outcome.is_error
        )
        self.record(
            "tool_result",
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            message=self.store.put_messages([message])[0],
            is_error=outcome.is_error,
            duration_s=duration_s,
        )
        self.state.tool_calls += 1
        self.state.messages.append(message)

    def apply(self, moment: str, *args: Any) -> Stop | bool:
        """Ask every policy at `moment` (the name of a Policy hook, called with `args`) and carry out
        its actions in order, recording each. Returns a halting Stop, or True when a policy resumed
        a stop (only `on_stop` can), else False."""
        resumed = False
        for policy in self.policies:
            for action in getattr(policy, moment)(*args):
                if isinstance(action, Halt):
                    self.record(
                        "policy_action",
                        policy=policy.name,
                        moment=moment,
                        action="halt",
                        reason=action.reason,
                    )
                    return Stop("halted", reason=action.reason)
                if isinstance(action, Resume) and moment != "on_stop":
                    continue  # a Resume only answers a stop
                self.record(
                    "message_injected",
                    by=policy.name,
                    moment=moment,
                    action=action.kind,
                    message=self.store.put_messages([action.message])[0],
                )
                self.state.messages.append(action.message)
                resumed = resumed or isinstance(action, Resume)
        return resumed
