"""The governor's file outlives the run that wrote it: what a later run with other settings, or a run
long after, finds in it. Real SQLite files; `Governor`s built as each run's edge builds one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hilbert.models.governor import Governor, GovernorStore, Knobs, Outcome
from hilbert.models.governor.pacing import IDLE_RESET_S, Admit, Wait, decide, report
from hilbert.ui.config_command import load_settings
from hilbert.ui.edge import models

KEY = "fingerprint/anthropic:fake-claude"


def _admitted(governor: Governor, calls: int) -> int:
    """How many of `calls` attempts on KEY the governor lets start at once (none reported)."""
    started = 0

    def attempt(state):  # type: ignore[no-untyped-def]
        return decide(state, governor.knobs, 2000.0, 10, f"l{state.leases.__len__()}", 1, "h")

    for _ in range(calls):
        if isinstance(governor.store.update(KEY, governor.knobs, attempt), Admit):
            started += 1
    return started


def test_a_lower_max_concurrency_caps_a_window_an_earlier_run_grew(tmp_path: Path) -> None:
    path = tmp_path / "governor.db"
    earlier = Governor(GovernorStore(path), Knobs(max_concurrency=64, initial_concurrency=32))
    assert _admitted(earlier, 1) == 1  # its row: a window of 32, used a moment ago (not idle)
    earlier.store.update(
        KEY, earlier.knobs, lambda state: report(state, earlier.knobs, 2000.0, "l0", Outcome("ok"))
    )
    earlier.close()
    later = Governor(GovernorStore(path), Knobs(max_concurrency=2, initial_concurrency=2))
    assert _admitted(later, 10) == 2


def test_a_limit_set_in_a_later_runs_settings_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "governor.db"
    earlier = Governor(GovernorStore(path), Knobs())
    earlier.store.update(KEY, earlier.knobs, lambda state: None)  # no limits known
    earlier.close()
    later = Governor(GovernorStore(path), Knobs(limits={"rpm": 3}))
    assert _admitted(later, 10) == 3  # three requests a minute, then the rpm bucket is empty


def test_a_limit_removed_from_the_settings_no_longer_holds_calls(tmp_path: Path) -> None:
    path = tmp_path / "governor.db"
    earlier = Governor(GovernorStore(path), Knobs(limits={"rpm": 1}))
    assert _admitted(earlier, 1) == 1
    earlier.store.update(
        KEY, earlier.knobs, lambda state: report(state, earlier.knobs, 2000.0, "l0", Outcome("ok"))
    )
    earlier.close()
    later = Governor(GovernorStore(path), Knobs(initial_concurrency=4))
    assert _admitted(later, 4) == 4


def test_a_window_halved_by_an_earlier_run_starts_fresh_for_a_later_one(tmp_path: Path) -> None:
    path = tmp_path / "governor.db"
    knobs = Knobs(initial_concurrency=8)
    earlier = Governor(GovernorStore(path), knobs)

    async def throttled_burst() -> None:
        for _ in range(3):  # three windows, each cut by a 429: 8 -> 1
            async with earlier.admit(KEY, 10) as slot:
                slot.report(Outcome("throttled"))

    asyncio.run(throttled_burst())
    left = earlier.store.state(KEY)
    assert left is not None and left.limit < 8
    earlier.close()

    later = Governor(GovernorStore(path), knobs)
    idle_since = left.last_used

    def attempt(state):  # type: ignore[no-untyped-def]
        return decide(state, knobs, idle_since + IDLE_RESET_S + 1, 10, f"l{len(state.leases)}", 1, "h")

    decisions = [later.store.update(KEY, knobs, attempt) for _ in range(9)]
    assert [type(d) for d in decisions] == [Admit] * 8 + [Wait]  # the settings' window, not the halved one


def test_a_test_builds_its_governor_in_a_home_of_its_own_never_the_persons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's conftest gives each test its own `HILBERT_HOME`: the models a command builds (as
    the CLI loads its settings) keep their governor's file there, not in `~/.hilbert`."""
    monkeypatch.chdir(tmp_path)  # no hilbert.toml
    settings = load_settings()
    governor = models(settings).governor
    assert governor is not None
    try:
        assert governor.store.path == settings.home / "governor.db" and governor.store.path.exists()
        assert not governor.store.path.is_relative_to(Path.home() / ".hilbert"), governor.store.path
    finally:
        governor.close()
