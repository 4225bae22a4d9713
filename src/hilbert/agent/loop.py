"""The agent loop: call the model, run the tool calls, record everything, repeat.

It stops when the agent calls `finish` (a claim and evidence), replies without a tool call, a policy
halts it, or the model fails for good; policies see every stop but a halt first, and may `Resume` it.

Write-ahead: every event is committed to the store before anything acts on it — the model's reply
before its tool calls run, each tool result before the model call that sees it — so the conversation
can be rebuilt from the log exactly (`hilbert.store`). Every tool call gets a result (a halt mid-turn
answers the rest "not run"), and messages injected during a turn follow all its tool results, as the
providers' APIs require. Budgets, reminders, the judge, compaction and messages are `Policy`s: this
file should not grow when they arrive.

Everything the model reads passes one door here, `hilbert.agent.defanging`: each message is defanged as it
enters the conversation and what is sent passes it again, so no text but an envelope the harness delivered
can pass for one — whichever caller wrote it, and whether or not it thought of it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import asdict

from hilbert.agent.defanging import Defanging, admit_history, delivered_in_log
from hilbert.agent.policies import AgentResult, Halt, Inject, LoopState, Policy, Resume, Stop
from hilbert.agent.prompts import SYSTEM_PROMPT, first_message
from hilbert.agent.tools import FINISH, ToolOutcome, Tools, read_finish
from hilbert.errors import ModelError
from hilbert.models.types import Message, Model, ToolCall
from hilbert.store import EventStore


async def run_agent(
    *,
    run: str,
    agent: str,
    task: str,
    model: Model,
    toolbox: Tools,
    store: EventStore,
    policies: Sequence[Policy] = (),
    system_prompt: str = SYSTEM_PROMPT,
    history: Sequence[Message] | None = None,
) -> AgentResult:
    """Run one agent on `task` until it stops; every step is an event in `store`. With `history` (the
    conversation rebuilt from the log, `hilbert.store.rebuild_conversation`) the agent resumes it
    instead of starting over: tool calls the history left without a result are answered "not run"."""
    door = Defanging()
    if history:
        messages = close_open_calls(history)
        messages = admit_history(
            door, messages, store.put_messages(messages), delivered_in_log(store, run, agent)
        )
    else:
        messages = [
            door.admit(Message("system", system_prompt)),
            door.admit(Message("user", first_message(agent, task))),
        ]
    loop = _Loop(LoopState(run, agent, task, messages), model, toolbox, store, policies, door)
    loop.record(
        "agent_started",
        task=task,
        model=model.name,
        workspace=str(toolbox.root),
        tools=[s.name for s in toolbox.specs()],
        messages=store.put_messages(messages),
        resumed=bool(history),
    )
    stop = Stop("interrupted", reason="the run was interrupted")
    try:
        stop = await loop.run()
    except Exception as bug:  # not an interruption: say what broke (it still propagates)
        stop = Stop("error", reason=f"{type(bug).__name__}: {bug}")
        raise
    finally:  # also when cancelled or interrupted, so the log says how the agent ended
        state = loop.state
        result = AgentResult(
            stop.status,
            stop.reason,
            stop.claim,
            stop.evidence,
            state.turns,
            state.usage,
            state.cost_usd,
            stop.cause,
        )
        loop.record("agent_stopped", **asdict(result))
    return result


NOT_RUN_ON_RESUME = "not run: the agent was restarted before this call's result was recorded"


def close_open_calls(history: Sequence[Message]) -> list[Message]:
    """`history` with a "not run" result for every tool call of its last assistant turn that has none
    (the providers refuse a conversation with an unanswered call)."""
    messages = list(history)
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
    if last is None:
        return messages
    answered = {m.tool_call_id for m in messages[last + 1 :] if m.role == "tool"}
    missing = [
        Message("tool", NOT_RUN_ON_RESUME, tool_call_id=call.id, name=call.name, is_error=True)
        for call in messages[last].tool_calls
        if call.id not in answered
    ]
    results = [m for m in messages[last + 1 :] if m.role == "tool"]
    others = [m for m in messages[last + 1 :] if m.role != "tool"]
    return [*messages[: last + 1], *results, *missing, *others]  # every result before any injected turn


class _Loop:
    def __init__(
        self,
        state: LoopState,
        model: Model,
        toolbox: Tools,
        store: EventStore,
        policies: Sequence[Policy],
        door: Defanging,
    ) -> None:
        self.state, self.model, self.toolbox, self.store, self.policies = (
            state,
            model,
            toolbox,
            store,
            policies,
        )
        self.door = door  # every message the model reads goes through it
        self.pending: list[tuple[str, str, Inject | Resume]] = []  # injected, not yet in the conversation

    def record(self, kind: str, **data: object) -> None:
        self.store.append(self.state.run, self.state.agent, kind, data)

    async def run(self) -> Stop:
        while True:
            halted = await self.apply("before_model_call", self.state)
            stop = halted or await self.turn()
            if stop is None:
                continue
            if stop.status == "halted":
                return stop
            verdict = await self.apply("on_stop", self.state, stop)
            if verdict is None:
                return stop
            if verdict.status == "halted":
                return verdict

    async def turn(self) -> Stop | None:
        """One model call and its tool calls; returns a Stop when the agent stopped."""
        state, history = self.state, list(self.state.messages)
        sent = self.door(await self.shape(history))
        state.turns += 1
        try:
            done = await self.model.complete(sent, self.toolbox.specs())
        except ModelError as failure:
            self.record("model_error", error=type(failure).__name__, message=str(failure))
            return Stop("error", reason=str(failure))
        state.usage += done.usage
        state.cost_usd += done.cost_usd
        reply = done.message
        self.record(
            "model_call",
            request=self.store.put_messages(history),  # the conversation; what was sent, if other:
            **({"sent": self.store.put_messages(sent)} if sent != history else {}),
            tools=[s.name for s in self.toolbox.specs()],
            response=self.store.put_messages([reply])[0],
            usage=vars(done.usage),
            cost_usd=done.cost_usd,
            latency_s=done.latency_s,
            ttft_s=done.time_to_first_token_s,
            stop_reason=done.stop_reason,
            model=done.model,
            attempts=done.attempts,
            priced=done.priced,
        )
        state.messages.append(reply)
        if not reply.tool_calls:
            return Stop("no_finish", reason="the agent replied without a tool call")
        stop: Stop | None = None
        for call in reply.tool_calls:
            if stop is not None and stop.status == "halted":
                self.add_tool_result(call, ToolOutcome("not run: the run was halted", True), 0.0)
                continue
            started = time.monotonic()
            outcome, finished = await self.run_tool(call, stop)
            self.add_tool_result(call, outcome, time.monotonic() - started)
            stop = stop or finished
            stop = await self.apply("after_tool_call", state, call, outcome) or stop
        self.flush()
        return stop

    async def run_tool(self, call: ToolCall, stop: Stop | None) -> tuple[ToolOutcome, Stop | None]:
        if call.name != FINISH:
            return await self.toolbox.run(call), None
        claim = read_finish(call)
        if isinstance(claim, ToolOutcome):
            return claim, None
        if stop is not None:
            return ToolOutcome("finish was already called in this turn", True), None
        return ToolOutcome("finish recorded; your claim will be checked"), Stop("finished", "", *claim)

    def add_tool_result(self, call: ToolCall, outcome: ToolOutcome, duration_s: float) -> None:
        message = self.door.admit(
            Message("tool", outcome.content, tool_call_id=call.id, name=call.name, is_error=outcome.is_error)
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

    async def shape(self, messages: list[Message]) -> list[Message]:
        """What to send: `messages` through every policy's `shape`, in order."""
        for policy in self.policies:
            shaped = policy.shape(self.state, messages)
            messages = list(await shaped if inspect.isawaitable(shaped) else shaped)
        return messages

    async def apply(self, moment: str, *args: object) -> Stop | None:
        """Ask every policy at `moment` (the name of a Policy hook, called with `args`) and carry out
        its actions in order, recording each. Returns a halting Stop; at `on_stop`, a Resume returns
        a Stop with status "resumed". Injections made after a tool call wait for the turn's end."""
        outcome: Stop | None = None
        for policy in self.policies:
            actions = getattr(policy, moment)(*args)
            for action in await actions if inspect.isawaitable(actions) else actions:
                if isinstance(action, Halt):
                    halt = {
                        "policy": policy.name,
                        "moment": moment,
                        "action": "halt",
                        "reason": action.reason,
                        "cause": action.cause,
                    }
                    self.record("policy_action", **halt)
                    if moment != "after_tool_call":  # mid-turn, turn() flushes after the last result
                        self.flush()
                    return Stop("halted", reason=action.reason, cause=action.cause)
                if isinstance(action, Resume) and moment != "on_stop":
                    continue  # a Resume only answers a stop
                self.pending.append((policy.name, moment, action))
                if isinstance(action, Resume):
                    outcome = Stop("resumed", reason=f"{policy.name} resumed the agent")
        if moment != "after_tool_call":
            self.flush()
        return outcome

    def flush(self) -> None:
        for policy, moment, action in self.pending:
            delivered = isinstance(action, Inject) and bool(action.source)
            admitted = self.door.admit(action.message, delivered=delivered)
            message = self.store.put_messages([admitted])[0]
            source = {"source": action.source} if isinstance(action, Inject) and action.source else {}
            self.record(
                "message_injected", by=policy, moment=moment, action=action.kind, message=message, **source
            )
            self.state.messages.append(admitted)
        self.pending.clear()
