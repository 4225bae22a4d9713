"""Running the fake server: `FakeServer` (a context manager that serves from a background thread,
for tests) and `serve` (the foreground server behind `hilbert fake-server`).

Both run uvicorn (h11, one asyncio loop, no thread per request) on a socket bound here with a listen
backlog of 4096, so the port is known before the loop starts and `port=0` picks a free one. Stopping
ends every response in flight (hung requests and slow streams included) before uvicorn's own
shutdown, so a stop takes a few hundred milliseconds whatever the clients are doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from hilbert.errors import UserError
from hilbert.testing.fake_server.app import FakeApp
from hilbert.testing.fake_server.faults import FaultSpec, LatencySpec
from hilbert.testing.fake_server.ratelimit import RateLimiter, RateLimitSpec
from hilbert.testing.fake_server.recording import Recorder
from hilbert.testing.fake_server.responder import Responder
from hilbert.testing.fake_server.responders import make_responder

BACKLOG = 4096
_START_TIMEOUT_S = 10.0


class _QuietOnPurpose(logging.Filter):
    """Drops uvicorn's reports of what the fake server does on purpose: a response cut short (the
    truncate fault), and WebSocket upgrades it declines (Codex tries one first, then falls back)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not (
            message == "ASGI callable returned without completing response."
            or message == "Unsupported upgrade request."
            or message.startswith("No supported WebSocket library detected.")
        )


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling (the caller decides when to stop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they
    # are TCP, and without it every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {err.strerror}", hint="pick another --port, or 0"
        ) from None
    sock.set_inheritable(False)
    return sock


def _rate_limiter(rate_limit: str | RateLimitSpec | RateLimiter | None) -> RateLimiter | None:
    if isinstance(rate_limit, RateLimiter):
        return rate_limit
    spec = rate_limit if isinstance(rate_limit, RateLimitSpec) else RateLimitSpec.parse(rate_limit)
    return RateLimiter(spec) if spec is not None else None


def _build_app(
    responder: Responder | str,
    faults: Any,
    latency: Any,
    seed: int,
    recorder: Recorder,
    rate_limit: str | RateLimitSpec | RateLimiter | None = None,
) -> tuple[FakeApp, str]:
    chosen = make_responder(responder, seed=seed) if isinstance(responder, str) else responder
    fault_spec = faults if isinstance(faults, FaultSpec) else FaultSpec.parse(faults)
    latency_spec = latency if isinstance(latency, LatencySpec) else LatencySpec.parse(latency)
    limiter = _rate_limiter(rate_limit)
    app = FakeApp(
        chosen, faults=fault_spec, latency=latency_spec, seed=seed, recorder=recorder, rate_limits=limiter
    )
    return app, responder if isinstance(responder, str) else getattr(
        responder, "name", type(responder).__name__
    )


async def _run(app: FakeApp, sock: socket.socket, stop: asyncio.Event, on_ready: Callable[[], None]) -> None:
    """Serve `app` on `sock` until `stop` is set."""
    config = uvicorn.Config(
        app.asgi,
        http="h11",
        ws="none",
        lifespan="off",
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        backlog=BACKLOG,
        timeout_graceful_shutdown=5,
    )
    server = _Server(config)
    quiet = _QuietOnPurpose()
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(quiet)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the fake server stopped while starting")
            await asyncio.sleep(0.005)
        on_ready()
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        app.lifecycle.close()
        server.should_exit = True
        await task
    finally:
        uvicorn_log.removeFilter(quiet)
        sock.close()


class FakeServer:
    """The fake model server in a background thread, for tests:

        with FakeServer(ScriptedResponder.from_turns([...])) as server:
            client = openai.OpenAI(base_url=server.openai_base_url, api_key="x")
            ...
            assert server.requests[0]["path"] == "/v1/chat/completions"

    `responder` is a Responder or a spec string (`scripted:file=...`); `faults` and `latency` are spec strings
    (see faults.py); `rate_limit` a spec string (`rpm=60,itpm=100000`, see ratelimit.py) or a `RateLimiter`
    (to give it a clock of the test's own); `record` a JSONL file to append to. Bad specs raise UserError
    here.
    """

    def __init__(
        self,
        responder: Responder | str,
        *,
        faults: str | FaultSpec | None = None,
        latency: str | LatencySpec | None = None,
        rate_limit: str | RateLimitSpec | RateLimiter | None = None,
        seed: int = 0,
        record: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._recorder = Recorder(record, keep=True)
        self.app, self.responder_name = _build_app(
            responder, faults, latency, seed, self._recorder, rate_limit
        )
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The recorded requests so far (a copy), oldest first."""
        return self._recorder.entries

    def start(self) -> FakeServer:
        if self._thread is not None:
            raise RuntimeError("FakeServer already started")
        sock = _listen_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        self._recorder.open()
        self._thread = threading.Thread(
            target=self._serve, args=(sock,), name=f"fake-server:{self.port}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S) or self._failure is not None:
            self.stop()
            raise RuntimeError(f"the fake server did not start: {self._failure!r}")
        return self

    def _serve(self, sock: socket.socket) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await _run(self.app, sock, self._stop, self._ready.set)

        try:
            asyncio.run(main())
        except BaseException as err:  # reported by start(); a thread has nowhere else to raise
            self._failure = err
            self._ready.set()

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)
        self._thread = None
        self._recorder.close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _raise_open_files_limit(wanted: int = 65536) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve(
    *,
    port: int,
    responder: Responder | str,
    latency: str | None = None,
    faults: str | None = None,
    rate_limit: str | None = None,
    seed: int = 0,
    record: str | Path | None = None,
    host: str = "127.0.0.1",
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM. Prints one line once listening."""
    recorder = Recorder(record, keep=False)
    app, responder_name = _build_app(responder, faults, latency, seed, recorder, rate_limit)
    _raise_open_files_limit()
    sock = _listen_socket(host, port)
    bound = sock.getsockname()[1]
    named = (("latency", latency), ("faults", faults), ("rate_limit", rate_limit))
    extras = "".join(f" {k}={v}" for k, v in named if v)

    def ready() -> None:
        print(
            f"fake-server listening on http://{host}:{bound} responder={responder_name}{extras}", flush=True
        )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await _run(app, sock, stop, ready)

    recorder.open()
    try:
        asyncio.run(main())
    finally:
        recorder.close()
        sys.stdout.flush()
