"""The ASGI responses of the fake server that take time: paced SSE streams, delayed or cut JSON
bodies, and hung requests.

Each runs under a cancel scope registered with the server's `Lifecycle`, and ends early when the
client disconnects (a task listens for `http.disconnect`) or when the server shuts down, so a slow
stream or a hung request never outlives its client or holds up shutdown. A response "truncated" by a
fault sends part of its body and returns without finishing it; uvicorn then drops the connection,
which the client sees as a connection closed mid-body (uvicorn logs it on `uvicorn.error`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from hilbert.testing.fake_server.faults import Pace
from hilbert.testing.fake_server.wire import Frame


class Lifecycle:
    """The cancel scopes of the responses in flight, so that shutdown can end them all at once."""

    def __init__(self) -> None:
        self.closing = False
        self._scopes: set[anyio.CancelScope] = set()

    def close(self) -> None:
        """End every response in flight (call it on the server's event loop)."""
        self.closing = True
        for scope in list(self._scopes):
            scope.cancel()

    async def guard(self, receive: Receive, body: Callable[[], Awaitable[None]]) -> bool:
        """Run `body` until it finishes, the client disconnects or the server closes.
        Returns True when `body` finished."""
        finished = False
        with anyio.CancelScope() as scope:
            if self.closing:
                scope.cancel()
            self._scopes.add(scope)
            try:
                async with anyio.create_task_group() as group:

                    async def listen() -> None:
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        group.cancel_scope.cancel()

                    group.start_soon(listen)
                    await body()
                    finished = True
                    group.cancel_scope.cancel()
            finally:
                self._scopes.discard(scope)
        return finished


def _headers(
    content_type: str, extra: dict[str, str], length: int | None = None
) -> list[tuple[bytes, bytes]]:
    headers = {"content-type": content_type, **extra}
    if length is not None:
        headers["content-length"] = str(length)
    return [(k.encode(), v.encode()) for k, v in headers.items()]


class SSEResponse:
    """Sends `frames` as an event stream: headers at once, the first frame after the time to first
    token, each later frame that carries tokens after `tokens / tps`. With `truncate`, sends about
    half of the frames and drops the connection."""

    def __init__(
        self,
        frames: Sequence[Frame],
        pace: Pace,
        lifecycle: Lifecycle,
        *,
        headers: dict[str, str],
        truncate: bool,
    ) -> None:
        self.frames = frames
        self.pace = pace
        self.lifecycle = lifecycle
        self.headers = headers
        self.cut = max(1, len(frames) // 2) if truncate else len(frames)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers("text/event-stream", {"cache-control": "no-cache", **self.headers})
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        finished = await self.lifecycle.guard(receive, lambda: self._send_frames(send))
        if finished and self.cut == len(self.frames):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_frames(self, send: Send) -> None:
        await anyio.sleep(self.pace.ttft_s)
        buffer: list[bytes] = []
        first_token = True
        for frame in self.frames[: self.cut]:
            delay = 0.0 if first_token else self.pace.delay(frame.tokens)
            first_token = first_token and not frame.tokens
            if delay > 0:
                await send({"type": "http.response.body", "body": b"".join(buffer), "more_body": True})
                buffer = []
                await anyio.sleep(delay)
            buffer.append(frame.data)
        await send({"type": "http.response.body", "body": b"".join(buffer), "more_body": True})


class JSONBodyResponse:
    """A JSON body sent after `delay` seconds; with `truncate`, only its first half, then the
    connection is dropped."""

    def __init__(
        self,
        body: Any,
        lifecycle: Lifecycle,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        truncate: bool = False,
    ) -> None:
        self.data = json.dumps(body, separators=(",", ":")).encode()
        self.lifecycle = lifecycle
        self.status = status
        self.headers = headers or {}
        self.delay = delay
        self.truncate = truncate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.delay > 0 and not await self.lifecycle.guard(receive, lambda: anyio.sleep(self.delay)):
            return
        headers = _headers("application/json", self.headers, len(self.data))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        if self.truncate:
            await send(
                {"type": "http.response.body", "body": self.data[: len(self.data) // 2], "more_body": True}
            )
        else:
            await send({"type": "http.response.body", "body": self.data, "more_body": False})


class HangResponse:
    """Never answers: waits for the client to give up. After `limit_s` seconds, or when the server
    shuts down, answers `give_up` (status, body) so that nothing waits forever."""

    def __init__(self, lifecycle: Lifecycle, *, limit_s: float, give_up: tuple[int, Any]) -> None:
        self.lifecycle = lifecycle
        self.limit_s = limit_s
        self.give_up = give_up

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ran_out = await self.lifecycle.guard(receive, lambda: anyio.sleep(self.limit_s))
        if ran_out or self.lifecycle.closing:
            status, body = self.give_up
            await JSONBodyResponse(body, self.lifecycle, status=status)(scope, receive, send)
