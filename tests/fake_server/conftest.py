"""Fixtures for the fake server's tests: the scripted responder (wrapped to keep what it saw) and a
running server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_server_support import SCRIPT, Seen

from hilbert.testing.fake_server import FakeServer, ScriptedResponder


@pytest.fixture
def policy() -> Seen:
    return Seen(ScriptedResponder.from_turns(SCRIPT))


@pytest.fixture
def server(policy: Seen) -> Iterator[FakeServer]:
    with FakeServer(policy) as running:
        yield running
