"""Compaction in the real agent loop, over the wire to the fake server: a long task crosses a tiny
budget several times, the agent keeps working, and the log shows each cut with the pinned task."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import LoopState, TurnLimit
from hilbert.agent.prompts import SYSTEM_PROMPT
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner
from hilbert.context.pinned import PINNED_MARK, SUMMARY_MARK
from hilbert.context.policy import CONTEXT_COMPACTED, Compaction, compaction_for
from hilbert.context.render import TokenCache
from hilbert.context.tokens import tokenizer_for
from hilbert.models import make_model
from hilbert.models.types import Completion, Message, ToolCall, Usage
from hilbert.store import EventStore, agent_summary, rebuild_conversation
from hilbert.testing import FunctionModel
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply
from hilbert.ui.log_view import format_event

PARTS = 12
VERIFY = "ls part*.txt | wc -l"
TASK = (
    f"Task t1: write part1.txt to part{PARTS}.txt, one at a time, each holding its number.\n"
    f"The task is done when `{VERIFY}` passes. Change only what the task needs.\n"
    "Do not edit or skip tests. Finish with the command's output as evidence."
)
BUDGET = 1500
_PART = re.compile(r"part(\d+)\.txt")


class PartWriter:
    """A fake model that writes the parts in order, deciding only from what it is sent: the last part
    it sees itself writing tells it the next one; the verify command it reads from the task (or the
    pinned state). It answers a summarizing request with a fixed summary."""

    name = "part-writer"

    def reply(self, conversation: Conversation) -> Reply:
        if conversation.system.startswith("You are compacting"):
            return Reply(text="## Goal\n- write the parts (model summary)\n## Completed\n- some parts")
        written = [
            int(found.group(1))
            for m in conversation.messages
            for c in m.tool_calls
            if c.name == "write_file" and (found := _PART.search(c.arguments.get("path", "")))
        ]
        last = max(written, default=0)
        turn = f"t{len(conversation.messages)}-{last}"
        verify = re.search(r"done when `([^`]+)` passes", conversation.messages[0].content)
        assert verify is not None, "the task must stay in the context"
        if last < PARTS:
            return Reply(
                text=f"Writing part{last + 1}.txt.",
                tool_calls=(
                    ToolCall(
                        f"w{turn}", "write_file", {"path": f"part{last + 1}.txt", "content": f"{last + 1}\n"}
                    ),
                    ToolCall(f"s{turn}", "shell", {"command": "seq 1 250"}),
                ),
            )
        ran = [m for m in conversation.messages if m.role == "tool" and m.content.startswith("[exit 0]\n12")]
        if not ran:
            return Reply(tool_calls=(ToolCall(f"v{turn}", "shell", {"command": verify.group(1)}),))
        evidence = f"`{verify.group(1)}` printed 12"
        return Reply(
            tool_calls=(ToolCall(f"f{turn}", "finish", {"claim": "wrote the parts", "evidence": evidence}),)
        )


def test_a_long_task_crosses_a_tiny_budget_and_finishes_with_its_task_state_intact(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path / "log.db")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with FakeServer(PartWriter()) as server:
        model = make_model(f"anthropic:fake@{server.base_url}", env={})
        compaction = compaction_for(f"hybrid:2,2,{BUDGET}", model=model, store=store)
        result = asyncio.run(
            run_agent(
                run="r",
                agent="Euler",
                task=TASK,
                model=model,
                toolbox=ToolBox(workspace, runner=Runner.unsandboxed()),
                store=store,
                policies=[TurnLimit(40), compaction],
            )
        )
        requests = len(server.requests)
    assert (result.status, result.claim) == ("finished", "wrote the parts")
    assert [(workspace / f"part{k}.txt").read_text() for k in range(1, PARTS + 1)] == [
        f"{k}\n" for k in range(1, PARTS + 1)
    ]
    events = store.events(run="r")
    cuts = [e for e in events if e.kind == CONTEXT_COMPACTED]
    assert len(cuts) >= 3
    summarized = [e for e in cuts if e.data["pinned"] is not None]
    assert len(summarized) >= 2
    for event in summarized:
        pinned = store.get_messages([event.data["pinned"]])[0]
        assert pinned.content.startswith(PINNED_MARK)
        assert "Task t1: write part1.txt" in pinned.content and f"`{VERIFY}` passes" in pinned.content
        summary = store.get_messages([event.data["summary"]])[0]
        assert summary.content.startswith(SUMMARY_MARK) and "(model summary)" in summary.content
        assert event.data["tokens_after"] < event.data["tokens_before"]
    # what was sent stayed near the budget; the log keeps the whole conversation
    tokens = TokenCache(tokenizer_for(model.name))
    calls = [e for e in events if e.kind == "model_call"]
    sent = [store.get_messages(e.data.get("sent", e.data["request"])) for e in calls]
    assert max(tokens.total(s) for s in sent) <= BUDGET + 700  # one turn of this task, at most
    assert any(m.content.startswith(PINNED_MARK) for m in sent[-1])
    history = rebuild_conversation(store, "r", "Euler")
    assert sum(m.role == "assistant" for m in history) == result.turns == len(calls)
    # the summarizing calls went to the model, and count in the agent's usage
    summary_calls = [c for e in cuts for c in e.data["summary_calls"]]
    assert summary_calls and requests == len(calls) + len(summary_calls)
    usage = Usage()
    for call in calls:
        usage += Usage(**call.data["usage"])
    for call in summary_calls:
        usage += Usage(**call["usage"])
    assert result.usage == usage
    shown = agent_summary(store, "r", "Euler")  # what every view shows counts the summaries too
    assert (shown.usage, shown.cost_usd) == (result.usage, result.cost_usd)
    # the system prompt names no agent, so every agent of a fleet shares it
    assert history[0] == Message("system", SYSTEM_PROMPT) and history[1].content.startswith("Agent: Euler\n")


def summarizer() -> FunctionModel:
    """A model that answers each summarizing call with a numbered summary, at a cent a call."""

    def answer(messages: Sequence[Message], tools: object) -> Completion:
        text = f"## Goal\n- model summary {model.calls}"
        return Completion(Message("assistant", text), Usage(100, 10), "end_turn", model.name, cost_usd=0.01)

    model = FunctionModel(answer, name="summaries")
    return model


def long_history(turns: int) -> list[Message]:
    messages = [Message("system", "You are a careful engineer."), Message("user", TASK)]
    for k in range(turns):
        call = ToolCall(f"c{k}", "shell", {"command": f"cat f{k}.py"})
        messages += [
            Message("assistant", f"step {k}", tool_calls=(call,)),
            Message("tool", "[exit 0]\n" + "a line of output\n" * 60, tool_call_id=f"c{k}", name="shell"),
        ]
    return messages


def test_a_restarted_agent_sends_what_it_sent_before_and_logs_the_cut_as_restored(
    tmp_path: Path,
) -> None:
    store = EventStore.open(tmp_path / "log.db")
    history = long_history(30)

    async def live() -> tuple[list[Message], Compaction, FunctionModel]:
        model = summarizer()
        compaction = compaction_for("summary:1500", model=model, store=store)
        state = LoopState("r", "Euler", TASK, [])
        for n in range(4, len(history) + 1, 2):  # the loop's calls: one a turn, the history growing
            sent = await compaction.shape(state, history[:n])
        return sent, compaction, model

    sent, before, model = asyncio.run(live())
    assert before.cuts >= 5 and model.calls == before.cuts  # one summarizing call a cut
    live_cuts = len(store.events(run="r", kinds=[CONTEXT_COMPACTED]))

    async def restart() -> tuple[list[Message], Compaction, FunctionModel, LoopState]:
        model = summarizer()  # a fresh process: nothing remembered but the history
        compaction = compaction_for("summary:1500", model=model, store=store)
        state = LoopState("r", "Euler", TASK, [])
        return await compaction.shape(state, history), compaction, model, state

    again, after, remade, state = asyncio.run(restart())
    assert again == sent  # the same context, with the model's summaries, never the extractive stand-ins
    summaries = [m.content for m in again if m.content.startswith(SUMMARY_MARK)]
    assert summaries and all("model summary" in text for text in summaries)
    assert remade.calls == before.cuts and state.cost_usd == pytest.approx(0.01 * before.cuts)  # none wasted
    assert after.cuts == 0  # restored, not a new cut
    events = store.events(run="r", kinds=[CONTEXT_COMPACTED])
    assert len(events) == live_cuts + 1 and events[-1].data["resumed"] is True
    assert not any(e.data["resumed"] for e in events[:-1])
    assert "context restored on restart (summary:1500)" in format_event(events[-1], store)
