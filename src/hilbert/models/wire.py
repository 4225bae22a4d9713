"""What the three wire adapters share: one call = retried attempts, measured, priced.

`WireModel.complete` builds the provider request once (`_request`), runs `_attempt` under the
`Retrier`, and turns the `TurnBuilder` of the attempt that succeeded into a `Completion`. A subclass
only translates: neutral messages to its wire format, and its stream events into the builder.

Measurements: `latency_s` is the whole call as the caller waited for it (retries and waits included);
`time_to_first_token_s` is, within the attempt that succeeded, the time from sending the request to the
first text or tool-call delta. If a stream breaks after some text was passed to `on_text`, the retry
streams its text again from the start: `on_text` may see a partial reply repeated; `Completion.message`
is always the reply of the attempt that succeeded.

Connections: each `complete()` opens its own HTTP client and closes it before returning, so a model
can be used from any event loop and leaves no socket open between calls (a new connection per call
is cheap next to a model's latency; the TLS context is built once per model).

Pacing: with a `Governor` in the settings, each attempt waits for its admission (`Governor.admit`) and
reports what happened — the reply's usage and rate-limit headers, or the error's status, Retry-After
and headers — so one caller's 429 slows every caller of that key and model. The `Retrier` stays the
per-call layer around it: how often, and for how long, one call tries.

Timeouts: `timeout_s` bounds each wait on the network (connecting, the first byte, the gap between two
stream chunks), not the length of a generation; a server that goes quiet that long is retried.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2

from hilbert.models.defaults import DEFAULT_TIMEOUT_S
from hilbert.models.failures import classify
from hilbert.models.governor import bucket_key, outcome
from hilbert.models.names import Endpoint, ModelSpec
from hilbert.models.pricing import PriceTable
from hilbert.models.retry import Retrier
from hilbert.models.types import Completion, Message, StopReason, TextCallback, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from hilbert.models.governor.governor import Governor

CHARS_PER_TOKEN = 4  # the estimate of a request's input tokens before it is sent (its JSON over this)


@dataclass(frozen=True)
class CallSettings:
    """Per-model knobs that are not policy: network timeout, output cap, retries, prices."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_tokens: int | None = None
    retrier: Retrier = field(default_factory=Retrier)
    prices: PriceTable = field(default_factory=PriceTable.default)
    governor: Governor | None = None  # None: calls are not paced (tests, demos)


class TurnBuilder:
    """Collects one streamed reply: text deltas (passed on to `on_text`), tool calls assembled from
    argument fragments (keyed by the wire's index), usage, the stop reason and the served model name."""

    def __init__(self, on_text: TextCallback | None) -> None:
        self.on_text = on_text
        self.started = time.monotonic()
        self.first_token_at: float | None = None
        self.text_parts: list[str] = []
        self.calls: dict[Any, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason: StopReason | None = None
        self.model: str | None = None
        self.headers: Mapping[str, str] | None = None  # the response's, for the governor
        self.headers_at: float | None = None

    def response(self, stream: Any) -> None:
        """Keep the headers of the SDK stream's HTTP response (the rate-limit headers among them)."""
        response = getattr(stream, "response", None)
        if response is not None:
            self.headers, self.headers_at = response.headers, time.time()

    def text(self, delta: str | None) -> None:
        if not delta:
            return
        self._token()
        self.text_parts.append(delta)
        if self.on_text is not None:
            self.on_text(delta)

    def tool_start(self, key: Any, *, call_id: str | None = None, name: str | None = None) -> None:
        call = self.calls.setdefault(key, {"id": None, "name": None, "args": []})
        call["id"] = call_id or call["id"]
        call["name"] = name or call["name"]
        self._token()

    def tool_args(self, key: Any, delta: str | None) -> None:
        self.tool_start(key)
        if delta:
            self.calls[key]["args"].append(delta)

    def tool_args_final(self, key: Any, arguments: str | None) -> None:
        """The complete argument text, when the wire repeats it at the end of a call."""
        if arguments is not None:
            self.tool_start(key)
            self.calls[key]["args"] = [arguments]

    def _token(self) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.monotonic()

    def message(self) -> Message:
        calls = []
        for position, call in enumerate(self.calls.values()):
            arguments, raw = parse_arguments("".join(call["args"]))
            call_id = call["id"] or f"call_{position}"
            calls.append(
                ToolCall(id=call_id, name=call["name"] or "", arguments=arguments, raw_arguments=raw)
            )
        return Message(role="assistant", content="".join(self.text_parts), tool_calls=tuple(calls))


def governor_key(model: WireModel) -> str:
    """The governor's bucket of `model`: its key's fingerprint (with the base URL) and its name."""
    return bucket_key(model.endpoint.api_key, model.endpoint.base_url, model.spec.label)


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool arguments as a dict; when `text` is not a JSON object, `({}, text)` keeps it for the loop."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    return (value, None) if isinstance(value, dict) else ({}, text)


class WireModel(ABC):
    """Base of the adapters: retries, measurement and cost around one provider's `_attempt`."""

    def __init__(self, spec: ModelSpec, endpoint: Endpoint, settings: CallSettings | None = None) -> None:
        self.spec = spec
        self.name = spec.label
        self.endpoint = endpoint
        self.settings = settings or CallSettings()
        self._ssl: ssl.SSLContext | None = None

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> Completion:
        request = self._request(list(messages), list(tools))
        started = time.monotonic()
        async with httpx2.AsyncClient(verify=self._ssl_context(), follow_redirects=True) as http:
            sdk = self._sdk(http)
            turn, attempts = await self.settings.retrier.run(
                lambda: self._governed(sdk, request, on_text),
                functools.partial(classify, model=self.name, key_var=self.endpoint.key_var),
                model=self.name,
            )
        message = turn.message()
        stop = turn.stop_reason or "other"
        if message.tool_calls and stop == "end_turn":
            stop = "tool_use"
        first = turn.first_token_at
        return Completion(
            message=message,
            usage=turn.usage,
            stop_reason=stop,
            model=turn.model or self.spec.name,
            cost_usd=self.settings.prices.cost(self.spec, turn.usage),
            latency_s=time.monotonic() - started,
            time_to_first_token_s=None if first is None else first - turn.started,
            attempts=attempts,
            priced=self.settings.prices.known(self.spec),
        )

    async def _governed(self, sdk: Any, request: dict[str, Any], on_text: TextCallback | None) -> TurnBuilder:
        """One attempt, admitted by the governor (when there is one) and reported to it."""
        governor = self.settings.governor
        if governor is None:
            return await self._attempt(sdk, request, on_text)
        key = governor_key(self)
        estimate = len(json.dumps(request, default=str)) // CHARS_PER_TOKEN
        async with governor.admit(key, estimate) as slot:
            try:
                turn = await self._attempt(sdk, request, on_text)
            except Exception as exc:
                failed = classify(exc, model=self.name, key_var=self.endpoint.key_var)
                slot.report(outcome.failure(exc, failed))
                raise
            slot.report(outcome.success(turn.usage, turn.headers, turn.headers_at))
            return turn

    async def probe(self, timeout_s: float = 15.0) -> str | None:
        """Whether the model's server answers, before a run depends on it: one `GET /models` (no
        tokens spent), no retries. None when it answers — any HTTP status but a refused key counts (a
        server without that list still answered) —, else why not, in one line."""
        async with httpx2.AsyncClient(verify=self._ssl_context(), follow_redirects=True) as http:
            try:
                await asyncio.wait_for(self._sdk(http).models.list(), timeout_s)
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                failure = classify(exc, model=self.name, key_var=self.endpoint.key_var)
                if status in (401, 403) or (status is None and failure is not None and failure.retryable):
                    return failure.summary if failure else f"HTTP {status}"  # refused key, or no answer
                return None  # it answered: another status, or a body the SDK could not read
        return None

    def _ssl_context(self) -> ssl.SSLContext:
        # Building one costs ~20 ms, so it is made once per model; connections are not kept.
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context()
        return self._ssl

    @abstractmethod
    def _sdk(self, http: httpx2.AsyncClient) -> Any:
        """The provider's SDK client over `http`, with our endpoint and timeout and no SDK retries."""

    @abstractmethod
    def _request(self, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        """The provider's request keyword arguments (without `stream`)."""

    @abstractmethod
    async def _attempt(self, sdk: Any, request: dict[str, Any], on_text: TextCallback | None) -> TurnBuilder:
        """Send `request` once, streaming; raise `StreamDropped` if the stream ends unfinished."""
