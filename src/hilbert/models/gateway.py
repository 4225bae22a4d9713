"""The seam through which agents outside hilbert's process will reach models: a gateway.

hilbert's own workers never hold a model key: the harness makes their model calls. External CLI agents
(Claude Code, Codex, aider, mini-swe-agent; a later issue) make their own calls, so they reach models only
through a hilbert gateway — a loopback HTTP proxy that gives each worker its own token, maps it to the real
key (which never leaves the harness process), meters the worker's use and can cut it off. The proxy is
that issue's; what exists now is the seam it will implement and the token bookkeeping it will use:

    ModelGateway.token_for(worker) -> Grant     the base URL and token one worker is configured with
    ModelGateway.revoke(worker)                 its token stops working (the run ended, it went rogue)
    TokenBook                                   minting, resolving and revoking those tokens

Tokens are random (`secrets`), distinct per worker, looked up by their SHA-256 digest (a request's token is
never compared character by character with a secret), and never shown: a `Grant`'s repr masks it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal, Protocol

Protocol_ = Literal["openai", "anthropic"]
PREFIX = "hilbert-gw-"


@dataclass(frozen=True)
class Grant:
    """What one worker's agent is configured with to reach models through the gateway."""

    worker: str
    base_url: str
    token: str

    def __repr__(self) -> str:  # a grant may be logged; its token may not
        return f"Grant(worker={self.worker!r}, base_url={self.base_url!r}, token='***')"

    def env(self, protocol: Protocol_) -> dict[str, str]:
        """The environment variables an external agent of `protocol` reads its endpoint and key from."""
        if protocol == "openai":
            return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.token}
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": self.token}


class ModelGateway(Protocol):
    """Gives each worker its own way to models; the real keys stay with the gateway."""

    def token_for(self, worker: str) -> Grant: ...

    def revoke(self, worker: str) -> None: ...


class TokenBook:
    """One token per worker for the gateway at `base_url`: minted on first ask, the same after, gone
    when revoked. `worker_of(token)` is what the proxy asks for every request."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._workers: dict[str, str] = {}  # digest -> worker
        self._grants: dict[str, Grant] = {}  # worker -> grant

    def token_for(self, worker: str) -> Grant:
        if worker not in self._grants:
            token = PREFIX + secrets.token_urlsafe(24)
            self._workers[_digest(token)] = worker
            self._grants[worker] = Grant(worker, self.base_url, token)
        return self._grants[worker]

    def worker_of(self, token: str) -> str | None:
        """The worker `token` was minted for, or None (unknown or revoked)."""
        return self._workers.get(_digest(token))

    def revoke(self, worker: str) -> None:
        grant = self._grants.pop(worker, None)
        if grant is not None:
            del self._workers[_digest(grant.token)]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


__all__ = ["Grant", "ModelGateway", "TokenBook"]
