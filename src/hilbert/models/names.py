"""Model names as a person types them, and where their keys and base URLs come from.

A model is named `provider:name[@base_url]`:

    anthropic:claude-sonnet-4-5            Anthropic Messages
    openai:gpt-5                           OpenAI Chat Completions
    openai-responses:gpt-5                 OpenAI Responses
    openai:NAME@http://host:port/v1        any OpenAI-compatible server (also anthropic:NAME@URL, …)

The name may itself contain `:` or `@` (`openai:llama3:8b@http://127.0.0.1:11434/v1`,
`anthropic:claude-sonnet-4-5@20250929`); only a trailing `@http(s)://…` is read as the base URL.

Keys come from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`; without `@URL` the base URL comes from
`ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the provider's public API. With an explicit `@URL` a
missing key falls back to a placeholder (`PLACEHOLDER_API_KEY`), since local OpenAI-compatible servers
usually need none; if the server does want one it answers 401, which becomes a `RefusedError`.
Nothing here reads the process environment by itself: callers pass the mapping (usually `os.environ`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hilbert.errors import UserError

Provider = Literal["anthropic", "openai", "openai-responses"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "openai-responses")
_ALIASES: dict[str, Provider] = {"openai-chat": "openai"}

PLACEHOLDER_API_KEY = "no-key-needed"

FORMS_HINT = (
    "write provider:name, e.g. anthropic:claude-sonnet-4-5, openai:gpt-5, openai-responses:gpt-5, "
    "or openai:NAME@http://host:port/v1 for an OpenAI-compatible server"
)

_URL_TAIL = re.compile(r"^https?://\S+$")
_HOSTLIKE_TAIL = re.compile(r"^([a-z][a-z0-9+.-]*://|[\w.-]+:\d+(/|$))", re.IGNORECASE)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model name. `base_url` is set only when the name carried `@URL`."""

    provider: Provider
    name: str
    base_url: str | None = None

    @property
    def label(self) -> str:
        """`provider:name`, without the base URL: what logs and price tables use."""
        return f"{self.provider}:{self.name}"

    def __str__(self) -> str:
        return f"{self.label}@{self.base_url}" if self.base_url else self.label


@dataclass(frozen=True)
class Endpoint:
    """Where to send a model's requests and with which key; `key_var` names the variable it came from."""

    base_url: str
    api_key: str
    key_var: str


_KEY_VARS: dict[Provider, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}
_URL_VARS: dict[Provider, str] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
}
_PUBLIC_URLS: dict[Provider, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
}


def parse_model_name(text: str) -> ModelSpec:
    """Parse `provider:name[@base_url]`; raise `UserError` (one line, with a hint) when it is not that."""
    raw = text.strip()
    provider_text, colon, rest = raw.partition(":")
    if not colon or rest.startswith("//"):
        raise UserError(f"model name {raw!r} has no provider", hint=FORMS_HINT)
    provider_key = provider_text.strip().lower()
    provider = _ALIASES.get(provider_key, provider_key)
    if provider not in PROVIDERS:
        raise UserError(
            f"unknown model provider {provider_text!r} in {raw!r} (known: {', '.join(PROVIDERS)})",
            hint=FORMS_HINT,
        )
    name, base_url = _split_base_url(rest, raw)
    if not name:
        raise UserError(f"model name {raw!r} has an empty name after {provider_text}:", hint=FORMS_HINT)
    return ModelSpec(provider=provider, name=name, base_url=base_url)


def _split_base_url(rest: str, raw: str) -> tuple[str, str | None]:
    head, at, tail = rest.rpartition("@")
    if not at:
        return rest.strip(), None
    if _URL_TAIL.match(tail):
        return head.strip(), tail.rstrip("/")
    if _HOSTLIKE_TAIL.match(tail):
        raise UserError(
            f"base URL {tail!r} in {raw!r} must start with http:// or https://",
            hint="e.g. openai:NAME@http://127.0.0.1:8000/v1",
        )
    return rest.strip(), None


def resolve_endpoint(spec: ModelSpec, env: Mapping[str, str]) -> Endpoint:
    """Find the base URL and key for `spec` in `env`; raise `UserError` naming the variable to set."""
    key_var = _KEY_VARS[spec.provider]
    base_url = spec.base_url or env.get(_URL_VARS[spec.provider], "").strip() or _PUBLIC_URLS[spec.provider]
    api_key = env.get(key_var, "").strip()
    if not api_key:
        if spec.base_url is None:
            raise UserError(
                f"no API key for {spec.label}: {key_var} is not set",
                hint=f"export {key_var}=... (or name a local server with {spec.label}@http://host:port/v1)",
            )
        api_key = PLACEHOLDER_API_KEY
    return Endpoint(base_url=base_url.rstrip("/"), api_key=api_key, key_var=key_var)
