"""`hilbert stop` / `hilbert send` (and the web page's and `hilbert top`'s buttons, the same functions) on a
climb run: a climb's explorers read neither a stop request nor a message (their loop has no inbox), so
recording one and answering "stop requested" would be a control that does nothing — refused in one
line that says how a climb is stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilbert.climb import events as ce
from hilbert.errors import UserError
from hilbert.store import EventStore
from hilbert.ui.fleet_actions import send_message, stop_agents


def test_stop_and_send_on_a_climb_run_are_refused_with_how_to_stop_it(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        started = ce.ClimbStarted(base="b0", metric="python bench.py", branch="hilbert/climb/c1/best")
        store.append("c1", "harness", started.kind, started.data())
        store.append("c1", "Noether#1", "model_call", {"cost_usd": 0.0})
        for act in (
            lambda: stop_agents(store, "c1", None),
            lambda: send_message(store, "c1", "Noether#1", "hi"),
        ):
            with pytest.raises(UserError, match="climb") as refused:
                act()
            assert "Ctrl-C" in (refused.value.hint or "")
        assert not store.events(run="c1", kinds=["stop_requested", "person_message"])
