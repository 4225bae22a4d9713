"""A loopback HTTP server that answers every POST with the next scripted error response.

For the error statuses the project's fake model server does not produce (401, 404, context
overflow, quota, mid-stream error events): each test scripts the exact bytes a provider would send.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Scripted:
    """One response: a JSON error (`status`, `body`), or an SSE stream of `events` with status 200
    (each `(event name or None, data)`; data a string is sent as is), ended by closing cleanly."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[tuple[str | None, Any], ...] = ()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.server.requests.append(json.loads(self.rfile.read(length) or b"{}"))
        reply = self.server.script.pop(0) if self.server.script else Scripted(500, {"error": "script ended"})
        if reply.events:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for event, data in reply.events:
                head = f"event: {event}\n" if event else ""
                text = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write(f"{head}data: {text}\n\n".encode())
            self.close_connection = True
            return
        data = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: list[Scripted]
    requests: list[Any]


@contextmanager
def error_server(*script: Scripted) -> Iterator[_Server]:
    """Serve `script` on 127.0.0.1 (a free port); `.server_address[1]` is the port."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.script = list(script)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def url(server: _Server, path: str = "/v1") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"
