"""`EngineerResponder`: the fake server's `engineer` responder, an agent that really fixes sample projects.

It holds no state between requests. On every request it picks the dialect from the offered tools,
reads the brief (the first user message; the `Agent: NAME` line of the system prompt or, hilbert's
own agent, the first line of the first user message), and replays
the engineer's procedure (`work.py`) from the start, feeding it the observation that followed each
of its earlier turns in the conversation; the action the procedure yields next is the reply. The
procedure is deterministic, so the replayed turns are the ones it took before — unless hilbert
compacted the conversation and its first turns are gone: then the replay starts at the earliest
turn from which the procedure, started afresh, took the turns that are left (at worst, at the end:
the engineer starts over from what the workspace holds now, taking in what the turns before that
one show: `memory.py`).

Spec: `engineer[:key=value,...]`, see `quirks.py` for the options.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from hilbert.errors import UserError
from hilbert.models.types import Message
from hilbert.sim.engineer.actions import Action, Observation
from hilbert.sim.engineer.desk import Brief, Steps
from hilbert.sim.engineer.dialects import DETECTORS, Dialect, choose
from hilbert.sim.engineer.memory import remember
from hilbert.sim.engineer.quirks import EngineerOptions
from hilbert.sim.engineer.work import work
from hilbert.testing.fake_server.responder import Conversation, Reply

_AGENT = re.compile(r"^Agent:\s*(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class EngineerResponder:
    options: EngineerOptions = field(default_factory=EngineerOptions)
    seed: int = 0
    name = "engineer"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> EngineerResponder:
        parsed = EngineerOptions.parse(options)
        if parsed.dialect is not None and parsed.dialect not in DETECTORS:
            raise UserError(
                f"unknown engineer dialect {parsed.dialect!r}", hint="known: " + ", ".join(DETECTORS)
            )
        return cls(parsed, seed)

    def reply(self, conversation: Conversation) -> Reply:
        dialect = choose(conversation, self.options.dialect)
        if (transcript := getattr(dialect, "transcript", None)) is not None:
            conversation = transcript(conversation)  # the engineer's own turns only
        first = next((m.content for m in conversation.messages if m.role == "user"), "")
        agent_line = _AGENT.search(conversation.system) or _AGENT.match(first.split("\n", 1)[0])
        agent = agent_line.group(1) if agent_line else None
        brief, observations = _replay_inputs(conversation, dialect)
        identity = agent or brief.task
        quirks = self.options.quirks(self.seed, identity, agent)
        messages = conversation.messages
        at = [i for i, m in enumerate(messages) if m.role == "assistant"]
        turns = [messages[i] for i in at]
        tag = hashlib.sha256(identity.encode()).hexdigest()[:8]
        # From the first turn, or, when the conversation was compacted (its first turns are gone),
        # from the earliest turn after which the procedure, started afresh, took the turns there
        # are: the engineer starts over from what the workspace holds now, and from what the turns
        # before that one show (`memory.py`).
        for start in range(len(turns) + 1):
            memory = remember(messages[: at[start]] if start < len(at) else messages, observations[:start])
            steps = work(brief, quirks, wide_check=self.options.wide_check, memory=memory)
            action = _replay(dialect, steps, observations[start:], turns[start:])
            if action is not None:
                break
        if action is None:  # pragma: no cover - an empty suffix always replays
            return Reply(text="Done.")
        return dialect.render(action, call_id=f"call_{tag}_{len(observations)}")


def _replay(
    dialect: Dialect, steps: Steps[None], observations: list[Observation], turns: list[Message]
) -> Action | None:
    """The procedure's next action after it is fed `observations`, or None when the actions it took
    on the way are not the recorded `turns` (so these turns are not its own from a fresh start)."""
    answer = getattr(dialect, "answer", None)  # actions a dialect answers without a model turn
    try:
        action = next(steps)
        for turn in range(len(observations) + 1):
            while answer is not None and (local := answer(action, turn)) is not None:
                action = steps.send(local)
            if turn < len(observations):
                if not _same(dialect.render(action, call_id=""), turns[turn]):
                    return None
                action = steps.send(observations[turn])
    except StopIteration:  # pragma: no cover - work() never returns
        return None
    return action


def _same(reply: Reply, turn: Message) -> bool:
    """Whether a rendered reply makes the recorded turn's tool calls (or, without any, says its text).
    A client may record a call with arguments it filled in itself (Claude Code adds `replace_all:
    false` to every Edit): the call is the same when each argument the reply gave is recorded as given."""
    if not reply.tool_calls and not turn.tool_calls:
        return reply.text.strip() == turn.content.strip()
    if [call.name for call in reply.tool_calls] != [call.name for call in turn.tool_calls]:
        return False
    pairs = zip(reply.tool_calls, turn.tool_calls, strict=True)
    return all(mine.arguments.items() <= recorded.arguments.items() for mine, recorded in pairs)


def _replay_inputs(conversation: Conversation, dialect: Dialect) -> tuple[Brief, list[Observation]]:
    """The brief (the first user message, and other messages before the first assistant turn) and,
    for each assistant turn, what answered it."""
    messages = conversation.messages
    turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
    before = messages[: turns[0]] if turns else messages
    users = [m.content for m in before if m.role == "user"]
    brief = Brief.from_task(users[0] if users else "", tuple(users[1:]))
    observations = []
    for n, start in enumerate(turns):
        end = turns[n + 1] if n + 1 < len(turns) else len(messages)
        answers = messages[start + 1 : end]
        results = [m for m in answers if m.role == "tool"]
        notes = [m for m in answers if m.role in ("user", "system")]
        observations.append(dialect.observe(results, notes))
    return brief, observations
