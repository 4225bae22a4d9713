"""The demo's context scene on its own: an agent whose task outgrows a small budget is cut several times,
reads its task state restated after each cut, and still finishes — checked by the harness's own count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hilbert.commands import Runner
from hilbert.context.policy import CONTEXT_COMPACTED
from hilbert.errors import UserError
from hilbert.sim.demo.context import PARTS, run_context_scene
from hilbert.sim.longhaul import LonghaulResponder
from hilbert.store import EventStore


def test_the_long_task_is_compacted_and_finishes(tmp_path: Path) -> None:
    said: list[str] = []
    db = tmp_path / "scene.db"
    kept = asyncio.run(run_context_scene(tmp_path, db, runner=Runner.unsandboxed(), echo=said.append))
    assert kept, said
    assert [(tmp_path / "long-task" / f"part{k}.txt").read_text() for k in (1, PARTS)] == [
        "1\n",
        f"{PARTS}\n",
    ]
    with EventStore.open(db) as store:
        cuts = store.events(kinds=[CONTEXT_COMPACTED])
        assert len(cuts) >= 2 and all(c.data["tokens_after"] < 4000 for c in cuts)
    assert said[-1].endswith(f": {PARTS} (expected {PARTS})")


def test_the_longhaul_policy_names_a_bad_option() -> None:
    with pytest.raises(UserError, match="parts=N"):
        LonghaulResponder.from_options({"parts": "many"}, seed=0)
    assert LonghaulResponder.from_options({"parts": "5"}, seed=0).parts == 5
