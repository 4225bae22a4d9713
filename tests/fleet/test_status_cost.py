"""The cost a view shows for an agent: `$?` only when a model call ran on a model with no known price
(each `model_call` records `priced`), never for one priced at 0 on purpose; logs written before
`priced` was recorded read a zero cost with tokens spent as unknown, as they did."""

from __future__ import annotations

from typing import Any

from hilbert.fleet.state import FleetState, apply
from hilbert.store.event_store import Event
from hilbert.ui.fleet_views import status_lines


def agent_line(**call: Any) -> str:
    state = FleetState("r")
    data = {"usage": {"input_tokens": 100, "output_tokens": 10}, "model": "m", **call}
    apply(state, Event(1, "r", "Poincaré", 1, 1.0, "model_call", data))
    (line,) = status_lines(state, now=2.0)
    return line


def test_a_model_priced_at_zero_shows_zero_and_an_unpriced_one_shows_unknown() -> None:
    assert "$  0.0000" in agent_line(cost_usd=0.0, priced=True)
    assert "$?" in agent_line(cost_usd=0.0, priced=False)
    assert "$  0.0123" in agent_line(cost_usd=0.0123, priced=True)
    assert "$?" in agent_line(cost_usd=0.0)  # an older log: no `priced`, a zero cost with tokens
    assert "$  0.0123" in agent_line(cost_usd=0.0123)
