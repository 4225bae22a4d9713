"""The gateway seam: each worker gets its own token for the gateway's endpoint, never the real key; the
book maps a token back to its worker, and a revoked token maps to nobody."""

from __future__ import annotations

from hilbert.models.gateway import ModelGateway, TokenBook


def test_each_worker_has_its_own_token_until_it_is_revoked() -> None:
    book = TokenBook("http://127.0.0.1:9999/v1")
    gateway: ModelGateway = book
    poincare, noether = gateway.token_for("Poincaré"), gateway.token_for("Noether")
    assert poincare.token != noether.token and gateway.token_for("Poincaré") == poincare
    assert (book.worker_of(poincare.token), book.worker_of(noether.token)) == ("Poincaré", "Noether")
    assert book.worker_of("hilbert-gw-guessed") is None
    gateway.revoke("Poincaré")
    assert book.worker_of(poincare.token) is None and book.worker_of(noether.token) == "Noether"
    assert gateway.token_for("Poincaré").token != poincare.token  # a fresh one, if it is let back in


def test_a_grant_configures_an_external_agent_and_never_shows_its_token() -> None:
    grant = TokenBook("http://127.0.0.1:9999").token_for("Noether")
    assert grant.env("openai") == {"OPENAI_BASE_URL": "http://127.0.0.1:9999", "OPENAI_API_KEY": grant.token}
    assert grant.env("anthropic")["ANTHROPIC_API_KEY"] == grant.token
    assert grant.token not in repr(grant) and grant.token not in str(grant)
