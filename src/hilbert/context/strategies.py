"""The compaction strategies: pure functions from a conversation to the messages that would be sent.

A strategy is called with the whole conversation (oldest first: the system prompt, the task, then the
turns) and returns what to send. Specs (`strategy_named`):

- `none` — everything.
- `mask:M,P` — the observations of turns older than the last `M` become a one-line placeholder (the
  command, its exit status, its size, and where the shell tool saved the whole output); the boundary
  moves only every `P` turns (a turn: an assistant message and the tool results it called for).
- `forget:K,B` — keep the first `K` messages (to the end of that turn); when what would be sent is
  over `B` tokens, drop the older half of the rest (whole turns) and put the pinned state after them.
- `summary:B` — the same cut, but the dropped turns (and the previous summary) become one summary.
- `hybrid:M,P,B` — masking always, and a summary when the masked context is still over `B`.

Properties every strategy keeps (tests check them): deterministic; pinned messages (`pinned.py`: the
task, the judge's feedback) are never masked, the task is never dropped, and the pinned state (with
the latest judge feedback whole) is restated after every cut; a turn is dropped whole (an assistant
message with its tool results), so no tool result is left without its call; and *prefix-stable*: the
cut is a fold over the conversation's model-call points (the context before each assistant message,
and the end), advanced only when a budget is crossed, so between cuts the sent list only grows at its
end and a provider's prompt cache keeps hitting.

Each `Compactor` keeps a memo per conversation (keyed by its first two messages) of token counts and
of the fold's state at each point, so calling it at every turn of a replay costs about O(n) a call.
What must not live here: token counting (`render.py`), what is pinned (`pinned.py`), how a span is
summarized (`summarize.py`), the loop seam (`policy.py`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hilbert.context.pinned import SUMMARY_MARK, command_of, is_observation, pinned_state, status_of
from hilbert.context.render import TokenCache
from hilbert.context.summarize import ExtractiveSummarizer, ModelSummarizer, Summarizer
from hilbert.errors import UserError
from hilbert.models.types import Message
from hilbert.settings import ContextSettings

SPECS: tuple[str, ...] = (
    "none",
    "mask:10,1",
    "mask:10,10",
    "mask:20,20",
    "forget:2,16000",
    "forget:2,18000",
    "forget:2,20000",
    "forget:2,32000",
    "summary:16000",
    "summary:32000",
    "hybrid:10,10,32000",
    "hybrid:20,20,32000",
)
DEFAULT = ContextSettings().strategy  # the settings' default, chosen by the replay benchmark (docs/bench.md)
MAX_TRACKED = 16  # conversations a Compactor keeps a memo for
_SAVED = re.compile(r"the whole output is in (\S+?)(?: \(cut at [\d,]+ bytes\))?\]")


class Strategy(Protocol):
    @property
    def name(self) -> str: ...  # its spec

    def __call__(self, messages: Sequence[Message]) -> list[Message]: ...


def placeholder(messages: Sequence[Message], index: int) -> Message:
    """What a masked observation becomes: the same message (role, call id, error flag) with a one-line content
    naming the command, its exit status, its size and the saved output, when there is one."""
    message = messages[index]
    content = message.content
    lines = len(content.splitlines())
    saved = _SAVED.search(content)
    where = f"the whole output is in {saved.group(1)}" if saved else "run it again to see it"
    text = (
        f"[output masked by hilbert: `{command_of(messages, index)}` → {status_of(message)}, {lines} lines, "
        f"{len(content):,} chars; {where}]"
    )
    return Message(
        message.role, text, tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error
    )


@dataclass(frozen=True)
class Window:
    """Masking: the observations of the last `keep` turns stay whole; the boundary moves every `every`
    turns."""

    keep: int
    every: int

    def masked(self, turns: int) -> int:
        """How many of the oldest `turns` have their observations masked."""
        return max(0, (turns - self.keep) // self.every * self.every)


@dataclass(frozen=True)
class _State:
    """The fold's state after a point: messages [head end, cut) are gone (none when cut is None).
    `provisional`: its summary (or an earlier one it summarizes) is a stand-in a `ModelSummarizer`
    will replace, so it is not memoized."""

    cut: int | None = None
    pinned: Message | None = None
    summary: Message | None = None
    provisional: bool = False


@dataclass
class _Track:
    """The memo of one conversation: its messages so far, their tokens, the fold's states."""

    messages: list[Message] = field(default_factory=list)
    raw: list[int] = field(default_factory=lambda: [0])  # prefix sums of tokens as written
    view: list[int] = field(default_factory=lambda: [0])  # prefix sums, observations masked
    masks: dict[int, Message] = field(default_factory=dict)  # index -> placeholder
    observations: list[int] = field(default_factory=list)  # indices, in order
    assistants: list[int] = field(default_factory=list)  # indices >= 2, in order
    states: list[tuple[int, _State]] = field(default_factory=list)  # (point, state), in order


@dataclass(frozen=True)
class Compactor:
    """A strategy (see the module docstring); `strategy_named` builds one from its spec."""

    name: str
    tokens: TokenCache
    window: Window | None = None
    keep_first: int = 2
    budget: int | None = None
    summarizer: Summarizer | None = None
    _tracks: dict[tuple[str, str], _Track] = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        if (self.window is None and self.budget is None) or len(messages) < 2:
            return list(messages)
        track = self._track(messages)
        n = len(messages)
        state = self._fold(track, n)
        boundary = self._boundary(track, n)
        if state.cut is None:
            return [self._shown(track, i, boundary) for i in range(n)]
        head = self._head_end(track, n)
        extra = [m for m in (state.summary, state.pinned) if m is not None]
        return [
            *(self._shown(track, i, boundary) for i in range(head)),
            *extra,
            *(self._shown(track, i, boundary) for i in range(state.cut, n)),
        ]

    # -- the memo ---------------------------------------------------------------------------------
    def _track(self, messages: Sequence[Message]) -> _Track:
        key = (messages[0].content, messages[1].content)
        track = self._tracks.pop(key, None) or _Track()
        self._tracks[key] = track  # most recent last
        while len(self._tracks) > MAX_TRACKED:
            del self._tracks[next(iter(self._tracks))]
        same = 0
        for old, new in zip(track.messages, messages, strict=False):
            if old is not new and old != new:
                break
            same += 1
        if same < len(track.messages):  # another conversation with the same start: forget the rest
            del track.messages[same:], track.raw[same + 1 :], track.view[same + 1 :]
            track.masks = {i: m for i, m in track.masks.items() if i < same}
            track.observations = [i for i in track.observations if i < same]
            track.assistants = [i for i in track.assistants if i < same]
            track.states = [(j, s) for j, s in track.states if j < same]
        for i in range(same, len(messages)):
            track.messages.append(messages[i])
            raw = self.tokens.count(messages[i])
            shown = raw
            if self.window is not None and is_observation(messages, i):
                track.observations.append(i)
                track.masks[i] = placeholder(messages, i)
                shown = self.tokens.count(track.masks[i])
            if messages[i].role == "assistant" and i >= 2:
                track.assistants.append(i)
            track.raw.append(track.raw[-1] + raw)
            track.view.append(track.view[-1] + shown)
        return track

    def _boundary(self, track: _Track, point: int) -> int:
        """Observations before this index are masked in the context sent at `point`."""
        if self.window is None:
            return 0
        masked = self.window.masked(bisect.bisect_left(track.assistants, point))
        return track.assistants[masked] if masked else 0  # the first kept turn starts here

    def _shown(self, track: _Track, index: int, boundary: int) -> Message:
        if index < boundary and index in track.masks:
            return track.masks[index]
        return track.messages[index]

    def _span(self, track: _Track, start: int, end: int, boundary: int) -> int:
        """Tokens of messages [start, end) as sent with masking `boundary`."""
        middle = min(max(boundary, start), end)
        return track.view[middle] - track.view[start] + track.raw[end] - track.raw[middle]

    def _head_end(self, track: _Track, point: int) -> int:
        """The kept head: the first `keep_first` messages, to the end of that turn."""
        found = bisect.bisect_left(track.assistants, self.keep_first)
        return min(track.assistants[found], point) if found < len(track.assistants) else point

    # -- the fold ---------------------------------------------------------------------------------
    def _fold(self, track: _Track, n: int) -> _State:
        if self.budget is None:
            return _State()
        state = track.states[-1][1] if track.states else _State()
        last = track.states[-1][0] if track.states else -1
        for point in track.assistants[bisect.bisect_right(track.assistants, last) :]:
            state = self._advance(track, point, state)
            if not state.provisional:  # from a stand-in on, states are worked out again once it is filled
                track.states.append((point, state))
        return self._advance(track, n, state) if n not in track.assistants else state

    def _advance(self, track: _Track, point: int, state: _State) -> _State:
        """The state at `point`: the previous one, cut again while what would be sent is over budget."""
        assert self.budget is not None
        boundary = self._boundary(track, point)
        head = self._head_end(track, point)
        while self._sent_tokens(track, point, state, head, boundary) > self.budget:
            start = head if state.cut is None else state.cut
            at = self._cut_at(track, start, point, boundary)
            if at is None:
                break
            summary, provisional = state.summary, state.provisional
            if self.summarizer is not None:
                span = [m for m in [summary] if m is not None]
                span += [self._shown(track, i, boundary) for i in range(start, at)]
                summary = Message("user", f"{SUMMARY_MARK}\n{self.summarizer(span)}")
                if isinstance(self.summarizer, ModelSummarizer):
                    provisional = provisional or not self.summarizer.settled(span)
            state = _State(at, pinned_state(track.messages[:point]), summary, provisional)
        return state

    def _sent_tokens(self, track: _Track, point: int, state: _State, head: int, boundary: int) -> int:
        if state.cut is None:
            return self._span(track, 0, point, boundary)
        extra = sum(self.tokens.count(m) for m in (state.summary, state.pinned) if m is not None)
        return self._span(track, 0, head, boundary) + extra + self._span(track, state.cut, point, boundary)

    def _cut_at(self, track: _Track, start: int, point: int, boundary: int) -> int | None:
        """Where to cut [start, point): the first turn start past half its tokens; the last turn stays."""
        turns = [i for i in track.assistants if start < i < point]
        if not turns:
            return None
        half = self._span(track, start, point, boundary) / 2
        return next((i for i in turns if self._span(track, start, i, boundary) >= half), turns[-1])


def strategy_named(spec: str, *, tokens: TokenCache, summarizer: Summarizer | None = None) -> Strategy:
    """The strategy a spec names (`none`, `mask:M,P`, `forget:K,B`, `summary:B`, `hybrid:M,P,B`;
    B in tokens as `tokens` counts them, `32k` = 32000). The summarizing ones use `summarizer`,
    by default an `ExtractiveSummarizer`."""
    kind, _, args = spec.strip().partition(":")
    shapes = {"none": 0, "mask": 2, "forget": 2, "summary": 1, "hybrid": 3}
    hint = "one of none, mask:M,P, forget:K,B, summary:B, hybrid:M,P,B (e.g. " + ", ".join(SPECS[1:4]) + ")"
    if kind not in shapes:
        raise UserError(f"unknown context strategy {spec!r}", hint=hint)
    values = [_number(part, spec, hint) for part in args.split(",")] if args else []
    if len(values) != shapes[kind]:
        raise UserError(f"context strategy {spec!r} needs {shapes[kind]} number(s)", hint=hint)
    name = kind + (":" + ",".join(map(str, values)) if values else "")
    summarizer = summarizer or ExtractiveSummarizer()
    if kind == "mask":
        return Compactor(name, tokens, window=Window(*values))
    if kind == "forget":
        if values[0] < 2:
            raise UserError(f"{spec!r}: K must keep the system prompt and the task", hint="K >= 2")
        return Compactor(name, tokens, keep_first=values[0], budget=values[1])
    if kind == "summary":
        return Compactor(name, tokens, budget=values[0], summarizer=summarizer)
    if kind == "hybrid":
        return Compactor(name, tokens, window=Window(*values[:2]), budget=values[2], summarizer=summarizer)
    return Compactor(name, tokens)


def _number(text: str, spec: str, hint: str) -> int:
    text = text.strip().lower()
    scale = 1000 if text.endswith("k") else 1
    digits = text.removesuffix("k")
    if not digits.isdigit() or int(digits) * scale < 1:
        raise UserError(f"context strategy {spec!r}: {text!r} is not a positive whole number", hint=hint)
    return int(digits) * scale


__all__ = [
    "DEFAULT",
    "SPECS",
    "Compactor",
    "Strategy",
    "Window",
    "is_observation",
    "placeholder",
    "strategy_named",
]
