"""`hilbert web`: a local dashboard over one run, running or finished, live over server-sent events
(docs/design/views.md, "The dashboard").

The server keeps one `RunLog` (`Hub`): every `poll_s` it catches up with the events committed since (by
any process) and, when there were any or the ages shown went stale, shapes the page's data
(`hilbert.ui.web_view.page_data`) and wakes every open event stream, which sends it. Actions call the
functions the commands of the same name call (`hilbert.ui.fleet_actions`). Every endpoint sits behind
`hilbert.ui.web_guard` (Host, token, Origin). What must not live here: shaping the data (`web_view`),
the checks (`web_guard`), a fold of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hilbert.climb.state import ClimbFold, is_climb
from hilbert.errors import HilbertError, UserError
from hilbert.fleet.proposals import proposals
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.ui.fleet_actions import approve_proposal, send_message, stop_agents
from hilbert.ui.log_view import format_event
from hilbert.ui.top_view import governor_lines
from hilbert.ui.web_guard import Guard, GuardMiddleware
from hilbert.ui.web_view import page_data
from hilbert.views import RunLog
from hilbert.views.governor import for_run

ASSETS = {  # name -> media type; the files live in hilbert/ui/web_assets/
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
STALE_S = 5.0  # the ages on the page ("12s ago") are refreshed this often even when nothing happened
TRANSCRIPT_LINES = 2000  # events of one agent sent per request; the page asks again after the last


class Hub:
    """The server's one `RunLog` and the last page data shaped from it, with a version that grows by
    one whenever that data changes."""

    def __init__(
        self,
        store: EventStore,
        run: str,
        clock: Callable[[], float] = time.time,
        settings: Settings | None = None,
    ) -> None:
        self.store, self.run, self.clock, self.settings = store, run, clock, settings
        self.log = RunLog(run)
        self.climb: ClimbFold | None = None  # a climb's own fold, once its log says it is one
        self.version, self.data = 0, ""
        self.shaped_at = -STALE_S
        self.closed = False
        self.changed = asyncio.Condition()

    async def refresh(self) -> None:
        before = self.log.state.last_id
        self.log.catch_up(self.store)
        now = self.clock()
        if self.version and self.log.state.last_id == before and now - self.shaped_at < STALE_S:
            return
        governor = (
            governor_lines(for_run(self.log.state, self.settings, now), now)
            if self.settings is not None
            else []
        )
        if self.climb is None and is_climb(self.store, self.run):
            self.climb = ClimbFold(self.store, self.run)
        climb = self.climb.catch_up() if self.climb is not None else None
        data = json.dumps(page_data(self.log, proposals(self.store, self.run), now, governor, climb))
        self.shaped_at = now
        if data != self.data:
            async with self.changed:
                self.version, self.data = self.version + 1, data
                self.changed.notify_all()

    async def follow(self, poll_s: float) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(poll_s)

    async def close(self) -> None:
        """Ends every open event stream: the server is stopping, and a stream never ends by itself."""
        async with self.changed:
            self.closed = True
            self.changed.notify_all()

    async def stream(self) -> AsyncIterator[str]:
        """The page data now, then again each time it changes: one SSE `view` event each, until `close`."""
        seen = 0

        def moved() -> bool:
            return self.version != seen or self.closed

        while True:
            async with self.changed:
                await self.changed.wait_for(moved)
                if self.closed:
                    return
                seen, data = self.version, self.data
            yield f"id: {seen}\nevent: view\ndata: {data}\n\n"


def make_app(
    store: EventStore, run: str, guard: Guard, *, poll_s: float = 0.5, settings: Settings | None = None
) -> Starlette:
    """The dashboard of `run` in `store`, behind `guard`; with `settings`, it shows the machine's
    rate-limit governor for the run's models (the file they name)."""
    hub = Hub(store, run, settings=settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await hub.refresh()
        follower = asyncio.create_task(hub.follow(poll_s))
        try:
            yield
        finally:
            follower.cancel()

    async def page(request: Request) -> Response:
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response(f"no asset {name}", status_code=404, media_type="text/plain")
        return Response(_asset(name), media_type=ASSETS[name])

    async def view(request: Request) -> Response:
        await hub.refresh()
        return Response(hub.data, media_type="application/json")

    async def events(request: Request) -> Response:
        headers = {"x-accel-buffering": "no"}
        return StreamingResponse(hub.stream(), media_type="text/event-stream", headers=headers)

    async def transcript(request: Request) -> Response:
        agent, after_text = request.query_params.get("agent", ""), request.query_params.get("after", "0")
        after = int(after_text) if after_text.isascii() and after_text.isdigit() else -1
        if not 0 <= after < 2**63:  # SQLite's integers
            return JSONResponse({"error": "after: an event id (a whole number)"}, status_code=400)
        batch = store.events(run=run, agent=agent, after_id=after, limit=TRANSCRIPT_LINES)
        lines = [[event.id, format_event(event, store)] for event in batch]
        return JSONResponse({"agent": agent, "lines": lines, "last": batch[-1].id if batch else after})

    async def act(request: Request, action: Callable[[dict[str, Any]], str]) -> Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise UserError("the action's body is not a JSON object")
            said = action(body)
        except (HilbertError, ValueError) as error:
            return JSONResponse({"error": store.redactor.redact(str(error))}, status_code=400)
        await hub.refresh()
        return JSONResponse({"said": said})

    async def send(request: Request) -> Response:
        return await act(request, lambda b: send_message(store, run, _text(b, "agent"), _text(b, "text")))

    async def stop(request: Request) -> Response:
        # only a null (or absent) agent means the whole run: "" or [] is a bad request, not "everyone"
        return await act(
            request, lambda b: stop_agents(store, run, None if b.get("agent") is None else _text(b, "agent"))
        )

    async def approve(request: Request) -> Response:
        return await act(request, lambda b: approve_proposal(store, run, _text(b, "proposal")))

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/assets/{name}", asset, methods=["GET"]),
        Route("/api/view", view, methods=["GET"]),
        Route("/api/events", events, methods=["GET"]),
        Route("/api/transcript", transcript, methods=["GET"]),
        Route("/api/send", send, methods=["POST"]),
        Route("/api/stop", stop, methods=["POST"]),
        Route("/api/approve", approve, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(GuardMiddleware, guard=guard)
    app.state.hub = hub
    return app


def _text(body: dict[str, Any], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"the action needs {field}: a non-empty string")
    return value


def _asset(name: str) -> bytes:
    return resources.files("hilbert.ui").joinpath("web_assets", name).read_bytes()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound and listening now: the URL printed names the port it really has, and
    a browser that opens it at once waits in the queue until the server answers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port} ({error.strerror})", hint="pick another --port (0: any free)"
        ) from None
    return sock


def serve(
    store: EventStore,
    run: str,
    host: str,
    port: int,
    say: Callable[[str], None],
    settings: Settings | None = None,
) -> None:
    """Serve the dashboard of `run` until Ctrl-C; `say` gets the one URL to open."""
    sock = bind(host, port)
    port = sock.getsockname()[1]
    guard = Guard(secrets.token_urlsafe(32), port, host)
    shown = f"[{host}]" if ":" in host else host
    say(f"hilbert web: run {run} at http://{shown}:{port}/?token={guard.token}  (Ctrl-C stops)")
    app = make_app(store, run, guard, settings=settings)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,  # the first request's line would hold the token
        timeout_graceful_shutdown=1,  # a request still running then is cut
    )
    asyncio.run(_Server(config, app.state.hub).serve(sockets=[sock]))


class _Server(uvicorn.Server):
    """uvicorn's server, which on Ctrl-C first ends the open event streams: it waits for running requests
    to end, and would cut a stream (which never ends by itself) after its timeout with a traceback."""

    def __init__(self, config: uvicorn.Config, hub: Hub) -> None:
        super().__init__(config)
        self.hub = hub

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.hub.close()
        await super().shutdown(sockets)
