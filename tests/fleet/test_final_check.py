"""The run's last look (`hilbert.fleet.final_check`): the whole suite on a clean checkout of the
integration tip against the base. Only failures new since base become a repair task (once, by
default); what failed at base too, and what passes when run again, is listed instead.

The fleet test's trigger is a real way for a suite to pass in the merge queue and fail on a clean
checkout: T1's verify writes a file git ignores, and the test T1 adds reads it. The merge checks run
verify first, in the same tree, so they pass; the final check's clean tree has no such file."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fleet_support import ENV, commit_all

from hilbert.commands import Runner
from hilbert.fleet.crash import Crashes
from hilbert.fleet.final_check import EXIT, Findings, Suite, compare, summary
from hilbert.fleet.outcomes import FleetResult
from hilbert.fleet.person import fixed_meanwhile
from hilbert.fleet.person import summary as person_summary
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.fleet.state import Fold
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply
from hilbert.ui.fleet_views import runs_table


def test_only_failures_new_since_base_that_fail_twice_are_new() -> None:
    base = Suite(False, ("t::old",), gathered=True)
    tip = Suite(False, ("t::broken", "t::old", "t::wobbly"), gathered=True)
    again = Suite(False, ("t::broken", "t::old"), gathered=True)
    found = compare(base, tip, again)
    assert (found.new, found.flaky, found.preexisting) == (("t::broken",), ("t::wobbly",), ("t::old",))
    # a command without pytest: its exit status is the one test
    red, green = Suite(False, (EXIT,), gathered=False), Suite(True, (), gathered=False)
    assert compare(green, red, red).new == (EXIT,)
    assert compare(green, red, green).flaky == (EXIT,)
    assert compare(red, red, None).preexisting == (EXIT,)
    assert compare(green, green, None) == Findings()
    assert compare(base, base, None) == Findings(preexisting=("t::old",))


BUILD_NEEDS_A_STAMP = """from pathlib import Path


def stamp() -> Path:
    return Path("build/stamp")
"""
BUILD_MAKES_ITS_STAMP = """from pathlib import Path


def stamp() -> Path:
    path = Path("build/stamp")
    path.parent.mkdir(exist_ok=True)
    path.touch()
    return path
"""
TEST_BUILD = """from build import stamp


def test_the_stamp_is_there():
    assert stamp().exists()
"""


class Workers:
    """T1's worker adds build.py and its test (which pass only after T1's verify made the stamp); the
    repair task's worker makes build.py write its stamp itself."""

    name = "final-check-workers"

    def __init__(self) -> None:
        self.briefs: dict[str, str] = {}

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        task_id = (re.search(r"^Task ([\w-]+):", brief, re.MULTILINE) or [None, "?"])[1]
        self.briefs[task_id] = brief
        writes = {
            "T1": [("build.py", BUILD_NEEDS_A_STAMP), ("test_build.py", TEST_BUILD)],
            "repair-1": [("build.py", BUILD_MAKES_ITS_STAMP)],
        }.get(task_id, [])
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn < len(writes):
            path, content = writes[turn]
            call = ToolCall(f"c_{task_id}_{turn}", "write_file", {"path": path, "content": content})
        else:
            call = ToolCall(f"c_{task_id}_{turn}", "finish", {"claim": "done", "evidence": "tests pass"})
        return Reply(tool_calls=(call,))


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / ".gitignore").write_text("build/\n__pycache__/\n")
    (path / "test_old.py").write_text("def test_old_and_red():\n    assert 1 == 2\n")
    commit_all(path)
    return path


PLAN = Plan(
    goal="add the build stamp",
    tasks=(
        Task(
            id="T1",
            title="Add build.py",
            verify="mkdir -p build && touch build/stamp && python -m pytest -q test_build.py",
        ),
    ),
)


def fleet(tmp_path: Path, url: str, *, resume: bool = False, crash: str = "") -> FleetResult:
    with EventStore.open(tmp_path / "log.db") as store:
        return asyncio.run(
            run_fleet(
                None if resume else PLAN,
                repo=None if resume else tmp_path / "repo",
                root=tmp_path / "run",
                run="r",
                model=make_model(f"openai:w@{url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of(
                    {"fleet.workers": 1, "gate.rounds": 1, "commands.test": "python -m pytest -q"}
                ),
                resume=resume,
                crashes=Crashes(crash),
            )
        )


@pytest.mark.parametrize("killed", [False, True], ids=["whole", "killed-after-the-check"])
def test_a_failure_only_a_clean_checkout_shows_becomes_a_repair_task_and_the_branch_ends_green(
    tmp_path: Path, killed: bool
) -> None:
    """Killed right after the check that found the failure, the resumed run still repairs it."""
    workers = Workers()
    _repo(tmp_path / "repo")
    with FakeServer(workers) as server:
        if killed:  # in a process of its own: the crash point SIGKILLs it
            here, url = str(Path(__file__).parent), server.openai_base_url
            child = (
                f"import sys, pathlib; sys.path[:0] = [{here!r}]; from test_final_check import fleet; "
                f"fleet(pathlib.Path({str(tmp_path)!r}), {url!r}, crash='final_checked:1')"
            )
            died = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
            assert died.returncode == -9, died.stderr[-2000:]
        result = fleet(tmp_path, server.openai_base_url, resume=killed)
    with EventStore.open(tmp_path / "log.db") as store:
        checks = [e.data for e in store.events(run="r", kinds=["final_checked"])]
        bases = [e.data for e in store.events(run="r", kinds=["final_base"])]
    # at base only the old test fails; it is listed, never a task
    assert len(bases) == 1 and bases[0]["failing"] == ["test_old.py::test_old_and_red"], bases
    first, second = checks
    assert first["new"] == ["test_build.py::test_the_stamp_is_there"] and first["repair"] == "repair-1", first
    assert first["preexisting"] == ["test_old.py::test_old_and_red"]
    brief = workers.briefs["repair-1"]
    assert "test_build.py::test_the_stamp_is_there" in brief and "clean checkout" in brief
    assert result.states["repair-1"].status == "done" and result.states["T1"].status == "done"
    assert second["new"] == [] and second["repair"] == "" and second["tip"] == result.integration_tip
    assert second["preexisting"] == ["test_old.py::test_old_and_red"]
    assert result.final is not None and result.final.tip == result.integration_tip
    lines = summary(result.final)
    assert "failing at base too (not this run's): test_old.py::test_old_and_red" in "\n".join(lines), lines


def test_with_no_repair_rounds_the_new_failure_is_listed_and_nothing_is_added(tmp_path: Path) -> None:
    workers = Workers()
    plan = Plan(
        goal="g",
        tasks=(
            Task(
                id="T1",
                title="Add build.py",
                verify="mkdir -p build && touch build/stamp && python -m pytest -q test_build.py",
            ),
        ),
    )
    settings: dict[str, Any] = {
        "fleet.workers": 1, "gate.rounds": 1, "commands.test": "python -m pytest -q",
        "fleet.final_repair_rounds": 0,
    }  # fmt: skip
    with FakeServer(workers) as server, EventStore.open(tmp_path / "log.db") as store:
        result = asyncio.run(
            run_fleet(
                plan, repo=_repo(tmp_path / "repo"), root=tmp_path / "run", run="r",
                model=make_model(f"openai:w@{server.openai_base_url}", env={}), store=store,
                runner=Runner.unsandboxed(ENV), settings=Settings.of(settings),
            )
        )  # fmt: skip
    assert set(result.states) == {"T1"} and result.final is not None
    assert result.final.new == ["test_build.py::test_the_stamp_is_there"] and not result.final.repair
    assert (
        "NEW failures (they passed at base): test_build.py::test_the_stamp_is_there"
        in summary(result.final)[1]
    )


class OneFixesBoth:
    """T1's worker fixes `double`; T2's worker (same tests) claims done at once and gives up; T3's
    worker edits the test its check runs (which passes before and after)."""

    name = "one-fixes-both"

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if "Task T1:" in brief and turn == 0:
            fixed = "def double(x):\n    return 2 * x\n"
            return Reply(tool_calls=(ToolCall("c1", "write_file", {"path": "calc.py", "content": fixed}),))
        if "Task T3:" in brief and turn == 0:  # edits a test: the gate refuses it, its check passes
            edited = "def test_other():\n    assert 1\n"
            return Reply(
                tool_calls=(ToolCall("c3", "write_file", {"path": "test_other.py", "content": edited}),)
            )
        done = {"claim": "done", "evidence": "it passes"}
        return Reply(tool_calls=(ToolCall(f"c_{turn}", "finish", done),))


def test_a_task_given_up_whose_check_passes_at_the_tip_is_said_to_need_nothing(tmp_path: Path) -> None:
    """cachetools, seed 18: tasks given up before another task's merge fixed their tests were listed as
    needing the person. The final check runs each given-up task's check at the tip; the run's last
    lines, `hilbert status` and the PR description say it passes there, with nothing to retry. A task
    given up whose check passed at base too (the gate refused it for something else) still needs the
    person."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def double(x):\n    return 2 + x\n")
    (repo / "test_calc.py").write_text(
        "from calc import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    )
    (repo / "test_other.py").write_text("def test_other():\n    assert True\n")
    commit_all(repo)
    verify = "python -m pytest -q test_calc.py"
    other = "python -m pytest -q test_other.py"
    after = Task(id="T4", title="after T2", verify=verify, depends_on=("T2",))
    plan = Plan(goal="g", tasks=(Task(id="T1", title="fix double", verify=verify),
                                 Task(id="T2", title="make double right", verify=verify),
                                 Task(id="T3", title="other", verify=other), after))  # fmt: skip
    settings = {"fleet.workers": 3, "fleet.max_attempts": 1, "gate.rounds": 1, "commands.test": verify}
    with FakeServer(OneFixesBoth()) as server, EventStore.open(tmp_path / "log.db") as store:
        result = asyncio.run(
            run_fleet(
                plan, repo=repo, root=tmp_path / "run", run="r",
                model=make_model(f"openai:w@{server.openai_base_url}", env={}), store=store,
                runner=Runner.unsandboxed(ENV), settings=Settings.of(settings),
            )
        )  # fmt: skip
        state = Fold(store, "r").catch_up()
    statuses = {task: result.states[task].status for task in ("T1", "T2", "T3", "T4")}
    assert statuses == {"T1": "done", "T2": "needs_you", "T3": "needs_you", "T4": "pending"}, result.states
    # T4 waits on T2 when the run ends (as a split task on its parts, cachetools seed 23): checked too
    assert result.final is not None and result.final.passing == ["T2", "T4"]
    assert not result.all_done  # T3 needs the person; without it, the run would exit 0
    assert replace(result, states={k: v for k, v in result.states.items() if k != "T3"}).all_done
    assert [line.split(":")[0] for line in person_summary(state) if "needs you" in line] == ["  T3 needs you"]
    [line] = fixed_meanwhile(state)
    assert "given up, yet their checks pass at" in line and line.endswith("nothing to retry): T2, T4"), line
    [_header, row] = runs_table([state], {"r": 0.0}, now=1.0)
    assert row.split()[1:5] == ["finished", "1s", "1/4", "T3"], row  # NEEDS YOU: not T2, fixed by T1
