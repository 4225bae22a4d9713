"""The model wire: neutral types, the `Model` seam, and `make_model` to get one by name.

    model = make_model("anthropic:claude-sonnet-4-5")          # key from ANTHROPIC_API_KEY
    model = make_model("openai:qwen3@http://127.0.0.1:8000/v1")  # any OpenAI-compatible server
    completion = await model.complete(messages, tools, on_text=print)

Layout: `types` (neutral data, the seam) · `defaults` (timeout, output cap) · `names` (parsing
`provider:name[@url]`, keys and URLs) · `pricing` (price table, cost) · `failures` (what an error
means) · `retry` (backoff) · `governor` (pacing every call on the machine, per key and model) ·
`wire` (what the adapters share) · one adapter per protocol: `anthropic_messages`, `openai_chat`,
`openai_responses`. Adapters translate and measure; they decide nothing about the conversation, and
import the modules they need, never this package.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hilbert.models.defaults import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_S
from hilbert.models.names import Endpoint, ModelSpec, parse_model_name, resolve_endpoint
from hilbert.models.pricing import Price, PriceTable
from hilbert.models.retry import Retrier, RetryPolicy
from hilbert.models.types import (
    Completion,
    Message,
    Model,
    StopReason,
    TextCallback,
    ToolCall,
    ToolSpec,
    Usage,
)

if TYPE_CHECKING:
    from hilbert.models.anthropic_messages import AnthropicMessagesModel
    from hilbert.models.governor import Governor
    from hilbert.models.openai_chat import OpenAIChatModel
    from hilbert.models.openai_responses import OpenAIResponsesModel
    from hilbert.models.wire import CallSettings, WireModel

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT_S",
    "AnthropicMessagesModel",
    "CallSettings",
    "Completion",
    "Endpoint",
    "Message",
    "Model",
    "ModelSpec",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "Price",
    "PriceTable",
    "Retrier",
    "RetryPolicy",
    "StopReason",
    "TextCallback",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "make_model",
    "parse_model_name",
    "resolve_endpoint",
]

# The SDKs take ~1.5 s to import; code that only needs the types (the store, the fake server, the
# CLI's --help) must not pay for them, so the adapters are imported on first use.
_LAZY = {
    "AnthropicMessagesModel": "hilbert.models.anthropic_messages",
    "OpenAIChatModel": "hilbert.models.openai_chat",
    "OpenAIResponsesModel": "hilbert.models.openai_responses",
    "CallSettings": "hilbert.models.wire",
    "WireModel": "hilbert.models.wire",
}
_ADAPTERS = {
    "anthropic": "AnthropicMessagesModel",
    "openai": "OpenAIChatModel",
    "openai-responses": "OpenAIResponsesModel",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_model(
    name: str | ModelSpec,
    *,
    prices: PriceTable | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_attempts: int = 6,
    max_tokens: int | None = None,
    retry: RetryPolicy | None = None,
    env: Mapping[str, str] | None = None,
    governor: Governor | None = None,
) -> WireModel:
    """The `Model` for `name` (`provider:name[@base_url]`). Keys and base URLs come from `env`
    (default: the process environment). `max_tokens` caps the reply (Anthropic requires one and
    defaults to `DEFAULT_MAX_TOKENS`). `retry` replaces the whole retry policy (then `max_attempts`
    is ignored). `governor` paces every attempt (built once at the edge: `hilbert.ui.edge.governor`);
    None: not paced. Raises `UserError` for a bad name or a missing key."""
    spec = name if isinstance(name, ModelSpec) else parse_model_name(name)
    endpoint = resolve_endpoint(spec, os.environ if env is None else env)
    wire = importlib.import_module("hilbert.models.wire")
    settings = wire.CallSettings(
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        retrier=Retrier(retry or RetryPolicy(max_attempts=max_attempts)),
        prices=prices or PriceTable.default(),
        governor=governor,
    )
    adapter: type[WireModel] = __getattr__(_ADAPTERS[spec.provider])
    return adapter(spec, endpoint, settings)
