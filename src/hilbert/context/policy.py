"""The loop seam of compaction: a `Policy` whose `shape` hook sends what the strategy decides.

`Compaction(strategy, tokens, store=..., summarizer=...)` runs the strategy on the agent's whole
conversation before each model call; the loop sends the result and keeps the full history (the log,
resume and the views see everything; the `model_call` event names what was sent when it differs).

A summarizing strategy is synchronous and pure, a model call is not: with a `ModelSummarizer` the
policy runs the strategy, awaits the summaries it found missing (`fill`), and runs it again until
none is missing (the strategy memoizes, so the second run is cheap). A resumed history with several
cuts needs one round per cut (each summary summarizes the one before it); after a restart they are
written again, since the summarizer's memo lived in the process that died. The summarizing calls' usage and
cost are added to the agent's (`LoopState.usage`, `cost_usd`), so its budgets count them, and are
recorded in the event.

Whenever what is sent stops being an append-only extension of what was sent before (a cut moved),
it records `context_compacted` (with `resumed: true` on the first call of a restarted agent, whose
earlier cuts are restored, not new): the strategy, `first_changed` (the first history message not sent as
written), `kept_from` (from here on the history is sent as written), tokens before (the history) and
after (what is sent), the pinned state's and the summary's message blobs (or null), and the
summarizing calls (usage, cost, errors). `compaction_for(spec, model, store)` builds the usual one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hilbert.agent.policies import LoopState, Policy
from hilbert.context.pinned import PINNED_MARK, SUMMARY_MARK
from hilbert.context.render import TokenCache
from hilbert.context.strategies import Strategy, strategy_named
from hilbert.context.summarize import ModelSummarizer, SummaryCall
from hilbert.context.tokens import tokenizer_for
from hilbert.models.types import Message, Model
from hilbert.store import EventStore

CONTEXT_COMPACTED = "context_compacted"


class Compaction(Policy):
    name = "compaction"

    def __init__(
        self,
        strategy: Strategy,
        tokens: TokenCache,
        *,
        store: EventStore | None = None,
        summarizer: ModelSummarizer | None = None,
    ) -> None:
        """`summarizer` is the one `strategy` was built with, when it is a model's."""
        self.strategy, self.tokens, self.store, self.summarizer = strategy, tokens, store, summarizer
        self.sent: list[Message] | None = None  # what the last call sent
        self.cuts = 0

    async def shape(self, state: LoopState, messages: Sequence[Message]) -> list[Message]:
        sent = self.strategy(messages)
        calls: list[SummaryCall] = []
        for _ in range(len(messages)):  # a round settles at least one cut; there are fewer cuts than this
            if self.summarizer is None or not self.summarizer.wanted:
                break
            calls += await self.summarizer.fill()
            sent = self.strategy(messages)
        for call in calls:
            state.usage += call.usage
            state.cost_usd += call.cost_usd
        before = self.sent
        self.sent = sent
        moved = sent[: len(before)] != before if before is not None else sent != list(messages)
        resumed = before is None and moved  # a first call that is not a fresh agent's: a restart
        if moved or calls:
            self.cuts += moved and not resumed
            self.record(state, messages, sent, calls, resumed=resumed)
        return sent

    def record(
        self,
        state: LoopState,
        history: Sequence[Message],
        sent: list[Message],
        calls: list[SummaryCall],
        *,
        resumed: bool = False,
    ) -> None:
        if self.store is None:
            return
        first = next((i for i, (a, b) in enumerate(zip(history, sent, strict=False)) if a != b), len(sent))
        same = 0
        while same < min(len(history), len(sent)) and history[-1 - same] == sent[-1 - same]:
            same += 1
        harness = {
            mark: next((m for m in sent if m.role == "user" and m.content.startswith(mark)), None)
            for mark in (PINNED_MARK, SUMMARY_MARK)
        }
        data: dict[str, Any] = {
            "strategy": self.strategy.name,
            "first_changed": first,
            "kept_from": len(history) - same,
            "tokens_before": self.tokens.total(list(history)),
            "tokens_after": self.tokens.total(sent),
            "messages_before": len(history),
            "messages_after": len(sent),
            "pinned": self._blob(harness[PINNED_MARK]),
            "summary": self._blob(harness[SUMMARY_MARK]),
            "resumed": resumed,
            "summary_calls": [
                {k: v for k, v in asdict(c).items() if k != "text"} | {"chars": len(c.text)} for c in calls
            ],
        }
        self.store.append(state.run, state.agent, CONTEXT_COMPACTED, data)

    def _blob(self, message: Message | None) -> str | None:
        assert self.store is not None
        return self.store.put_messages([message])[0] if message is not None else None


def compaction_for(spec: str, *, model: Model, store: EventStore | None = None) -> Compaction:
    """The `Compaction` for a spec (see `strategy_named`): tokens counted as `model`'s tokenizer would
    (offline, `tokenizer_for`), summaries written by `model` itself."""
    tokens = TokenCache(tokenizer_for(model.name))
    summarizer = ModelSummarizer(model)
    strategy = strategy_named(spec, tokens=tokens, summarizer=summarizer)
    return Compaction(strategy, tokens, store=store, summarizer=summarizer)


__all__ = ["CONTEXT_COMPACTED", "Compaction", "compaction_for"]
