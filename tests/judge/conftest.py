"""Fixtures the judge tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def base_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of kept runs at base for the gates of these tests (per xdist worker), as a fleet
    keeps one for every attempt on a base (`run_gate`'s `cache`): gates on the same base tree, command,
    held-out tests and perturbation pay for the runs at base once. Only gates on the plain unsandboxed
    runner use it: what a run at base gave under another runner is no fact for this one."""
    return tmp_path_factory.mktemp("base-runs")
