"""The providers' rate-limit response headers, read into the governor's buckets.

Names checked 2026-12-03 in the providers' documentation (as the fake server's `ratelimit.py` does):

- OpenAI, https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers ("Rate limits in
  headers"): `x-ratelimit-limit-requests`, `x-ratelimit-remaining-requests`,
  `x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens` (and `x-ratelimit-reset-*`, a duration,
  not needed here: a bucket refills at LIMIT/60 a second). OpenAI has one token limit, input and
  output together: it becomes the `tpm` bucket.
- Anthropic, https://docs.anthropic.com/en/api/rate-limits (response headers table):
  `anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining,reset}`.
  `input-tokens` and `output-tokens` are separate limits (`itpm`, `otpm`); `tokens` is their sum
  (the most restrictive limit currently in effect) and is used only when neither of them is sent.

Every limit here is per minute, as both providers' per-minute limits are. A header that is missing or
not a whole number is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

_OPENAI = {"requests": "rpm", "tokens": "tpm"}
_ANTHROPIC = {"requests": "rpm", "input-tokens": "itpm", "output-tokens": "otpm", "tokens": "tpm"}


def readings(headers: Mapping[str, str] | None) -> dict[str, tuple[int, int]]:
    """The limits a response's headers state: bucket name -> (limit, remaining)."""
    if not headers:
        return {}
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    found: dict[str, tuple[int, int]] = {}
    for suffix, bucket in _OPENAI.items():
        pair = _pair(lower, f"x-ratelimit-limit-{suffix}", f"x-ratelimit-remaining-{suffix}")
        if pair is not None:
            found[bucket] = pair
    for suffix, bucket in _ANTHROPIC.items():
        prefix = f"anthropic-ratelimit-{suffix}"
        pair = _pair(lower, f"{prefix}-limit", f"{prefix}-remaining")
        if pair is not None:
            found[bucket] = pair
    if "tpm" in found and ("itpm" in found or "otpm" in found):
        del found["tpm"]  # Anthropic's sum of the two: the two themselves are the limits
    return found


def _pair(headers: Mapping[str, str], limit: str, remaining: str) -> tuple[int, int] | None:
    try:
        total, left = int(headers[limit]), int(headers[remaining])
    except (KeyError, ValueError):
        return None
    return (total, max(0, left)) if total > 0 else None
