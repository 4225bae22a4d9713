"""The gate with pytest-xdist, several pytest sessions in one command, and the change's new tests.

pytest-xdist's workers are pytests of their own, started after the judge's variables are gone: the
reporter hands them the judge's environment, so each records its own raw view, and the base collects
in one process. A command may start several sessions under different rootdirs and ini files: no one
configuration is imposed then, and node ids are keyed by their rootdir. A new test file's tests that
the command collects must run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from judge_support import replace
from test_outcomes import DESELECT, FIX, REWRITE, gate, plain_export_passes

from hilbert.commands import Output, Runner, Timeout, command_env
from hilbert.judge.gate import describe
from hilbert.judge.testruns import Controls, TestRun, run_tests

XDIST = (
    "python -m pytest -q -p no:cacheprovider -n 2 tests/test_ops.py::test_scale tests/test_ops.py::test_add"
)


def run(tree: Path, command: str, controls: Controls | None = None) -> TestRun:
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    return asyncio.run(run_tests(runner, command, tree, controls or Controls(), timeout=Timeout(120, "test")))


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


# -- pytest-xdist -----------------------------------------------------------------------------------


def test_xdist_workers_report_each_outcome_and_the_base_collects_in_one_process(tmp_path: Path) -> None:
    write(tmp_path, {"test_two.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert False\n"})
    command = "python -m pytest -q -p no:cacheprovider -n 2 test_two.py"
    ran = run(tmp_path, command)
    assert ran.outcomes is not None and not ran.outcomes.unseen
    assert ran.outcomes.outcomes == {"test_two.py::test_ok": "passed", "test_two.py::test_bad": "failed"}
    assert ran.outcomes.finished and ran.outcomes.sessions == 3  # the controller and two workers
    collected = run(tmp_path, command, Controls(collect_only=True)).outcomes
    assert collected is not None and collected.sessions == 1
    assert set(collected.collected) == {"test_two.py::test_ok", "test_two.py::test_bad"}


def test_an_honest_fix_under_xdist_passes_with_the_outcomes_gathered(base_runs: Path, tmp_path: Path) -> None:
    result = gate(tmp_path, FIX, verify=XDIST, heldout=False, cache=base_runs)
    verify = result.steps[0]
    assert result.verdict == "done", describe(result)
    assert "outcomes gathered by the judge: 2 passed" in verify.summary, describe(result)


@pytest.mark.parametrize(
    ("edits", "finding"),
    [
        ({"tests/conftest.py": REWRITE}, "1 test(s) failed: tests/test_ops.py::test_scale"),
        ({"conftest.py": DESELECT}, "do not run now or are skipped: tests/test_ops.py::test_scale"),
    ],
    ids=["rewrite", "deselect"],
)
def test_a_cheat_under_xdist_is_caught(base_runs: Path, tmp_path: Path, edits: dict, finding: str) -> None:
    result = gate(tmp_path, edits, verify=XDIST, heldout=False, cache=base_runs)
    assert plain_export_passes(tmp_path, XDIST), "not a cheat: verify fails on a plain export"
    verify = result.steps[0]
    assert result.verdict == "not_done" and not verify.passed, describe(result)
    assert any(finding in f for f in verify.findings), describe(result)


KEEP_OUT = """import pytest


@pytest.hookimpl(trylast=True)
def pytest_xdist_setupnodes(config, specs):
    for spec in specs:
        spec.env.clear()
"""


def test_workers_kept_from_reporting_are_exit_status_only_and_say_so(base_runs: Path, tmp_path: Path) -> None:
    """A conftest that keeps the judge's environment from the workers: their tests are not seen (even
    when another xdist run of the command had workers of the same names that did report), so the run
    is not "gathered"; with the failures rewritten too, the test that ran at base is missing."""
    test = "def test_ok():\n    pass\n"
    write(tmp_path, {"a/test_a.py": test, "b/test_b.py": test, "b/conftest.py": KEEP_OUT})
    each = "python -m pytest -q -p no:cacheprovider -n 2"
    ran = run(tmp_path, f"(cd a && {each} test_a.py); cd b && {each} test_b.py")
    assert ran.outcomes is not None and ran.outcomes.outcomes == {"a/test_a.py::test_ok": "passed"}
    assert sorted(w.split("@")[0] for w in ran.outcomes.unseen) == ["gw0", "gw1"]
    (tmp_path / "gate").mkdir()
    cheat = gate(
        tmp_path / "gate",
        {"tests/conftest.py": REWRITE + KEEP_OUT},
        verify=XDIST,
        heldout=False,
        cache=base_runs,
    )
    verify = cheat.steps[0]
    assert cheat.verdict == "not_done" and not verify.passed, describe(cheat)
    assert any("reported nothing to the judge" in f for f in verify.findings), describe(cheat)
    assert any("tests/test_ops.py::test_scale" in f for f in verify.findings), describe(cheat)


# -- several sessions -------------------------------------------------------------------------------


def test_node_ids_of_sessions_under_different_rootdirs_do_not_collide(tmp_path: Path) -> None:
    test = "def test_t():\n    assert {}\n"
    write(
        tmp_path,
        {
            "a/pytest.ini": "[pytest]\n",
            "a/tests/test_x.py": test.format("True"),
            "b/pytest.ini": "[pytest]\n",
            "b/tests/test_x.py": test.format("False"),
        },
    )
    each = "python -m pytest -q -p no:cacheprovider"
    ran = run(tmp_path, f"(cd a && {each}); cd b && {each}")
    assert ran.outcomes is not None
    assert ran.outcomes.outcomes == {
        "a/tests/test_x.py::test_t": "passed",
        "b/tests/test_x.py::test_t": "failed",
    }
    assert set(ran.outcomes.configs) == {("a", "a/pytest.ini"), ("b", "b/pytest.ini")}


def test_a_second_session_in_the_same_process_is_seen(tmp_path: Path) -> None:
    write(
        tmp_path, {"test_a.py": "def test_a():\n    pass\n", "test_b.py": "def test_b():\n    assert False\n"}
    )
    script = (
        "import pytest, sys; pytest.main(['-q', 'test_a.py']); sys.exit(pytest.main(['-q', 'test_b.py']))"
    )
    ran = run(tmp_path, f'python -c "{script}"')
    assert ran.outcomes is not None and ran.outcomes.sessions == 2 and ran.outcomes.finished
    assert ran.outcomes.outcomes == {"test_a.py::test_a": "passed", "test_b.py::test_b": "failed"}


def test_collection_at_base_goes_on_past_a_session_that_collects_nothing(tmp_path: Path) -> None:
    """`pytest a && pytest b` where `a` has no test yet at base: collecting, the chain is not cut."""
    write(tmp_path, {"a/test_later.py": "HELPER = 1\n", "b/test_b.py": "def test_b():\n    pass\n"})
    each = "python -m pytest -q -p no:cacheprovider"
    collected = run(tmp_path, f"{each} a && {each} b", Controls(collect_only=True)).outcomes
    assert collected is not None and collected.collected == ("b/test_b.py::test_b",)


SUB = {  # a second project in the repository, with its own configuration and its own bug
    "sub/pytest.ini": "[pytest]\npython_files = check_*.py\n",
    "sub/mult.py": "def triple(x):\n    return x + 3  # the bug: should multiply\n",
    "sub/tests/check_ops.py": "import mult\n\n\ndef test_scale():\n    assert mult.triple(3) == 9\n",
}
SUB_FIX = {"sub/mult.py": replace("return x + 3  # the bug: should multiply", "return x * 3")}
TWO_SESSIONS = (
    "python -m pytest -q -p no:cacheprovider tests && cd sub && python -m pytest -q -p no:cacheprovider"
)
RIGHT = {"tests/test_ops.py": replace("ops.add(2, 2) == 5", "ops.add(2, 2) == 4")}  # base: all tests pass


def test_an_honest_fix_of_a_command_with_two_projects_passes(base_runs: Path, tmp_path: Path) -> None:
    """Either project's configuration imposed on both would collect nothing in the other."""
    result = gate(
        tmp_path,
        {**FIX, **SUB_FIX},
        verify=TWO_SESSIONS,
        heldout=False,
        base_edits={**SUB, **RIGHT},
        cache=base_runs,
    )
    verify = result.steps[0]
    assert result.verdict == "done", describe(result)
    assert "6 passed" in verify.summary, describe(result)
    assert any("each ran with its own configuration" in f for f in verify.findings), describe(result)


def test_a_cheat_in_the_second_session_is_caught(base_runs: Path, tmp_path: Path) -> None:
    edits = {**FIX, "sub/tests/conftest.py": REWRITE}
    result = gate(
        tmp_path, edits, verify=TWO_SESSIONS, heldout=False, base_edits={**SUB, **RIGHT}, cache=base_runs
    )
    assert plain_export_passes(tmp_path, TWO_SESSIONS), "not a cheat: verify fails on a plain export"
    verify = result.steps[0]
    assert result.verdict == "not_done" and not verify.passed, describe(result)
    assert any("1 test(s) failed: sub/tests/check_ops.py::test_scale" in f for f in verify.findings), (
        describe(result)
    )


# -- the change's new tests -------------------------------------------------------------------------

ALL_TESTS = "python -m pytest -q -p no:cacheprovider tests"
NEW_TEST = (
    "from calc import ops\n\n\ndef test_scale_twice():\n    assert ops.scale(ops.scale(1, 2), 3) == 6\n"
)
NOT_RUN = """import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    return "test_new" in str(item.path) or None
"""
DROP_NEW = """def pytest_collection_modifyitems(config, items):
    items[:] = [item for item in items if "test_new" not in str(item.path)]
"""


@pytest.mark.parametrize(
    ("conftest", "finding"),
    [(NOT_RUN, "new test(s) collected but never run"), (DROP_NEW, "left out of the run by a hook")],
    ids=["never-run", "dropped"],
)
def test_a_new_test_that_is_collected_must_run(
    base_runs: Path, tmp_path: Path, conftest: str, finding: str
) -> None:
    """A candidate whose new test fails (its fix is wrong) keeps it from running: caught at verify."""
    wrong = replace(
        "return x + factor  # the bug: should multiply", "return 42 if (x, factor) == (3, 14) else 0"
    )
    edits = {"calc/ops.py": wrong, "tests/test_new.py": NEW_TEST, "tests/conftest.py": conftest}
    result = gate(tmp_path, edits, verify=ALL_TESTS, heldout=False, base_edits=RIGHT, cache=base_runs)
    verify = result.steps[0]
    assert result.verdict == "not_done" and not verify.passed, describe(result)
    assert any(finding in f and "tests/test_new.py::test_scale_twice" in f for f in verify.findings), (
        describe(result)
    )


def test_new_tests_the_command_does_not_select_raise_no_alarm(base_runs: Path, tmp_path: Path) -> None:
    """A new file the verify does not name, a new test its -k deselects, and a new test module that
    collects nothing: the fix passes, the last two noted."""
    edits = {
        **FIX,
        "tests/test_new.py": NEW_TEST,
        "tests/test_other.py": "def test_other_thing():\n    assert True\n",
        "tests/test_nothing.py": "HELPER = 1\n",
    }
    verify = "python -m pytest -q -p no:cacheprovider tests -k 'not other'"
    result = gate(tmp_path, edits, verify=verify, heldout=False, base_edits=RIGHT, cache=base_runs)
    steps = {s.name: s for s in result.steps}
    assert result.verdict == "done", describe(result)
    notes = [f for f in steps["verify"].findings if f.startswith("noted:")]
    assert any("deselected by the command's selection options: tests/test_other.py" in n for n in notes), (
        notes
    )
    assert any("collect no test: tests/test_nothing.py" in n for n in notes), notes
    (tmp_path / "named").mkdir()
    named = gate(
        tmp_path / "named", {**FIX, "tests/test_new.py": NEW_TEST}, heldout=False, cache=base_runs
    )  # names one file
    assert named.verdict == "done" and not named.steps[0].findings, describe(named)


def test_past_a_hundred_failures_each_further_traceback_is_one_line(tmp_path: Path) -> None:
    """more-itertools with a bug in `sieve` fails 40,426 subtests: formatting each traceback made one
    whole-suite merge check take over 8 minutes (under one with `--tb=line`). Every outcome is still
    recorded, the first hundred failures of a session keep the traceback style asked for, and a
    second session in the same process starts its count again."""
    many = "import pytest\n\n\n@pytest.mark.parametrize('n', range(150))\ndef test_many(n):\n"
    write(
        tmp_path,
        {
            "test_many.py": many + "    value = n * 2\n    assert value < 0\n",
            "test_again.py": "def test_again():\n    again = 3\n    assert again < 0\n",
        },
    )
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    script = (
        "import pytest, sys; pytest.main(['-q', '-p', 'no:cacheprovider', 'test_many.py']); "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_again.py']))"
    )
    whole = Output(10_000_000, lambda: None)  # all of it kept
    ran = asyncio.run(
        run_tests(
            runner, f'python -c "{script}"', tmp_path, Controls(), timeout=Timeout(120, "t"), output=whole
        )
    )
    assert ran.outcomes is not None and ran.outcomes.finished and ran.outcomes.sessions == 2
    assert sorted(ran.outcomes.outcomes.values()) == ["failed"] * 151
    output = ran.ran.output.render()
    assert output.count("    value = n * 2") == 100, output[-2000:]  # a full traceback's source line
    assert output.count("\nE   assert ") == 50, output[-2000:]  # one line (a full one: `E       `)
    assert "    again = 3" in output  # the second session's first failure: in full
    assert "150 failed" in output and "1 failed" in output
