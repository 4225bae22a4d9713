"""A kept try lands on the best branch through the merge queue, and a try whose base is no longer the
best (another try landed while it ran) is merged onto the new best, and the merge is what is measured,
tested and landed: kept when the merge is better and its tests pass, reverted at stage `merge` when
the tests fail on the merge although they passed on the try alone, `stale` when it does not merge."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from hilbert.climb import events as ce
from hilbert.climb.driver import ClimbOptions, measure_base, open_climb
from hilbert.climb.neardup import fingerprint
from hilbert.climb.state import ClimbState
from hilbert.climb.tries import Climb, judge_try, try_ref
from hilbert.commands import Runner
from hilbert.models import RetryPolicy, make_model
from hilbert.sim.optimiser.ideas import BISECT, DICT
from hilbert.sim.optimiser.sample import METRIC, TESTS_COMMAND, write_sample
from hilbert.store import EventStore

# a speed-up that passes the sample's tests but assumes small values (a counting array)
ARRAY = """def count_pairs(values, target):
    counts = [0] * 4001
    total = 0
    for value in values:
        total += counts[target - value + 2000] if 0 <= target - value + 2000 <= 4000 else 0
        counts[value + 2000] += 1
    return total
"""
LARGE = """

def test_large_values():
    assert count_pairs([10**6, 10**6], 2 * 10**6) == 1
"""


def _commit(c: Climb, parent: str, files: dict[str, str], message: str, ref: str) -> str:
    """A commit on `parent` with `files` written, stored in the climb's repository as `ref`."""
    work = c.root / "authoring" / ref.rsplit("/", 1)[-1]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "clone", "-q", str(c.integration.path), str(work)], check=True, capture_output=True)
    subprocess.run([*git, "checkout", "-q", parent], cwd=work, check=True, capture_output=True)
    for name, text in files.items():
        (work / name).write_text(text)
    subprocess.run([*git, "add", "-A"], cwd=work, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-q", "-m", message], cwd=work, check=True, capture_output=True)
    subprocess.run([*git, "push", "-q", "origin", f"HEAD:{ref}"], cwd=work, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True
    ).stdout.strip()


def _git(c: Climb, *args: str) -> str:
    found = subprocess.run(["git", *args], cwd=c.integration.path, capture_output=True, text=True, check=True)
    return found.stdout.strip()


async def _another_try_landed(c: Climb, no: int, files: dict[str, str]) -> str:
    """What another explorer's kept try leaves: the best branch and the log moved to a new commit."""
    state = c.fold.catch_up()
    commit = _commit(c, state.best, files, f"try {no}", try_ref(no))
    c.record(ce.TryStarted(try_no=no, explorer="Ada", base=state.best))
    assert await c.integration.land(commit, state.best) is None
    c.record(ce.TryKept(try_no=no, commit=commit, median=state.best_median or 0.0, previous=0.0))
    return commit


async def _try(c: Climb, no: int, base: str, files: dict[str, str], idea: str) -> ClimbState:
    commit = _commit(c, base, files, idea, try_ref(no))
    c.record(ce.TryStarted(try_no=no, explorer="Bo", base=base))
    await judge_try(c, no, base, commit, idea)
    return c.fold.catch_up()


def test_a_try_behind_the_best_is_merged_onto_it_measured_tested_and_landed_by_the_queue(
    tmp_path: Path,
) -> None:
    repo = write_sample(tmp_path / "repo")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    model = make_model("openai:fake@http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": "k"}, retry=RetryPolicy(1))
    options = ClimbOptions(repo=repo, metric=METRIC, goal="min", test_command=TESTS_COMMAND, repeat=3)

    async def scenario(store: EventStore) -> None:
        where = {"run": "climb-queue", "root": tmp_path / "climb", "runner": Runner.unsandboxed(env)}
        async with open_climb(options, store=store, model=model, **where) as c:  # type: ignore[arg-type]
            await measure_base(c)
            base = c.fold.catch_up().best
            # 1. another try landed a test that the next try's shortcut fails: measured better, not landed
            tests = (repo / "test_pairs.py").read_text() + LARGE
            tested = await _another_try_landed(c, 1, {"test_pairs.py": tests})
            state = await _try(c, 2, base, {"pairs.py": ARRAY}, "a counting array")
            two = state.tries[2]
            assert (two.outcome, two.stage) == ("reverted", "merge"), two.reason
            assert two.median is not None and state.best_median is not None and two.median < state.best_median
            assert "1 failed" in two.reason and state.best == tested == await c.integration.tip()

            # 2. another try landed a note; try 4, from the old base, a real speed-up, lands as a merge —
            # though try 9 had the same idea: it passed the gate, then the run stopped under it (undecided)
            interrupted = _commit(c, base, {"pairs.py": DICT}, "a dict", try_ref(9))
            diff = _git(c, "diff", base, interrupted)
            c.record(ce.TryStarted(try_no=9, explorer="Cy", base=base))
            gated = {"commit": interrupted, "shingles": sorted(fingerprint(diff + "\n")), "passed": True}
            c.record(
                ce.TryGated(
                    try_no=9, idea="a dict", tree=_git(c, "rev-parse", f"{interrupted}^{{tree}}"), **gated
                )
            )
            c.record(ce.TryReverted(try_no=9, stage="interrupted", reason="the run stopped while it ran"))
            noted = await _another_try_landed(c, 3, {"NOTES.md": "how pairs are counted\n"})
            state = await _try(c, 4, base, {"pairs.py": DICT}, "a dict")
            four = state.tries[4]
            assert four.outcome == "kept", four.reason
            merge = state.best
            assert merge == four.landing == await c.integration.tip()
            assert _git(c, "rev-parse", f"{merge}^1", f"{merge}^2").split() == [noted, four.commit]
            measured = [e.data for e in store.events(run="climb-queue", kinds=["try_measured"])][-1]
            assert measured["try_no"] == 4  # what was measured is the merge's tree, not the try alone
            assert _git(c, "rev-parse", f"{measured['commit']}^{{tree}}") == _git(
                c, "rev-parse", f"{merge}^{{tree}}"
            )
            assert "test_large_values" in _git(c, "show", f"{merge}:test_pairs.py")
            queued = [e.data for e in store.events(run="climb-queue", kinds=["merged"])]
            assert queued == [{"task": "try-4", "ref": try_ref(4), "commit": merge}]

            # 3. a try that rewrites what a landed try rewrote does not merge onto it: stale, not landed
            state = await _try(c, 5, base, {"pairs.py": BISECT}, "bisect")
            five = state.tries[5]
            assert (five.outcome, five.stage) == ("reverted", "stale") and "pairs.py" in five.reason
            assert state.best == merge == await c.integration.tip()

            # 4. a stale try's idea, tried again from the new best, is judged — not refused as a duplicate
            # of the stale one, though its tree is the same (the new best changed only what both rewrote)
            again = "# one pass\n" + DICT
            newest = await _another_try_landed(c, 6, {"pairs.py": BISECT})
            state = await _try(c, 7, merge, {"pairs.py": again}, "a dict, commented")
            assert state.tries[7].stage == "stale", state.tries[7].reason
            state = await _try(c, 8, newest, {"pairs.py": again}, "a dict, commented")
            assert state.tries[8].tree == state.tries[7].tree
            assert state.tries[8].stage != "duplicate" and state.tries[8].median is not None, state.tries[
                8
            ].reason

    with EventStore.open(tmp_path / "hilbert.db") as store:
        asyncio.run(scenario(store))


def test_a_try_is_not_landed_onto_a_best_branch_someone_else_moved(tmp_path: Path) -> None:
    """The queue merges onto the branch's tip; the try was measured beside the best the log knows. When
    something else wrote the branch (not a try of the climb), landing would deliver a tree nobody
    measured: the try is reverted instead, and the branch left as it is."""
    repo = write_sample(tmp_path / "repo")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    model = make_model("openai:fake@http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": "k"}, retry=RetryPolicy(1))
    options = ClimbOptions(repo=repo, metric=METRIC, goal="min", test_command=TESTS_COMMAND, repeat=3)

    async def scenario(store: EventStore) -> None:
        where = {"run": "climb-moved", "root": tmp_path / "climb", "runner": Runner.unsandboxed(env)}
        async with open_climb(options, store=store, model=model, **where) as c:  # type: ignore[arg-type]
            await measure_base(c)
            base = c.fold.catch_up().best
            foreign = _commit(c, base, {"NOTES.md": "by hand\n"}, "pushed by hand", "refs/heads/elsewhere")
            assert await c.integration.land(foreign, base) is None  # not through the climb: not in its log
            state = await _try(c, 1, base, {"pairs.py": DICT}, "a dict")
            one = state.tries[1]
            assert (one.outcome, one.stage) == ("reverted", "stale"), one.reason
            assert await c.integration.tip() == foreign and state.best == base

    with EventStore.open(tmp_path / "hilbert.db") as store:
        asyncio.run(scenario(store))
