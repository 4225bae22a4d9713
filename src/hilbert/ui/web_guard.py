"""Who may talk to `hilbert web`: one ASGI middleware in front of every endpoint (the page, its assets,
the data, the event stream, the actions), around a pure check (`Guard.refusal`).

In order: the `Host` must be this server's own (`127.0.0.1:P`, `localhost:P`, or the `--host` given with
`:P`) — a page on another site that rebinds its name to 127.0.0.1 sends its own name, and is refused 403;
then the token, from `?token=` (the first request: it is answered with a redirect to the same path
without the token, which sets the cookie) or from the cookie `hilbert_web_P` (`HttpOnly`,
`SameSite=Strict`), compared with `secrets.compare_digest` — without it 401; then an action (any method
but GET and HEAD) must carry an `Origin` that is the server's own, else 403. Every answer carries a
Content-Security-Policy that lets the page run only the server's own script.

What must not live here: the endpoints themselves (`hilbert.ui.web`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

READS = ("GET", "HEAD")
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True)
class Refusal:
    status: int
    why: str


@dataclass(frozen=True)
class Guard:
    """The checks of one server: its token, its port and the host it was bound to."""

    token: str
    port: int
    host: str = "127.0.0.1"

    @property
    def cookie(self) -> str:
        return f"hilbert_web_{self.port}"  # a host's cookies are shared between its ports

    def hosts(self) -> set[str]:
        host = self.host.lower()  # as browsers send it
        names = {"127.0.0.1", "localhost", host if ":" not in host else f"[{host}]"}
        return {f"{name}:{self.port}" for name in names}

    def refusal(
        self, method: str, host: str, origin: str | None, query_token: str | None, cookie_token: str | None
    ) -> Refusal | None:
        """None when the request may go on; else the status and one line that says why not."""
        if host.lower() not in self.hosts():
            return Refusal(403, f"refused: Host {host!r} is not this server's")
        if not (self._matches(query_token) or self._matches(cookie_token)):
            return Refusal(401, "refused: no valid token (open the URL hilbert web printed)")
        if method not in READS and origin != f"http://{host.lower()}":
            return Refusal(403, f"refused: an action from Origin {origin!r}, not this server's page")
        return None

    def _matches(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())


class GuardMiddleware:
    """Refuses what `guard` refuses; answers a first request's `?token=` with the cookie and a redirect
    to the same path without it; adds the security headers to every answer."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        query_token = next((value for name, value in query if name == "token"), None)
        # split on ";" as browsers send them: `SimpleCookie` stops at the first value it finds malformed
        # (JSON, a space, a quote: common in other local apps' cookies, which share the host), losing ours
        cookie_token = cookie_parser(headers.get("cookie", "")).get(self.guard.cookie)
        refused = self.guard.refusal(
            scope["method"], headers.get("host", ""), headers.get("origin"), query_token, cookie_token
        )
        if refused is not None:
            await _answer(send, refused.status, refused.why.encode(), [])
            return
        if query_token is not None and scope["method"] in READS:
            rest = urlencode([(name, value) for name, value in query if name != "token"])
            # the path is the client's: `//host/…` as a Location is another site; a raw CR/LF splits headers
            location = "/" + quote(scope["path"].lstrip("/"), safe="/") + (f"?{rest}" if rest else "")
            cookie = f"{self.guard.cookie}={self.guard.token}; HttpOnly; SameSite=Strict; Path=/"
            moved = [(b"location", location.encode()), (b"set-cookie", cookie.encode())]
            await _answer(send, 303, b"", moved)
            return

        async def secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, secured)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    plain = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": [*plain, *headers, *SECURITY_HEADERS]}
    )
    await send({"type": "http.response.body", "body": body})
