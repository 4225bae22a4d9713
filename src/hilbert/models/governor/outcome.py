"""What one attempt's result or error tells the governor (`Outcome`), read from what the adapters
expose: the status and headers of an SDK error, the usage and headers of a reply.

    429, an error event of type rate_limit_error          throttled   (halve, pause for Retry-After)
    529, 503, overloaded_error                            overloaded  (halve, pause, count a failure)
    other 5xx, 408/409/425, timeouts, broken connections  failed      (count a failure)
    anything final (4xx, a refused key, a bug)            refused     (the request's fault: no lesson)
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from hilbert.models.governor.headers import readings
from hilbert.models.governor.pacing import Outcome
from hilbert.models.retry import Failure
from hilbert.models.types import Usage

_OVERLOADED = {503, 529}


def success(usage: Usage, headers: Mapping[str, str] | None, read_at: float | None) -> Outcome:
    return Outcome(
        "ok",
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        readings=readings(headers),
        read_at=read_at,
    )


def failure(exc: BaseException, failed: Failure | None) -> Outcome:
    """The outcome of an attempt that raised `exc`, which `failures.classify` read as `failed`."""
    if failed is None or not failed.retryable:
        return Outcome("refused")
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    if status == 429 or kind == "rate_limit_error":
        verdict = "throttled"
    elif status in _OVERLOADED or kind == "overloaded_error":
        verdict = "overloaded"
    else:
        verdict = "failed"
    return Outcome(
        verdict,  # type: ignore[arg-type]
        retry_after_s=failed.retry_after_s,
        readings=readings(headers),
        read_at=time.time(),
    )
