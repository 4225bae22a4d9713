"""What the fake server's tests share: the script (its first turn asks for two tool calls) and a
responder wrapper that keeps the conversations it saw."""

from __future__ import annotations

from hilbert.testing.fake_server import Conversation, Reply, Responder

SYSTEM = "You are a careful engineer. Read before you write; run the tests before you claim anything. " * 4
FIRST_TURN = {
    "text": "Two things to check first.",
    "tool_calls": [
        {"name": "read_file", "arguments": {"path": "src/app.py"}},
        {"name": "run", "arguments": {"command": "pytest -q"}},
    ],
}
SCRIPT = [FIRST_TURN, {"text": "All done: the tests pass."}]


class Seen:
    """Wraps a responder and keeps every conversation it was asked about."""

    name = "seen"

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.conversations: list[Conversation] = []

    def reply(self, conversation: Conversation) -> Reply:
        self.conversations.append(conversation)
        return self.inner.reply(conversation)
