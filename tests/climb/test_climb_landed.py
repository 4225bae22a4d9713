"""A climb that died between two records of one decision, resumed. After the best branch moved to a try
(the merge queue's merge of it, whose `merge_landing` the log holds; or the try itself, as an older
climb landed it) but before `try_kept` reached the log: the resume keeps the try (the branch and the
log agree again),
rather than reverting it as interrupted with the branch left on its commit (every later landing
refused as stale, the delivered best a try the log calls reverted). The merge trees the dead process
left (the queue's scratch, a try's merge onto a moved best) are removed on resume. (A try's holdout
is measured before it lands, so no kept try lacks one.)"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from hilbert.climb import events as ce
from hilbert.climb.driver import ClimbOptions, climb, open_climb
from hilbert.climb.state import ClimbState
from hilbert.commands import Runner
from hilbert.fleet.events import MergeLanding
from hilbert.models import RetryPolicy, make_model
from hilbert.sim.optimiser.sample import METRIC, TESTS_COMMAND, write_sample
from hilbert.store import EventStore


@pytest.mark.parametrize("through", ["merge_queue", "fast_forward"])
def test_a_try_landed_just_before_the_process_died_is_kept_on_resume(tmp_path: Path, through: str) -> None:
    repo = write_sample(tmp_path / "repo")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    runner = Runner.unsandboxed(env)
    model = make_model("openai:fake@http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": "k"}, retry=RetryPolicy(1))
    options = ClimbOptions(repo=repo, metric=METRIC, goal="min", test_command=TESTS_COMMAND, tries=1)
    where = {"run": "climb-landed", "root": tmp_path / "climb", "runner": runner, "model": model}

    async def died_after_landing(store: EventStore) -> str:
        async with open_climb(options, store=store, **where) as c:  # type: ignore[arg-type]
            base = c.fold.catch_up().best
            c.record(ce.BaselineMeasured(commit=base, values=[1.0, 1.0, 1.0], median=1.0, noise=0.01))
            made = await c.integration.git.run(
                "commit-tree", f"{base}^{{tree}}", "-p", base, "-m", "faster", cwd=c.integration.path
            )
            commit = made.stdout.strip()
            c.record(ce.TryStarted(try_no=1, explorer="Ada", base=base))
            c.record(ce.TryGated(try_no=1, commit=commit, idea="faster", passed=True))
            c.record(
                ce.TryMeasured(try_no=1, commit=commit, values=[0.5] * 3, median=0.5, best_values=[1.0] * 3)
            )
            landed = commit
            if through == "merge_queue":  # the queue logs its intent, then moves the branch to its merge
                merged = await c.integration.git.run(
                    "commit-tree", f"{commit}^{{tree}}", "-p", base, "-p", commit, "-m", "merge try-1",
                    cwd=c.integration.path,
                )  # fmt: skip
                landed = merged.stdout.strip()
                c.record(
                    MergeLanding(
                        tasks=["try-1"], refs=["refs/hilbert/climb/tries/1"], commit=landed, old=base
                    )
                )
            assert await c.integration.land(landed, base) is None  # ... and the process dies here
            for tree in ("merge-scratch", "stale/1"):  # a killed process leaves its merge trees behind
                (c.root / tree / "pairs.py").parent.mkdir(parents=True)
                (c.root / tree / "pairs.py").write_text("# half a merge\n")
                (c.root / f"{tree}.git").mkdir()
            return landed

    async def resumed(store: EventStore) -> tuple[ClimbState, str]:
        async with open_climb(None, store=store, **where) as c:  # type: ignore[arg-type]
            state = await climb(c)
            return state, await c.integration.tip()

    with EventStore.open(tmp_path / "hilbert.db") as store:
        commit = asyncio.run(died_after_landing(store))
        state, tip = asyncio.run(resumed(store))
    assert state.tries[1].outcome == "kept" and state.best == commit == tip
    assert state.best_median == 0.5 and state.finished is not None
    assert state.finished.reason == "all 1 tries made"
    left = [tree for tree in ("merge-scratch", "stale/1") if (tmp_path / "climb" / tree).exists()]
    assert not left and not (tmp_path / "climb" / "merge-scratch.git").exists()  # cleared on resume
