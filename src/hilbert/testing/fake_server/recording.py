"""The fake server's request log: one JSON object per request, appended as a line to a file
(`--record FILE`) and, for tests, kept in memory.

An entry holds: `time` (unix seconds), `method`, `path` (with query), `protocol` (`anthropic`,
`openai-chat`, `openai-responses`, or null for other endpoints), `headers` (a few useful ones;
credentials are recorded only as present: `***`), `body` (the parsed JSON, or the raw text if it was
not JSON), `status` (null for a hung request), `stream`, `fault` (the injected fault, or `rate_limit`
when the rate limits refused it), `reply` (what the responder gave, before
any fault changed it) and `usage`. An entry is written when the server starts to answer, before the
client can see the end of the response, so a test that has its reply also has its entry.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from hilbert.models.types import Usage
from hilbert.testing.fake_server.responder import Reply

RECORDED_HEADERS = (
    "user-agent",
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-app",
    "x-stainless-lang",
    "x-stainless-retry-count",
)
SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


def selected_headers(headers: Any) -> dict[str, str]:
    chosen = {name: headers[name] for name in RECORDED_HEADERS if name in headers}
    chosen.update({name: "***" for name in SECRET_HEADERS if name in headers})
    return chosen


def reply_json(reply: Reply) -> dict[str, Any]:
    # by hand, not dataclasses.asdict: asdict deep-copies, and this runs once per request
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments, "raw_arguments": c.raw_arguments}
        for c in reply.tool_calls
    ]
    return {"text": reply.text, "tool_calls": calls}


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


class Recorder:
    """Appends entries to `path` (if given) and keeps them in `entries` (if `keep`)."""

    def __init__(self, path: str | Path | None = None, *, keep: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.keep = keep
        self._entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def open(self) -> None:
        if self.path is not None and self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def add(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, default=str)
        with self._lock:
            if self.keep:
                self._entries.append(entry)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    @property
    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
