"""`FunctionModel`: a `Model` (hilbert.models.types) answered in-process by a function of yours.

For tests that need a model whose answers, failures or side effects a few lines decide, without a
server or a wire. The function gets the conversation and the tools offered, sync or async, and returns
either a `Reply` (text and tool calls, as the fake server's responders do; usage is counted the fake
server's way, cost is zero) or a whole `Completion` (its usage and cost as given, e.g. what a wrapped
real model returned). Whatever it raises, the caller of `complete` gets.

    model = FunctionModel(lambda messages, tools: Reply(text="done"))
    await model.complete([Message("user", "hi")])          # model.calls == 1

For a model over the wire, with faults and latency, use the fake server (`fake_server.FakeServer`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from hilbert.models.types import Completion, Message, TextCallback, ToolSpec, Usage
from hilbert.testing.fake_server.responder import Reply
from hilbert.testing.fake_server.usage import count_tokens

Answer = Reply | Completion
ModelFunction = Callable[[Sequence[Message], Sequence[ToolSpec]], Answer | Awaitable[Answer]]


class FunctionModel:
    """Answers each `complete` call with `function(messages, tools)`; counts the calls in `calls`."""

    def __init__(self, function: ModelFunction, *, name: str = "function") -> None:
        self.function, self.name, self.calls = function, name, 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> Completion:
        self.calls += 1
        answer = self.function(messages, tools)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Completion):
            return answer
        if on_text is not None and answer.text:
            on_text(answer.text)
        usage = Usage(
            input_tokens=sum(count_tokens(m.content) for m in messages),
            output_tokens=count_tokens(answer.text) + sum(count_tokens(c.name) for c in answer.tool_calls),
        )
        message = Message("assistant", answer.text, tool_calls=answer.tool_calls)
        return Completion(message, usage, "tool_use" if answer.tool_calls else "end_turn", self.name)
