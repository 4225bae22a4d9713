"""A run's folder as the fleet lays it out, for the sandbox tests: two workspaces (the peer's holding
work) and the message key beside them."""

from __future__ import annotations

from pathlib import Path


def two_workspaces(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The run's folder, this worker's (empty) workspace and a peer's, with `work.py` in it."""
    run_root = tmp_path / "run"
    mine, theirs = run_root / "workspaces" / "noether", run_root / "workspaces" / "gauss"
    for folder in (mine, theirs):
        folder.mkdir(parents=True)
    (theirs / "work.py").write_text("precious = True\n")
    (run_root / "message.key").write_text("00" * 32)
    return run_root, mine, theirs
