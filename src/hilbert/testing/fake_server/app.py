"""The fake server's ASGI application: routing, and the life of one completion request.

A completion request is read, parsed by its wire module into a `Conversation`, admitted or refused by
the rate limits (if any: `ratelimit.py`, whose headers go on every response from then on), given at
most one fault, answered by the responder, measured (tokens, simulated prompt cache), recorded, and
rendered on the same protocol, streamed or not, paced by the latency spec. Routes accept both
`/v1/...` and the bare path (some clients drop the `/v1`); query strings such as `?beta=true` are
ignored.

    POST /v1/messages              Anthropic Messages
    POST /v1/messages/count_tokens Anthropic token count
    POST /v1/chat/completions      OpenAI Chat Completions
    POST /v1/responses             OpenAI Responses
    GET  /v1/models[/{id}]         model list (Anthropic's shape when `anthropic-version` is sent)
    GET  /, /health                liveness
    GET  /metrics                  a self-hosted engine's Prometheus gauge of its KV-cache usage
                                   (vLLM's `vllm:kv_cache_usage_perc`): `kv_cache_usage`, set by a test

This module holds the server's state for one run (responder, RNGs, cache, recorder, lifecycle); it is
created per server, never at import.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from types import ModuleType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

import hilbert.testing.fake_server.anthropic_wire as anthropic_wire
import hilbert.testing.fake_server.openai_chat_wire as openai_chat_wire
import hilbert.testing.fake_server.openai_responses_wire as openai_responses_wire
from hilbert.testing.fake_server.faults import FaultSpec, LatencySpec, corrupt_arguments
from hilbert.testing.fake_server.ratelimit import RateLimiter, api_key
from hilbert.testing.fake_server.recording import Recorder, reply_json, selected_headers, usage_json
from hilbert.testing.fake_server.responder import Responder
from hilbert.testing.fake_server.streaming import HangResponse, JSONBodyResponse, Lifecycle, SSEResponse
from hilbert.testing.fake_server.usage import PromptCache, measure, prompt_tokens
from hilbert.testing.fake_server.wire import BadRequest, Ids, check_tool_results

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "fake-model"
_FAULT_MESSAGES: dict[int | str, str] = {
    429: "Rate limit exceeded (fake server fault 429); retry after the Retry-After delay.",
    500: "Internal server error (fake server fault 500).",
    529: "Overloaded (fake server fault 529).",
    401: "Incorrect API key provided (fake server fault 401).",
    404: "The model does not exist or you do not have access to it (fake server fault 404).",
    400: "prompt is too long: the input exceeds the maximum context length (fake server fault overflow).",
    "refused": "Your request was rejected by the safety system (fake server fault refused).",
}
_RATE_LIMITED = (
    "Rate limit exceeded: {which} per minute for this API key and model (fake server --rate-limit);"
    " retry after the Retry-After delay."
)


class FakeApp:
    """One fake server's state and its Starlette app (`.asgi`)."""

    def __init__(
        self,
        responder: Responder,
        *,
        faults: FaultSpec,
        latency: LatencySpec,
        seed: int,
        recorder: Recorder,
        cache: PromptCache | None = None,
        rate_limits: RateLimiter | None = None,
    ) -> None:
        self.responder = responder
        self.faults = faults
        self.latency = latency
        self.recorder = recorder
        self.cache = cache or PromptCache()
        self.rate_limits = rate_limits
        self.lifecycle = Lifecycle()
        self.models_seen: set[str] = set()
        self.kv_cache_usage = 0.0  # what /metrics reports, as a vLLM engine would (0 to 1)
        self._fault_rng = random.Random(f"faults:{seed}")
        self._latency_rng = random.Random(f"latency:{seed}")
        self.asgi: ASGIApp = Starlette(routes=self._routes())

    def _routes(self) -> list[Route]:
        routes = []
        for prefix in ("/v1", ""):
            routes += [
                Route(f"{prefix}/messages/count_tokens", self.count_tokens, methods=["POST"]),
                Route(f"{prefix}/messages", self._completion(anthropic_wire), methods=["POST"]),
                Route(f"{prefix}/chat/completions", self._completion(openai_chat_wire), methods=["POST"]),
                Route(f"{prefix}/responses", self._completion(openai_responses_wire), methods=["POST"]),
                Route(f"{prefix}/models", self.models, methods=["GET"]),
                Route(f"{prefix}/models/{{model_id:path}}", self.model, methods=["GET"]),
            ]
        routes += [
            Route("/", self.health, methods=["GET", "HEAD"]),
            Route("/health", self.health, methods=["GET", "HEAD"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/{path:path}", self.not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        ]
        return routes

    # -- recording ---------------------------------------------------------------------------

    def _entry(self, request: Request, protocol: str | None, body: Any) -> dict[str, Any]:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return {
            "time": time.time(),
            "method": request.method,
            "path": path,
            "protocol": protocol,
            "headers": selected_headers(request.headers),
            "body": body,
            "status": None,
            "stream": None,
            "fault": None,
            "reply": None,
            "usage": None,
        }

    def _record(self, entry: dict[str, Any], status: int | None) -> None:
        entry["status"] = status
        self.recorder.add(entry)

    @staticmethod
    async def _read_json(request: Request) -> tuple[Any, str | None]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace"), "the request body is not valid JSON"
        if not isinstance(body, dict):
            return body, "the request body must be a JSON object"
        return body, None

    def _error(
        self,
        entry: dict[str, Any],
        wire: ModuleType,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> Response:
        self._record(entry, status)
        return JSONResponse(wire.error_body(status, message), status_code=status, headers=headers)

    # -- completions ---------------------------------------------------------------------------

    def _completion(self, wire: ModuleType) -> Any:
        async def endpoint(request: Request) -> Any:
            try:
                return await self.complete(request, wire)
            except ClientDisconnect:  # the client went away mid-request (it was killed): nobody to answer
                return Response(status_code=499)

        return endpoint

    async def complete(self, request: Request, wire: ModuleType) -> Any:
        body, problem = await self._read_json(request)
        entry = self._entry(request, wire.PROTOCOL, body)
        if problem is not None:
            return self._error(entry, wire, 400, problem)
        try:
            parsed = wire.parse(body)
            check_tool_results(parsed.conversation)
        except BadRequest as err:
            return self._error(entry, wire, 400, str(err))
        conversation = parsed.conversation
        self.models_seen.add(conversation.model)
        entry["stream"] = parsed.stream
        who = (api_key(request.headers), conversation.model)
        limits = self.rate_limits
        if limits is not None:
            refusal = limits.admit(who, len(prompt_tokens(conversation)))
            if refusal is not None:
                entry["fault"] = "rate_limit"
                headers = limits.headers(who, wire.PROTOCOL, retry_after_s=refusal.wait_s)
                message = _RATE_LIMITED.format(which=" and ".join(refusal.limits).replace("-", " "))
                return self._error(entry, wire, 429, message, headers)
        fault = entry["fault"] = self.faults.draw(self._fault_rng)
        if fault in ("429", "500", "529", "401", "404", "overflow", "refused"):
            status = 400 if fault in ("overflow", "refused") else int(fault)
            headers = limits.headers(who, wire.PROTOCOL) if limits is not None else {}
            if status == 429:
                delay = self.faults.retry_after_s
                headers |= {"retry-after": str(math.ceil(delay)), "retry-after-ms": str(round(delay * 1000))}
            message = _FAULT_MESSAGES["refused" if fault == "refused" else status]
            return self._error(entry, wire, status, message, headers)
        if fault == "hang":
            self._record(entry, None)
            give_up = wire.error_body(
                504, f"the fake server gave up on a hung request after {self.faults.hang_s:g} s"
            )
            return HangResponse(self.lifecycle, limit_s=self.faults.hang_s, give_up=(504, give_up))
        try:
            reply = self.responder.reply(conversation)
        except Exception as err:  # a responder bug: the client gets a 500 naming it, the log the traceback
            logger.exception(
                "fake-server responder %s failed", getattr(self.responder, "name", self.responder)
            )
            return self._error(entry, wire, 500, f"responder failed: {type(err).__name__}: {err}")
        usage = measure(self.cache, conversation, reply)
        if limits is not None:
            limits.settle(who, usage.output_tokens)
        entry["reply"], entry["usage"] = reply_json(reply), usage_json(usage)
        sent = corrupt_arguments(reply) if fault == "badjson" else reply
        pace = self.latency.draw(self._latency_rng)
        ids = Ids.new(wire.ID_PREFIX)
        headers = {"request-id": "req_" + ids.token, "x-request-id": "req_" + ids.token}
        if limits is not None:
            headers |= limits.headers(who, wire.PROTOCOL)
        self._record(entry, 200)
        truncate = fault == "truncate"
        if parsed.stream:
            frames = wire.render_stream(parsed, sent, usage, ids, pace.chunk_tokens)
            return SSEResponse(frames, pace, self.lifecycle, headers=headers, truncate=truncate)
        delay = pace.ttft_s + pace.delay(usage.output_tokens)
        rendered = wire.render(parsed, sent, usage, ids)
        return JSONBodyResponse(rendered, self.lifecycle, headers=headers, delay=delay, truncate=truncate)

    # -- the rest ------------------------------------------------------------------------------

    async def count_tokens(self, request: Request) -> Response:
        body, problem = await self._read_json(request)
        entry = self._entry(request, anthropic_wire.PROTOCOL, body)
        if problem is None:
            try:
                conversation = anthropic_wire.parse(body).conversation
            except BadRequest as err:
                problem = str(err)
        if problem is not None:
            return self._error(entry, anthropic_wire, 400, problem)
        self._record(entry, 200)
        return JSONResponse({"input_tokens": len(prompt_tokens(conversation))})

    def _model_names(self) -> list[str]:
        return sorted(self.models_seen | {DEFAULT_MODEL})

    @staticmethod
    def _model_json(name: str, anthropic: bool) -> dict[str, Any]:
        if anthropic:
            return {"type": "model", "id": name, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}
        return {"id": name, "object": "model", "created": 0, "owned_by": "hilbert-fake-server"}

    async def models(self, request: Request) -> Response:
        self._record(self._entry(request, None, None), 200)
        anthropic = "anthropic-version" in request.headers
        data = [self._model_json(name, anthropic) for name in self._model_names()]
        if anthropic:
            page = {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
            return JSONResponse(page)
        return JSONResponse({"object": "list", "data": data})

    async def model(self, request: Request) -> Response:
        self._record(self._entry(request, None, None), 200)
        return JSONResponse(
            self._model_json(request.path_params["model_id"], "anthropic-version" in request.headers)
        )

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def metrics(self, request: Request) -> Response:
        text = (
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="{DEFAULT_MODEL}"}} {self.kv_cache_usage}\n'
        )
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def not_found(self, request: Request) -> Response:
        entry = self._entry(request, None, None)
        message = f"the fake server has no endpoint {request.method} {request.url.path}"
        return self._error(entry, openai_chat_wire, 404, message)
