"""Summarizers: what turns a span of old turns into one structured summary (the `summary` strategies).

- `Summarizer`: the protocol, `summarizer(span) -> str`, synchronous so a strategy stays a pure function.
- `RecordingSummarizer(inner)`: memoizes by the span's content (a span is summarized once) and keeps
  `calls`, each real call's input span and output text, so the replay can count their tokens.
- `ExtractiveSummarizer()`: no model; fills the fixed sections by rules (files touched, commands run
  and their exit status, the last error, the tests run). Deterministic: the replay's summarizer.
- `ModelSummarizer(model)`: the live loop's. A model call is async and a strategy is not, so it works
  in two steps (see the class): called synchronously it answers from its memo, and notes a span it has
  no summary for yet; `fill()` (awaited by the `Compaction` policy before the model call) makes the
  noted calls; the policy then runs the strategy again, which finds them in the memo.

What must not live here: when to summarize (the strategies) and what is pinned (`pinned.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hilbert.context.pinned import (
    SUMMARY_MARK,
    command_of,
    is_harness,
    is_observation,
    is_rule,
    rule_line,
    status_of,
)
from hilbert.context.render import render
from hilbert.errors import ModelError
from hilbert.models.types import Message, Model, Usage

SECTIONS = (
    "Goal",
    "Completed",
    "Pending",
    "Current state",
    "Code state",
    "Tests",
    "Changes",
    "Rules",
)
INSTRUCTION = (
    "You are compacting a coding agent's working memory. Summarize the conversation excerpt below for "
    "the agent itself, who will continue the task without seeing the excerpt again. Write exactly these "
    "markdown sections, each a few short bullet lines (write `- none` when empty): "
    + ", ".join(f"## {s}" for s in SECTIONS)
    + ". Keep exact file paths, function and test names, commands and error messages; drop chatter. "
    "Under Rules keep every instruction the agent was given about what it must or must not do."
)


class Summarizer(Protocol):
    def __call__(self, span: Sequence[Message]) -> str: ...


def span_key(span: Sequence[Message]) -> str:
    """The content of a span, as a memo key (two spans with the same messages share a summary)."""
    return json.dumps([m.to_json() for m in span], sort_keys=True, ensure_ascii=False)


@dataclass
class RecordingSummarizer:
    """`inner`, called once per distinct span; `calls` lists each real call's span and summary."""

    inner: Summarizer
    calls: list[tuple[tuple[Message, ...], str]] = field(default_factory=list)
    _memo: dict[str, str] = field(default_factory=dict, repr=False)

    def __call__(self, span: Sequence[Message]) -> str:
        key = span_key(span)
        if key not in self._memo:
            self._memo[key] = text = self.inner(span)
            self.calls.append((tuple(span), text))
        return self._memo[key]


MAX_ITEMS = 8  # bullets a section keeps (the latest), so summaries of summaries do not grow
MAX_CHANGES = 24  # files changed: all of them matter, while there are not too many
MAX_ITEM_CHARS = 240
_PATH = re.compile(r"[\w./-]+\.(?:py|pyi|js|ts|go|rs|java|c|h|cpp|rb|md|txt|toml|yaml|yml|json|cfg|ini)\b")
_TEST = re.compile(r"\b(?:pytest|unittest|tox|nox|tests?)\b")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
_ERROR = re.compile(r"^\s*(\w*(?:Error|Exception|Failure)\b.*)$", re.MULTILINE)
_WRITES = re.compile(r"\bsed -i\b|>\s*[\w./-]+|\bpatch\b|\bgit apply\b|\btee\b")
_SECTION = re.compile(r"^## (.+)$")
_EDITS = frozenset({"edit_file", "write_file"})
_EDITED = re.compile(r'"path": "([^"]+)"')


def sections_of(summary: str) -> dict[str, list[str]]:
    """The bullets of each `## Section` of a summary written in the fixed format."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        if heading := _SECTION.match(line):
            current = found.setdefault(heading.group(1).strip(), [])
        elif current is not None and line.startswith("- ") and line != "- none":
            current.append(line[2:])
    return found


@dataclass(frozen=True)
class ExtractiveSummarizer:
    """The fixed sections filled by rules from the span (and from the previous summary, when the span
    starts with one): commands and their exit status, files read and changed, tests and failures,
    the last error, the agent's last stated intent, rule lines from the harness's messages."""

    def __call__(self, span: Sequence[Message]) -> str:
        notes: dict[str, list[str]] = {s: [] for s in SECTIONS}
        earlier: dict[str, list[str]] = {}
        start = 0
        if span and is_harness(span[0]) and span[0].content.startswith(SUMMARY_MARK):
            earlier, start = sections_of(span[0].content), 1
            for name in ("Goal", "Completed", "Code state", "Tests", "Changes", "Rules"):
                notes[name] += earlier.get(name, [])
        last_error, intent, failing = "", "", ""
        for index in range(start, len(span)):
            message = span[index]
            if message.role == "assistant":
                said = next((line.strip() for line in message.content.splitlines() if line.strip()), "")
                intent = said or intent
                if said and not notes["Goal"]:
                    notes["Goal"].append(said)
                continue
            if is_observation(span, index):
                command, status = command_of(span, index), status_of(message)
                ok = status in ("ok", "exit 0")
                line = f"`{command}` → {status}"
                paths = _PATH.findall(command)
                if message.name in _EDITS:
                    if ok:
                        notes["Changes"] += [f"changed {p}" for p in _EDITED.findall(command)[:1]]
                    else:
                        notes["Current state"].append(f"a failed edit: {line}")
                    continue
                notes["Completed" if ok else "Current state"].append(line)
                if _TEST.search(command):
                    notes["Tests"].append(line)
                    notes["Tests"] += [f"failing: {name}" for name in _FAILED.findall(message.content)[:3]]
                if ok and _WRITES.search(command):
                    notes["Changes"] += [f"changed {p}" for p in paths or [command]]
                else:
                    notes["Code state"] += [f"looked at {p}" for p in paths]
                errors = _ERROR.findall(message.content)
                if not ok and errors:
                    last_error = errors[-1].strip()
                failing = "" if ok else line
            elif message.role == "user" and not is_harness(message):
                lines = [line for line in message.content.splitlines() if line.strip()]
                notes["Rules"] += [rule_line(line) for line in lines if is_rule(line)]
        if not notes["Goal"]:
            notes["Goal"].append("the task in the first user message")
        if failing:
            notes["Pending"].append(f"the last command failed: {failing}")
        if intent:
            notes["Pending"].append(f"what you last said you would do: {intent}")
        if last_error:
            notes["Current state"].append(f"last error: {last_error}")
        for name in ("Pending", "Current state"):  # what is current: the span's, else the earlier summary's
            notes[name] = notes[name] or earlier.get(name, [])
        return "\n".join(_section(name, notes.get(name, [])) for name in SECTIONS)


def _section(name: str, items: list[str]) -> str:
    kept: list[str] = []
    for item in reversed(items):  # the latest first, without repeats
        item = _clip(" ".join(item.split()))
        if item and item not in kept:
            kept.append(item)
    limit = MAX_CHANGES if name == "Changes" else MAX_ITEMS
    kept = list(reversed(kept[:limit])) if name != "Goal" else list(reversed(kept))[:1]
    return "\n".join([f"## {name}", *(f"- {item}" for item in kept or ["none"])])


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


def transcript(span: Sequence[Message], max_chars: int) -> str:
    """The span as the summarizing model reads it: each message's role and text, long ones cut in
    the middle to `max_chars`."""
    parts = []
    for message in span:
        text = render(message)
        if len(text) > max_chars:
            half = max_chars // 2
            text = f"{text[:half]}\n[... {len(text) - 2 * half:,} chars cut ...]\n{text[-half:]}"
        parts.append(f"[{message.role}]\n{text}")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class SummaryCall:
    """One summarizing model call: what it cost and what it wrote (or why it failed)."""

    messages: int
    text: str
    usage: Usage
    cost_usd: float
    error: str | None = None


@dataclass
class ModelSummarizer:
    """Summaries by one model call each (the fixed `INSTRUCTION`), for the live loop.

    A strategy is synchronous and pure; a model call is async. So, called synchronously, this answers
    a span it has summarized from its memo, and for a new span notes it in `wanted` and answers with
    the extractive summary as a stand-in. `await fill()` makes the calls for the noted spans; the
    `Compaction` policy runs the strategy, fills, and runs it again until nothing is wanted, so what
    is sent only ever holds model summaries (or, when the model call failed, the extractive one).
    A span that holds an earlier summary still a stand-in (a resumed history with several cuts) is
    not noted: it is asked for again once that summary is written, so no call summarizes a stand-in.
    `settled(span)` says whether the answer for a span is final (strategies memoize only those)."""

    model: Model
    max_chars: int = 4000  # of one message in the transcript
    fallback: Summarizer = field(default_factory=ExtractiveSummarizer)
    wanted: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    _memo: dict[str, str] = field(default_factory=dict, repr=False)

    def __call__(self, span: Sequence[Message]) -> str:
        key = span_key(span)
        if key in self._memo:
            return self._memo[key]
        if not any(self._standin(m) for m in span):
            self.wanted[key] = tuple(span)
        return self.fallback(span)

    def settled(self, span: Sequence[Message]) -> bool:
        return span_key(span) in self._memo

    def _standin(self, message: Message) -> bool:
        """A summary message (the strategies' `SUMMARY_MARK` + text) whose text no call wrote."""
        mark = f"{SUMMARY_MARK}\n"
        return message.content.startswith(mark) and message.content[len(mark) :] not in self._finals

    @property
    def _finals(self) -> set[str]:
        return set(self._memo.values())

    async def fill(self) -> list[SummaryCall]:
        """Summarize every wanted span; the calls made."""
        calls = []
        for key, span in list(self.wanted.items()):
            request = [Message("system", INSTRUCTION), Message("user", transcript(span, self.max_chars))]
            try:
                done = await self.model.complete(request)
            except ModelError as failure:
                self._memo[key] = self.fallback(span)
                calls.append(SummaryCall(len(span), self._memo[key], Usage(), 0.0, str(failure)))
            else:
                self._memo[key] = done.message.content.strip() or self.fallback(span)
                calls.append(SummaryCall(len(span), self._memo[key], done.usage, done.cost_usd))
            del self.wanted[key]
        return calls


__all__ = [
    "INSTRUCTION",
    "SECTIONS",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "RecordingSummarizer",
    "Summarizer",
    "SummaryCall",
    "sections_of",
    "span_key",
    "transcript",
]
