"""Reading a recorded mini-swe-agent trajectory as hilbert `Message`s, for replaying strategies on it.

mini-swe-agent's `trajectory_format` ("mini-swe-agent-1") is one JSON object `{"info", "messages",
"instance_id"}`, optionally gzip'd (`.traj.json.gz`). Its messages are `{"role", "content"}` with
roles system, user and assistant only: the agent writes a bash block in its text, and the command's
output comes back as the next `user` message (an *observation*). That shape is kept as it is — no
tool calls are invented — so a strategy sees what the agent's model saw. An assistant message's
`extra.response.usage` (an OpenAI-style usage object) is what the server reported for the call that
produced it: its `prompt_tokens` counted the messages before it.

A file that is not such a trajectory raises a one-line `UserError` naming the file.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from hilbert.errors import UserError
from hilbert.models.types import Message, Role

SUFFIXES = (".traj.json", ".traj.json.gz")
_ROLES: tuple[Role, ...] = ("system", "user", "assistant")
_HINT = 'expected a mini-swe-agent trajectory: {"messages": [{"role", "content"}, ...]}'


@dataclass(frozen=True)
class ReportedUsage:
    """What the server reported for one model call."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class Trajectory:
    """One recorded agent run: its messages, oldest first (`messages[0]` the system prompt,
    `messages[1]` the task), and per message the usage reported for the call that produced it
    (`None` for every message but assistant turns whose response carried one)."""

    name: str
    messages: tuple[Message, ...]
    usage: tuple[ReportedUsage | None, ...]

    @property
    def calls(self) -> tuple[int, ...]:
        """The model calls: the index of each assistant message (its context is every message before it)."""
        return tuple(i for i, m in enumerate(self.messages) if m.role == "assistant")


def load_trajectory(path: Path) -> Trajectory:
    """The trajectory in `path` (`.traj.json` or `.traj.json.gz`)."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"{path}: not a readable trajectory ({reason})", hint=_HINT) from None
    return parse_trajectory(data, path)


def parse_trajectory(data: Any, path: Path) -> Trajectory:
    """The trajectory in already-decoded JSON `data` (read from `path`, named in errors)."""

    def bad(what: str) -> UserError:
        return UserError(f"{path}: {what}", hint=_HINT)

    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise bad("no list of messages")
    messages: list[Message] = []
    usage: list[ReportedUsage | None] = []
    for number, item in enumerate(data["messages"]):
        if not isinstance(item, dict) or item.get("role") not in _ROLES:
            raise bad(f"message {number} has no role among {', '.join(_ROLES)}")
        content = _text(item.get("content"))
        if content is None:
            raise bad(f"message {number} has no text content")
        messages.append(Message(role=cast(Role, item["role"]), content=content))
        usage.append(_usage(item) if item["role"] == "assistant" else None)
    if len(messages) < 2 or messages[0].role != "system" or messages[1].role != "user":
        raise bad("does not start with a system message and the task (a user message)")
    name = data.get("instance_id")
    if not isinstance(name, str) or not name:
        name = path.name.removesuffix(".gz").removesuffix(".json").removesuffix(".traj")
    return Trajectory(name=name, messages=tuple(messages), usage=tuple(usage))


def find_trajectories(where: Path) -> Iterator[Path]:
    """`where` itself if it is a file, else every trajectory file under it, sorted by path."""
    if where.is_file():
        yield where
        return
    if not where.is_dir():
        raise UserError(f"no such corpus: {where}", hint="give a folder of .traj.json(.gz) files or one file")
    yield from sorted(p for p in where.rglob("*.traj.json*") if p.name.endswith(SUFFIXES) and p.is_file())


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or (newer mini-swe-agent) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _usage(item: dict[str, Any]) -> ReportedUsage | None:
    extra = item.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    completion = usage.get("completion_tokens")
    return ReportedUsage(
        prompt_tokens=usage["prompt_tokens"],
        completion_tokens=completion if isinstance(completion, int) else 0,
        cached_tokens=cached if isinstance(cached, int) else 0,
    )


__all__ = ["ReportedUsage", "Trajectory", "find_trajectories", "load_trajectory", "parse_trajectory"]
