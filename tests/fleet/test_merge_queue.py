"""The merge queue: accepted branches land batched and checked, a bad one is found by bisection, a conflict
goes back with its hunks, a flaky test is recorded, and the integration branch only ever moves to a commit
whose checks pass — in real git repositories with a tiny Python project whose "test suite" is `check.py`."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest
from merge_support import PY, PYTEST_SUITE, Project, by_task, escalations, make_project

from hilbert.commands import Runner
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.security.sandbox import Sandbox, detect
from hilbert.ui.fleet_views import status_lines
from hilbert.workspaces.integration import Integration


def test_a_clean_batch_of_four_merges_with_one_test_run(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        queue = p.queue()
        for n in range(4):
            queue.submit(await p.candidate(f"t{n}"))
        outcomes = by_task(await queue.process())
        tip = await p.tip()
        assert {o.kind for o in outcomes.values()} == {"merged"}
        assert {o.commit for o in outcomes.values()} == {tip}
        assert p.runs() == 1
        assert sorted(p.verify_file.read_text().split()) == ["t0", "t1", "t2", "t3"]
        assert {f"src/t{n}.py" for n in range(4)} <= await p.files_at_tip()
        assert p.kinds()[0] == "merge_batch_started" and p.kinds().count("merged") == 4
        (landing,) = [data for kind, data in p.events if kind == "merge_landing"]  # logged before the move
        assert p.kinds().index("merge_landing") < p.kinds().index("merged")
        assert landing["commit"] == tip and landing["tasks"] == ["t0", "t1", "t2", "t3"]
        assert "merge_checks_passed" in p.kinds() and queue.pending == ()
        await p.assert_never_broken()
        await queue.close()
        assert not (tmp_path / "scratch").exists()
        worktrees = await p.git.run("worktree", "list", "--porcelain", cwd=p.integ)
        assert "scratch" not in worktrees.stdout

    asyncio.run(scenario())


@pytest.mark.parametrize("bad", [0, 5])
def test_one_bad_candidate_among_eight_is_found_by_bisection(tmp_path: Path, bad: int) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        queue = p.queue()
        for n in range(8):
            queue.submit(await p.candidate(f"t{n}", good=n != bad))
        outcomes = by_task(await queue.process())
        assert outcomes[f"t{bad}"].kind == "rejected"
        assert f"FAILED: t{bad}" in outcomes[f"t{bad}"].output
        assert [o.task_id for o in outcomes.values() if o.kind == "merged"] == [
            f"t{n}" for n in range(8) if n != bad
        ]
        assert p.runs() < 8, p.runs()
        files = await p.files_at_tip()
        assert f"src/t{bad}.py" not in files and len({f for f in files if f.startswith("src/t")}) == 7
        assert "merge_bisect" in p.kinds()
        rejected = [data for kind, data in p.events if kind == "merge_rejected"]
        assert [r["task"] for r in rejected] == [f"t{bad}"]
        await p.assert_never_broken()

    asyncio.run(scenario())


def test_a_conflict_returns_its_hunks_and_does_not_block_the_rest(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        queue = p.queue()
        shared = "def ok():\n    return True\n\nVALUE = {}\n"
        queue.submit(await p.candidate("t0", extra={"src/shared.py": shared.format(2)}))
        queue.submit(await p.candidate("t1", extra={"src/shared.py": shared.format(3)}))
        queue.submit(await p.candidate("t2"))
        queue.submit(await p.candidate("t3"))
        outcomes = by_task(await queue.process())
        assert outcomes["t1"].kind == "conflict"
        assert "<<<<<<<" in outcomes["t1"].hunks
        assert "VALUE = 2" in outcomes["t1"].hunks and "VALUE = 3" in outcomes["t1"].hunks
        assert [t for t, o in outcomes.items() if o.kind == "merged"] == ["t0", "t2", "t3"]
        assert p.runs() == 1
        (conflict,) = [data for kind, data in p.events if kind == "merge_conflict"]
        assert conflict["task"] == "t1" and conflict["files"] == ["src/shared.py"]
        assert "src/t1.py" not in await p.files_at_tip()
        await p.assert_never_broken()

    asyncio.run(scenario())


def test_a_flaky_test_is_recorded_with_both_outputs_and_the_batch_merges(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        flag = shlex.quote(str(tmp_path / "failed-once"))
        flaky = (
            f"if [ ! -e {flag} ]; then touch {flag}; echo run >> {p.runs_file}; echo first-flop; exit 1; fi; "
        )
        queue = p.queue(test_command=p.test_command(prefix=flaky))
        queue.submit(await p.candidate("t0"))
        queue.submit(await p.candidate("t1"))
        outcomes = by_task(await queue.process())
        assert {o.kind for o in outcomes.values()} == {"merged"}
        (flake,) = [data for kind, data in p.events if kind == "flaky_test"]
        assert "first-flop" in flake["first_output"] and "all ok" in flake["second_output"]
        assert flake["tasks"] == ["t0", "t1"]
        assert p.runs() == 2
        await p.assert_never_broken()

    asyncio.run(scenario())


def test_a_concurrent_move_of_the_branch_is_never_overwritten(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        hotfix = await p.commit(
            "hotfix", {"src/hotfix.py": "def ok():\n    return True\n"}, "refs/heads/hotfix"
        )
        flag = shlex.quote(str(tmp_path / "moved-once"))
        mover = (
            f"if [ ! -e {flag} ]; then touch {flag}; "
            f"git --git-dir={shlex.quote(str(p.integ))} update-ref refs/heads/main {hotfix}; fi; "
        )
        queue = p.queue(test_command=p.test_command(prefix=mover))
        queue.submit(await p.candidate("t0"))
        queue.submit(await p.candidate("t1"))
        first = by_task(await queue.process())
        assert {o.kind for o in first.values()} == {"requeued"}
        assert await p.tip() == hotfix
        assert [c.task_id for c in queue.pending] == ["t0", "t1"]
        assert "merge_requeued" in p.kinds() and "merged" not in p.kinds()

        second = by_task(await queue.process())
        assert {o.kind for o in second.values()} == {"merged"}
        assert {"src/hotfix.py", "src/t0.py", "src/t1.py"} <= await p.files_at_tip()
        ancestry = await p.git.run("merge-base", "--is-ancestor", hotfix, "main", cwd=p.integ, check=False)
        assert ancestry.returncode == 0
        await p.assert_never_broken()

    asyncio.run(scenario())


def test_a_check_that_hangs_is_killed_and_its_candidate_rejected(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = await make_project(tmp_path)
        queue = p.queue(command_timeout_s=0.5)
        good = await p.candidate("t0")
        hang = await p.candidate("t1")
        queue.submit(good)
        queue.submit(Candidate(hang.task_id, hang.ref, "sleep 30"))
        outcomes = by_task(await queue.process())
        assert outcomes["t0"].kind == "merged"
        assert (
            outcomes["t1"].kind == "rejected"
            and "timed out after 0.5 s (timeouts.merge_s); killed" in outcomes["t1"].output
        )
        assert "src/t1.py" not in await p.files_at_tip()
        await p.assert_never_broken()

    asyncio.run(scenario())


@pytest.mark.parametrize("wrapped", [False, True], ids=["pytest", "make-check"])
def test_on_a_red_tip_the_bar_is_no_new_failures(tmp_path: Path, wrapped: bool) -> None:
    """The tip already fails (`legacy`); a candidate that fixes nothing but breaks nothing lands, one
    that adds a failure is rejected (also when its conftest forces the exit status to 0), and an
    interrupted run (exit 2) never passes as 'no new failures'.
    The same holds when the tests run through a wrapper that exits 2 on any failure (`make check`)."""

    async def scenario() -> None:
        p = await make_project(tmp_path)
        await p.commit(
            "red",
            {"tests/test_all.py": PYTEST_SUITE, "src/legacy.py": "def ok():\n    return False\n"},
            "refs/heads/main",
        )
        await p.git.run("branch", "-f", "base", "red", cwd=p.work)
        runs = tmp_path / "suite-runs.log"
        queue = p.queue(
            test_command=f"echo run >> {runs} && {PY} -m pytest -q -p no:cacheprovider tests"
            + (" || exit 2" if wrapped else "")
        )
        queue.submit(await p.candidate("harmless"))
        assert by_task(await queue.process())["harmless"].kind == "merged"
        queue.submit(await p.candidate("breaks", good=False))
        assert by_task(await queue.process())["breaks"].kind == "rejected"
        queue.submit(
            await p.candidate("collect", extra={"src/broken_collection.py": "def ok():\n    return True\n"})
        )
        assert by_task(await queue.process())["collect"].kind == "rejected"
        # a conftest that turns the exit status into 0 hides nothing: the outcomes are the judge's own
        exit_zero = {"conftest.py": "def pytest_sessionfinish(session):\n    session.exitstatus = 0\n"}
        queue.submit(await p.candidate("zero", good=False, extra=exit_zero))
        assert by_task(await queue.process())["zero"].kind == "rejected"
        baseline = [data for kind, data in p.events if kind == "merge_checks_baseline"]
        assert [d["still_failing"] for d in baseline] == [["tests/test_all.py::test_ok[legacy]"]]
        # the suite ran on the red tip once (harmless's baseline); the tip harmless made was already
        # measured, so the later batches ran it only on their builds (each failure confirmed once)
        assert runs.read_text().count("run") == 2 + 2 + 2 + 2

    asyncio.run(scenario())


def test_in_a_sandbox_the_checks_cannot_write_outside_the_scratch_tree(tmp_path: Path) -> None:
    """The queue runs workers' code (the project's tests). Without a sandbox a test can overwrite a
    file next to the run; in the run's sandbox the same test leaves it as it was."""
    sandbox = detect(hidden=[tmp_path / "integ.git"])
    if sandbox.kind == "refuse":
        pytest.skip(f"no sandbox on this machine: {sandbox.why}")
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")

    async def land(p: Project, task: str, box: Sandbox) -> Outcome:
        escape = (
            f"{PY} check.py && if [ -f src/{task}.py ]; then echo pwned > {shlex.quote(str(outside))}; fi"
        )
        queue = MergeQueue(
            Integration(p.integ, p.git, branch="main"),
            tmp_path / f"scratch-{task}",
            test_command=escape,
            record=lambda event: p.events.append((event.kind, event.data())),
            runner=Runner(box),
        )
        queue.submit(await p.candidate(task))
        outcomes = by_task(await queue.process())
        await queue.close()
        return outcomes[task]

    async def scenario() -> None:
        p = await make_project(tmp_path)
        assert (await land(p, "t0", sandbox)).kind == "merged"  # it "wrote" only inside the sandbox
        assert outside.read_text() == "precious\n"
        assert (await land(p, "t1", Sandbox("unsandboxed"))).kind == "merged"
        assert outside.read_text() == "pwned\n"  # the same test, unsandboxed

    asyncio.run(scenario())


def test_a_check_that_plants_a_git_entry_in_the_merge_tree_steers_no_git_of_the_harness(
    tmp_path: Path,
) -> None:
    """A check (workers' code) writes a `.git` file into the merge tree pointing at a git dir of its own,
    whose config names another `core.worktree` (a folder outside the run) and a clean filter for every
    file. The queue's next batch rebuilds the tree: the outside folder keeps its files, no filter ran,
    and the candidate merges."""

    async def scenario() -> None:
        p = await make_project(tmp_path)
        victim, canary, evil = tmp_path / "victim", tmp_path / "filter-ran", tmp_path / "evil.git"
        victim.mkdir()
        (victim / "keep.txt").write_text("the person's file\n")
        (victim / ".gitattributes").write_text("* filter=evil\n")
        await p.git.run("init", "-q", "--bare", evil)
        (evil / "config").write_text(
            f"[core]\n\tbare = false\n\tworktree = {victim}\n"
            f'[filter "evil"]\n\tclean = touch {shlex.quote(str(canary))}; cat\n'
        )
        (evil / "objects" / "info" / "alternates").write_text(f"{p.integ / 'objects'}\n")  # it sees them
        plant = f"printf 'gitdir: %s\\n' {shlex.quote(str(evil))} > .git && "
        queue = p.queue(p.test_command(prefix=plant))
        queue.submit(await p.candidate("t0"))
        first = by_task(await queue.process())
        assert first["t0"].kind == "merged", first
        assert (tmp_path / "scratch" / ".git").read_text().startswith("gitdir:")  # the check planted it
        queue.submit(await p.candidate("t1"))
        second = by_task(await queue.process())
        assert second["t1"].kind == "merged", second
        assert (victim / "keep.txt").read_text() == "the person's file\n"
        assert not canary.exists(), "a filter from a git dir the check named ran in the harness's git"
        await queue.close()

    asyncio.run(scenario())


# A pair that fails only together: `pair_a` adds `x` and a module whose check fails when `y` exists too;
# `pair_b` adds `y`. Each passes the project's checks alone on the tip; together they fail.
XY_GUARD = """\
import pathlib


def ok():
    return not (pathlib.Path("x").exists() and pathlib.Path("y").exists())
"""


async def pair(p: Project) -> dict[str, Candidate]:
    return {
        "pair_a": await p.candidate("pair_a", extra={"x": "a\n", "src/xy.py": XY_GUARD}),
        "pair_b": await p.candidate("pair_b", extra={"y": "b\n"}),
        "innocent": await p.candidate("innocent"),
    }


def test_two_candidates_that_fail_only_together_are_escalated_together(tmp_path: Path) -> None:
    """Neither is blamed alone: neither lands, each is escalated to the lead naming the other, with the
    failing output, as typed data (`with_tasks`) that the fold and `hilbert status` read back."""

    async def scenario() -> None:
        p = await make_project(tmp_path)
        tip = await p.tip()
        queue = p.queue()
        candidates = await pair(p)
        queue.submit(candidates["pair_a"])
        queue.submit(candidates["pair_b"])
        outcomes = by_task(await queue.process())
        assert {t: (o.kind, o.with_tasks) for t, o in outcomes.items()} == {
            "pair_a": ("rejected", ("pair_b",)),
            "pair_b": ("rejected", ("pair_a",)),
        }
        assert all("FAILED: xy" in o.output for o in outcomes.values())
        assert await p.tip() == tip  # neither landed
        rejected = {d["task"]: d["with_tasks"] for kind, d in p.events if kind == "merge_rejected"}
        assert rejected == {"pair_a": ["pair_b"], "pair_b": ["pair_a"]}

        state = escalations(p, outcomes)
        assert {t: s.status for t, s in state.states.items()} == {
            "pair_a": "escalated",
            "pair_b": "escalated",
        }
        assert state.unanswered() == ["pair_a", "pair_b"]  # the lead is asked about both
        assert "pair_b" in state.feedback["pair_a"] and "FAILED: xy" in state.feedback["pair_a"]
        assert "pair_a" in state.feedback["pair_b"]
        lines = status_lines(state)
        assert "  pair_a escalated together with pair_b (escalated)" in lines, lines
        assert "  pair_b escalated together with pair_a (escalated)" in lines, lines

    asyncio.run(scenario())


@pytest.mark.parametrize("order", [["innocent", "pair_a", "pair_b"], ["pair_a", "pair_b", "innocent"]])
def test_an_innocent_candidate_lands_beside_a_pair_that_fails_together(
    tmp_path: Path, order: list[str]
) -> None:
    """The innocent candidate lands wherever it is in the batch. When the pair's first one landed
    already (the bisection lands a green left half before it knows the culprit), it stays on the branch
    and the second is escalated as failing together with it, naming it."""

    async def scenario() -> None:
        p = await make_project(tmp_path)
        queue = p.queue()
        candidates = await pair(p)
        for task in order:
            queue.submit(candidates[task])
        outcomes = by_task(await queue.process())
        kinds = {t: (o.kind, o.with_tasks) for t, o in outcomes.items()}
        files = await p.files_at_tip()
        assert kinds["innocent"] == ("merged", ()) and "src/innocent.py" in files
        if order[0] == "innocent":
            assert kinds["pair_a"] == ("rejected", ("pair_b",)) and kinds["pair_b"] == (
                "rejected",
                ("pair_a",),
            )
            assert "x" not in files and "y" not in files
        else:
            assert (
                kinds["pair_a"] == ("merged", ()) and "x" in files
            )  # it landed before the culprit was known
            assert kinds["pair_b"] == ("rejected", ("pair_a",)) and "y" not in files
        assert "FAILED: xy" in outcomes["pair_b"].output
        await p.assert_never_broken()

        state = escalations(p, outcomes)
        line = "  pair_b escalated together with pair_a ({})"
        assert line.format("escalated" if order[0] == "innocent" else "done") in status_lines(state)
        assert state.states["innocent"].status == "done"

    asyncio.run(scenario())
