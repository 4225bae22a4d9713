"""Turn what went wrong on the wire into a retry decision and, if final, a hilbert error.

`classify(exc, ...)` reads an exception raised while calling a provider — an `openai` or `anthropic`
SDK error, an `httpx2` transport error, a timeout, or what the adapters raise themselves
(`StreamDropped`, `ProviderStreamError` for an error event inside a stream) — and returns a
`Failure`: whether trying again may help, how long the server asked us to wait (`Retry-After`), a
one-line summary, and the error to raise if we stop here:

    401 / 403                         RefusedError          (hint: check the key variable)
    404, model_not_found              UnknownModelError "unknown model X"
    context-length wording (400/413)  ContextOverflowError  (hint: compact or pick a larger model)
    other 4xx, quota exhausted        RefusedError
    408 / 409 / 429 / 5xx / 529       retryable
    timeouts, connection errors,      retryable
    streams that end early

Exceptions that are none of these (bugs in our own code) are not classified: they propagate.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any

import anthropic
import httpx2
import openai

from hilbert.errors import (
    ContextOverflowError,
    HilbertError,
    ModelError,
    RefusedError,
    UnknownModelError,
)
from hilbert.models.retry import Failure


class StreamDropped(Exception):
    """A response stream ended before the event that completes it (raised by the adapters)."""


class ProviderStreamError(Exception):
    """An error the provider reported inside a streamed response; `body` is its error object."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(str(body.get("message") or body))
        self.body = body


_KNOWN: tuple[type[BaseException], ...] = (
    openai.OpenAIError,
    anthropic.AnthropicError,
    httpx2.HTTPError,
    httpx2.StreamError,
    StreamDropped,
    ProviderStreamError,
    TimeoutError,
    json.JSONDecodeError,
)
"""Exceptions `classify` understands; anything else is a bug and is left to propagate."""

_RETRYABLE_STATUS = {408, 409, 425, 429, 529}
_OVERFLOW_WORDING = re.compile(
    r"context[_ ]length|context window|prompt is too long|maximum context|too many tokens"
    r"|input is too long|exceeds the (model's )?(maximum|context)|reduce the length",
    re.IGNORECASE,
)
_QUOTA_WORDING = re.compile(r"insufficient_quota|exceeded your current quota|billing", re.IGNORECASE)
_OVERFLOW_HINT = "compact the conversation or pick a model with a larger context window"


def classify(exc: BaseException, *, model: str, key_var: str) -> Failure | None:
    """Decide what `exc`, raised by one attempt to call `model`, means (see the module docstring);
    None for an exception that is not about the wire (a bug), which the caller lets propagate."""
    if not isinstance(exc, _KNOWN):
        return None
    if isinstance(exc, StreamDropped):
        return _retry(f"stream ended early ({_one_line(str(exc))})", model)
    if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError | httpx2.TimeoutException):
        return _retry("timed out waiting for the server", model)
    if isinstance(exc, TimeoutError):
        return _retry("timed out waiting for the server", model)
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {_one_line(str(cause))}" if cause and str(cause) else ""
        return _retry(f"connection error{detail}", model)
    if isinstance(exc, httpx2.TransportError | httpx2.StreamError):
        return _retry(f"connection error: {type(exc).__name__} {_one_line(str(exc))}".rstrip(), model)
    if isinstance(exc, json.JSONDecodeError):
        return _retry("malformed event in the response stream", model)
    if isinstance(exc, ProviderStreamError):
        return _from_status(None, exc.body, str(exc), None, model=model, key_var=key_var)
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APIError | anthropic.APIError):
        body = getattr(exc, "body", None)
        headers = exc.response.headers if hasattr(exc, "response") else None
        return _from_status(status, body, str(exc), headers, model=model, key_var=key_var)
    message = f"{model}: unexpected {type(exc).__name__}: {_one_line(str(exc))}"
    return Failure(retryable=False, summary=message, error=ModelError(message))


def _from_status(
    status: int | None, body: Any, text: str, headers: Any, *, model: str, key_var: str
) -> Failure:
    code, kind, detail = _error_fields(body, text)
    words = f"{code} {kind} {detail}"
    where = f"HTTP {status}" if status else "error in stream"
    summary = f"{where}: {detail}" if detail else where
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        what = "rejected the API key" if status != 403 else "refused access"
        return _final(
            RefusedError(f"{model}: the provider {what} ({summary})", hint=f"check {key_var}"), summary
        )
    if status == 404 or kind == "not_found_error" or code == "model_not_found":
        return _final(
            UnknownModelError(
                f"unknown model {model} ({summary})",
                hint="check the name after 'provider:' and, for a local server, the @URL (often ends in /v1)",
            ),
            summary,
        )
    if status in (400, 413, 422, None, 200) and _OVERFLOW_WORDING.search(words):
        return _final(
            ContextOverflowError(f"{model}: the conversation does not fit ({summary})", hint=_OVERFLOW_HINT),
            summary,
        )
    if status == 413 or kind == "request_too_large":
        return _final(
            ContextOverflowError(f"{model}: the request is too large ({summary})", hint=_OVERFLOW_HINT),
            summary,
        )
    if status == 429 and _QUOTA_WORDING.search(words):
        return _final(
            RefusedError(
                f"{model}: quota exhausted ({summary})", hint="check the account's billing and limits"
            ),
            summary,
        )
    if status in (None, 200):  # an error event inside a streamed response
        retryable = kind != "invalid_request_error"
    else:
        retryable = status in _RETRYABLE_STATUS or status >= 500
    if retryable:
        return Failure(
            retryable=True,
            summary=summary,
            error=ModelError(f"{model}: {summary}"),
            retry_after_s=retry_after_seconds(headers) if status == 429 or (status or 0) >= 500 else None,
        )
    return _final(
        RefusedError(
            f"{model}: request refused ({summary})", hint="the request was malformed or not allowed"
        ),
        summary,
    )


def retry_after_seconds(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait: `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_fields(body: Any, text: str) -> tuple[str, str, str]:
    """(code, type, message) from an OpenAI- or Anthropic-shaped error body, else from the text."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "")
        kind = str(error.get("type") or "")
        message = error.get("message") or ""
        return code, kind, _one_line(str(message) or code or kind or text)
    if isinstance(error, str):
        return "", "", _one_line(error)
    if isinstance(body, str) and body.strip():
        return "", "", _one_line(body)
    return "", "", _one_line(text)


def _one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _retry(summary: str, model: str) -> Failure:
    return Failure(retryable=True, summary=summary, error=ModelError(f"{model}: {summary}"))


def _final(error: HilbertError, summary: str) -> Failure:
    return Failure(retryable=False, summary=summary, error=error)
