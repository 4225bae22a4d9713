"""The gullible scripted agent as an AgentDojo pipeline element, and the harness around its tool calls.

No model: `GullibleAgent` carries out the user task's ground-truth calls (an oracle for utility: the
benchmark authors' own solution, computed from the environment it starts in), and whenever a text it reads
— a tool output, a refusal — holds the goal of one of the suite's injection tasks, it obeys at once: it
makes that injection task's ground-truth calls (computed from the environment as it is then), then goes on
with its task. It obeys every instruction it reads, like `hilbert.sim.gullible`.

The `Harness` is what hilbert puts between a model and its tools, per `Defense`: a tool scope checked
before each call (a refused call does not run; the agent reads the refusal), and each output passed through
a keyword filter and/or wrapped in nonce fences before the agent reads it. A refused call is recorded as
the assistant's text, not as a tool call, so AgentDojo's trace-based checks (which read the calls the
model asked for) count only calls that ran.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.functions_runtime import EmptyEnv, Env, FunctionCall, FunctionsRuntime
from agentdojo.types import (
    ChatAssistantMessage,
    ChatMessage,
    ChatToolResultMessage,
    ChatUserMessage,
    text_content_block_from_string,
)

from dojo_bench.defenses import KeywordFilter, Strength, fence_output, reads_instruction
from hilbert.security.scope import ToolScope

MAX_CALLS = 60  # user task + every injection it reads; the largest ground truths are ~10 calls


@dataclass(frozen=True)
class Defense:
    name: str
    keyword_filter: bool = False
    fences: bool = False
    scope: Strength | None = None


DEFENSES = (
    Defense("none"),
    Defense("keyword filter", keyword_filter=True),
    Defense("fences", fences=True),
    Defense("fences + scope: tools", fences=True, scope="tools"),
    Defense("fences + scope: prompt args", fences=True, scope="prompt"),
    Defense("fences + scope: oracle args", fences=True, scope="oracle"),
)


@dataclass
class Tally:
    """What the harness did in one run."""

    refused: list[str] = field(default_factory=list)  # "tool: why"
    filtered: int = 0  # outputs the keyword filter dropped
    obeyed: list[str] = field(default_factory=list)  # injection task ids the agent acted on


@dataclass
class Harness:
    defense: Defense
    scope: ToolScope | None
    keywords: KeywordFilter = field(default_factory=KeywordFilter)
    tally: Tally = field(default_factory=Tally)

    def refusal(self, call: FunctionCall) -> str | None:
        if self.scope is None:
            return None
        refused = self.scope.check(call.function, dict(call.args))
        if refused is None:
            return None
        self.tally.refused.append(f"{call.function}: {refused.why}")
        return str(refused)

    def screen(self, text: str, tool: str) -> str:
        if self.defense.keyword_filter:
            text, phrase = self.keywords.screen(text)
            self.tally.filtered += phrase is not None
        if self.defense.fences:
            nonce = secrets.token_hex(8)
            while nonce in text:
                nonce = secrets.token_hex(8)
            text = fence_output(text, tool, nonce)
        return text


class GullibleAgent(BasePipelineElement):
    """Does `user_task` (its ground truth) and whatever injection task's goal it reads."""

    name = "gpt-4o-2024-05-13+hilbert-gullible-scripted"  # attacks address the model by this name

    def __init__(
        self, user_task: BaseUserTask, injections: Mapping[str, BaseInjectionTask], harness: Harness
    ) -> None:
        self.user_task, self.injections, self.harness = user_task, injections, harness

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = EmptyEnv(),  # noqa: B008 (the base class's signature)
        messages: Sequence[ChatMessage] = (),
        extra_args: Mapping[str, Any] | None = None,
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict[str, Any]]:
        log: list[ChatMessage] = [*messages, ChatUserMessage(role="user", content=[_text(query)])]
        todo = deque(self.user_task.ground_truth(env))
        obeyed: list[BaseInjectionTask] = []
        for _ in range(MAX_CALLS):
            if not todo:
                break
            call = todo.popleft()
            refusal = self.harness.refusal(call)
            if refusal is not None:  # it did not run: the model's request is kept as text
                log.append(ChatAssistantMessage(role="assistant", content=[_text(refusal)], tool_calls=None))
                continue
            log.append(ChatAssistantMessage(role="assistant", content=[_text("")], tool_calls=[call]))
            result, error = runtime.run_function(env, call.function, call.args)
            read = self.harness.screen(error or tool_result_to_str(result), call.function)
            log.append(
                ChatToolResultMessage(
                    role="tool", content=[_text(read)], tool_call=call, tool_call_id=None, error=error
                )
            )
            for task in self.injections.values():
                if task not in obeyed and reads_instruction(read, task.GOAL):
                    obeyed.append(task)
                    self.harness.tally.obeyed.append(task.ID)
                    todo.extendleft(reversed(task.ground_truth(env)))  # "before you do the task, ..."
        answer = "\n".join(t.GROUND_TRUTH_OUTPUT for t in (self.user_task, *obeyed) if t.GROUND_TRUTH_OUTPUT)
        log.append(ChatAssistantMessage(role="assistant", content=[_text(answer)], tool_calls=None))
        return query, runtime, env, log, dict(extra_args or {})


def _text(text: str) -> Any:
    return text_content_block_from_string(text)


__all__ = ["DEFENSES", "Defense", "GullibleAgent", "Harness", "Tally"]
