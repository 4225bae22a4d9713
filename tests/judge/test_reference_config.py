"""The base as the reference for how tests run: its configuration, its cache, and the perturbed step.

Each test here was a hole or a false alarm a review found: a candidate's marker line that wrote a key
of its own into the imposed configuration, a verify script that hid pytest from the reporter, base runs
cached when they had not finished (or read back whatever their shape), `required_plugins` failing
when plugins are loaded by name, an order that moved the tests base and head share, a flip with no
base comparison, a renamed conftest put back at its new path, and a base configuration lost to a
strict reader.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
from pathlib import Path

import iniconfig
import pytest
from judge_support import git, make_repo, read_change, replace
from test_outcomes import CLOCK, FIX, gate, plain_export_passes

from hilbert.commands import Runner, Timeout, command_env
from hilbert.judge.evidence import Step
from hilbert.judge.gate import GateResult, describe
from hilbert.judge.gate_steps import Reference, Result, Steps, heldout_command
from hilbert.judge.perturb import Perturbation, faketime_library
from hilbert.judge.pytest_config import base_options, compose_ini, read_options
from hilbert.judge.testruns import Controls, run_tests
from hilbert.security.sandbox import Sandbox
from hilbert.settings import TimeoutSettings
from hilbert.workspaces.git import Git

TESTS = "python -m pytest -q tests"
RIGHT = {"tests/test_ops.py": replace("ops.add(2, 2) == 5", "ops.add(2, 2) == 4")}  # base: all but scale pass
STRICT = replace('testpaths = ["tests"]\n', 'testpaths = ["tests"]\naddopts = "--strict-markers"\n')


def step(result: GateResult, name: str) -> Step:
    return next(s for s in result.steps if s.name == name)


# -- 1. the candidate's markers declare names, nothing else -----------------------------------------


def injected_markers(*lines: str) -> str:
    return "[tool.pytest.ini_options]\nmarkers = [" + ", ".join(json.dumps(line) for line in lines) + "]\n"


def test_a_marker_line_cannot_write_a_key_of_its_own_into_the_imposed_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        injected_markers(
            "arithmetic: plain sums\naddopts = -k nothing",
            "slow: takes a while\u2028python_files = nothing_*.py",  # a break only some readers know
            "integration(kind): talks to the network",
        )
    )
    ini = compose_ini({"testpaths": ["tests"]}, ".", tmp_path)
    parsed = iniconfig.IniConfig("imposed.ini", data=ini)
    assert set(parsed.sections["pytest"]) == {"testpaths", "markers"}, ini
    markers = parsed["pytest"]["markers"].splitlines()
    assert markers == [
        "arithmetic: plain sums",
        "slow: takes a while",
        "integration(kind): talks to the network",
    ]


ARITHMETIC_TEST = """import pytest

from calc import ops


@pytest.mark.arithmetic
def test_scale_by_seven():
    assert ops.scale(6, 7) == 42
"""


def test_an_injected_marker_line_changes_nothing_that_runs_and_honest_markers_still_register(
    base_runs: Path,
    tmp_path: Path,
) -> None:
    """The base runs with --strict-markers; the candidate declares a marker its new test uses, and
    hides `python_files = nothing_*` in another marker's text. The marker registers, the hidden key
    does not reach the run (it would collect nothing), and the step notes the refused line."""
    pyproject = replace(
        'addopts = "--strict-markers"\n',
        'addopts = "--strict-markers"\n'
        + 'markers = ["arithmetic: plain sums", "fast: quick\\npython_files = nothing_*.py"]\n',
    )
    edits = {**FIX, "pyproject.toml": pyproject, "tests/test_more_ops.py": ARITHMETIC_TEST}
    result = gate(
        tmp_path,
        edits,
        verify=TESTS,
        heldout=False,
        base_edits={**RIGHT, "pyproject.toml": STRICT},
        cache=base_runs,
    )
    verify = step(result, "verify")
    assert result.verdict == "done", describe(result)
    assert "6 passed" in verify.summary, describe(result)
    assert any(f.startswith("noted:") and "python_files" in f for f in verify.findings), describe(result)


# -- 2. a verify that does not name pytest is still compared with the base --------------------------

SHADOW = "import sys\n\nsys.exit(0)  # a `pytest` module of the project's own: `python -m pytest` runs this\n"
HIDDEN = "#!/bin/sh\nunset PYTEST_ADDOPTS\npython -m pytest -q tests/test_ops.py::test_add\n"


@pytest.mark.parametrize(
    ("verify", "edits"),
    [("make test", {"pytest.py": SHADOW}), ("bash scripts/check.sh", {"scripts/check.sh": HIDDEN})],
    ids=["a module named pytest shadows it", "the script unsets PYTEST_ADDOPTS"],
)
def test_a_verify_that_ran_pytest_at_base_and_reports_none_at_head_fails(
    base_runs: Path, tmp_path: Path, verify: str, edits: dict
) -> None:
    result = gate(tmp_path, edits, verify=verify, heldout=False, cache=base_runs)
    assert plain_export_passes(tmp_path, verify), "not a cheat: verify fails on a plain export"
    first = step(result, "verify")
    assert result.verdict == "not_done" and not first.passed, describe(result)
    assert any("ran pytest at base, but no pytest reported at head" in f for f in first.findings)


# -- 3. the cache keeps only runs that finished, and reads back only what has the right shape -------


def steps_on(repo: Path, where: Path, runner: Runner, cache: Path) -> Steps:
    (where / "home").mkdir(parents=True, exist_ok=True)
    base = git(repo, "rev-parse", "HEAD")
    return Steps(
        repo, where / "scratch", Git(home=where / "home"), runner, None, base=base, head=base, cache=cache
    )


def plain_runner(**timeouts: float) -> Runner:
    return Runner.unsandboxed(command_env(hilbert_python_first=True), timeouts=TimeoutSettings(**timeouts))


@pytest.mark.parametrize("how", ["timed out", "refused"])
def test_a_base_run_that_did_not_finish_is_not_cached(tmp_path: Path, how: str) -> None:
    repo, cache = make_repo(tmp_path), tmp_path / "cache"
    ready = tmp_path / "ready"
    command = f"test -f {shlex.quote(str(ready))} || sleep 60; {TESTS}"
    if how == "timed out":
        first_runner = plain_runner(verify_s=1.5)
    else:
        first_runner = Runner(Sandbox("refuse", why="no sandbox on this machine"), command_env())
    first = asyncio.run(steps_on(repo, tmp_path / "1", first_runner, cache).reference(command))
    assert first.outcomes is None and first.unfinished.startswith(how)  # the verify step notes it
    ready.touch()
    second = asyncio.run(steps_on(repo, tmp_path / "2", plain_runner(), cache).reference(command))
    assert second.outcomes is not None and "tests/test_ops.py::test_add" in second.outcomes.collected


def test_a_cache_entry_of_the_wrong_shape_is_ignored_and_made_again(tmp_path: Path) -> None:
    repo, cache = make_repo(tmp_path), tmp_path / "cache"

    async def both(steps: Steps) -> tuple[Reference, Result]:
        reference = await steps.reference(TESTS)
        return reference, await steps.at_base(TESTS, None, reference, perturbed=False)

    reference, at_base = asyncio.run(both(steps_on(repo, tmp_path / "1", plain_runner(), cache)))
    assert reference.outcomes is not None and at_base.table()["tests/test_ops.py::test_scale"] == "failed"
    entries = sorted(cache.glob("*.json"))
    bad = {"ok": "yes", "outcomes": {"collected": 5, "outcomes": []}, "options": ["x"], "where": 3}
    for entry in entries:
        entry.write_text(json.dumps(bad))
    again = asyncio.run(both(steps_on(repo, tmp_path / "2", plain_runner(), cache)))
    assert again[0] == reference and again[1].table() == at_base.table()
    assert len(entries) == 2 and all(json.loads(entry.read_text()) != bad for entry in entries)


CLOCK_TEST = "import time\n\n\ndef test_now():\n    assert time.time() > 1.7e9\n"


@pytest.mark.skipif(faketime_library() is None, reason="libfaketime is not installed (make faketime)")
def test_a_kept_base_run_is_not_reused_for_changed_held_out_tests_or_other_conditions(tmp_path: Path) -> None:
    """The key of a run at base is the held-out tests' contents (not their folder's name) and every
    parameter of the perturbation (not only its seed)."""
    repo, cache = make_repo(tmp_path), tmp_path / "cache"
    heldout = tmp_path / "heldout"
    heldout.mkdir()
    test = heldout / "test_more.py"
    drawn = Perturbation.draw("7")

    def at_base(where: str, perturbation: Perturbation, perturbed: bool) -> str:
        (tmp_path / where / "home").mkdir(parents=True)
        steps = Steps(
            repo,
            tmp_path / where / "scratch",
            Git(home=tmp_path / where / "home"),
            plain_runner(),
            None,
            base=git(repo, "rev-parse", "HEAD"),
            head=git(repo, "rev-parse", "HEAD"),
            cache=cache,
            perturbation=perturbation,
        )

        command = heldout_command(heldout)

        async def run() -> Result:
            reference = await steps.reference(command)
            return await steps.at_base(command, heldout, reference, perturbed=perturbed)

        return asyncio.run(run()).table()[".hilbert-heldout/test_more.py::test_more"]

    test.write_text("def test_more():\n    assert True\n")
    assert at_base("1", drawn, perturbed=False) == "passed"
    test.write_text("def test_more():\n    assert False\n")  # changed in place
    assert at_base("2", drawn, perturbed=False) == "failed"
    test.write_text(CLOCK_TEST.replace("test_now", "test_more"))
    assert at_base("3", dataclasses.replace(drawn, clock_days=500), perturbed=True) == "passed"
    assert at_base("4", dataclasses.replace(drawn, clock_days=-2000), perturbed=True) == "failed"


# -- 4a. required_plugins: the base's plugins are loaded by name ------------------------------------


def test_a_base_that_requires_an_installed_plugin_does_not_fail_an_honest_fix(
    base_runs: Path, tmp_path: Path
) -> None:
    requires = replace(
        'testpaths = ["tests"]\n', 'testpaths = ["tests"]\nrequired_plugins = ["pytest-timeout"]\n'
    )
    base = {**RIGHT, "pyproject.toml": requires}
    result = gate(tmp_path, FIX, verify=TESTS, heldout=False, base_edits=base, cache=base_runs)
    assert result.verdict == "done", describe(result)
    assert "5 passed" in step(result, "verify").summary


# -- 4b. the perturbed order keeps the relative order of the tests base and head share --------------


def collected_in_order(tree: Path, seed: str) -> list[str]:
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    command = "python -m pytest -q -p no:cacheprovider ."
    controls = Controls(collect_only=True, order=seed)
    run = asyncio.run(run_tests(runner, command, tree, controls, timeout=Timeout(120, "test")))
    assert run.outcomes is not None, run.ran.text(tree)
    return list(run.outcomes.collected)


def test_the_tests_base_and_head_share_keep_their_relative_order_under_one_seed(tmp_path: Path) -> None:
    shared = "".join(f"def test_shared_{i}():\n    pass\n\n\n" for i in range(12))
    added = "".join(f"def test_added_{i}():\n    pass\n\n\n" for i in range(12))
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    (tmp_path / "base" / "test_shared.py").write_text(shared)
    (tmp_path / "head" / "test_shared.py").write_text(shared + added)
    (tmp_path / "head" / "test_new.py").write_text(added)
    at_base = collected_in_order(tmp_path / "base", "1234")
    at_head = collected_in_order(tmp_path / "head", "1234")
    assert at_base != [f"test_shared.py::test_shared_{i}" for i in range(12)]  # shuffled all the same
    assert [nodeid for nodeid in at_head if nodeid in set(at_base)] == at_base
    assert len(at_head) == 36


# -- 4c. the perturbed step: held-out runs as in their normal run; flips with no base comparison -----

IN_STEPS = "SEEN = []\n\n\n" + "".join(f"def test_step_{i}():\n    SEEN.append({i})\n\n\n" for i in range(6))
EVERY_STEP = (  # collected after test_steps.py; shares its module (prepend import mode: tests/ on sys.path)
    "from test_steps import SEEN\n\n\ndef test_every_step_ran_first():\n    assert SEEN == list(range(6))\n"
)


def test_a_new_test_that_relies_on_the_others_running_first_is_noted_not_rejected(
    base_runs: Path, tmp_path: Path
) -> None:
    """A new test that counts on the tests collected before it (which exist at base too) fails in a
    shuffled order; it has no outcome at base to compare, and passes in the usual order under the same
    perturbation: noted, not a finding."""
    base = {**RIGHT, "tests/test_steps.py": IN_STEPS}
    edits = {**FIX, "tests/test_steps_after.py": EVERY_STEP}
    result = gate(
        tmp_path,
        edits,
        verify=TESTS,
        heldout=False,
        base_edits=base,
        perturbation=Perturbation.draw("1"),
        cache=base_runs,
    )
    perturbed = step(result, "perturbed")
    assert result.verdict == "done", describe(result)
    assert any(
        f.startswith("noted: tests/test_steps_after.py::test_every_step_ran_first")
        and "the shuffled order only" in f
        for f in perturbed.findings
    ), describe(result)


PIN_CLOCK = """import time

import pytest


@pytest.fixture(autouse=True)
def _steady_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1.8e9)
"""


@pytest.mark.skipif(faketime_library() is None, reason="libfaketime is not installed (make faketime)")
def test_the_perturbed_held_out_run_has_no_candidate_conftest_as_the_normal_one(
    base_runs: Path, tmp_path: Path
) -> None:
    """Product code that works only around today's date, and a conftest that pins the clock: the
    held-out tests run without the candidate's conftests, in the perturbed run as in the normal one,
    so the moved clock reaches the product there."""
    moved = dataclasses.replace(Perturbation.draw("2"), clock_days=-2000)
    assert moved.clock(), "the clock is not moved: no test may leave libfaketime's lookup cached as missing"
    result = gate(
        tmp_path, {"calc/ops.py": CLOCK, "conftest.py": PIN_CLOCK}, perturbation=moved, cache=base_runs
    )
    perturbed = step(result, "perturbed")
    assert result.verdict == "not_done" and not perturbed.passed, describe(result)
    assert any(f.startswith("a held-out test passes as usual") for f in perturbed.findings)


# -- 4d. a renamed conftest is put back under its old name ------------------------------------------

CASES_AT_BASE = '''"""Fixtures for the tests in this folder: the sample cases, read from the data folder."""

from pathlib import Path

import pytest


@pytest.fixture
def cases():
    """The sample cases: one line of three numbers."""
    return (Path(__file__).parent / "data" / "cases.txt").read_text().split()
'''
CASES_TEST = "def test_the_cases(cases):\n    assert cases == ['3', '14', '42']\n"


def test_a_conftest_moved_to_the_top_is_put_back_where_it_was(base_runs: Path, tmp_path: Path) -> None:
    moved = CASES_AT_BASE.replace(
        'Path(__file__).parent / "data"', 'Path(__file__).parent / "tests" / "data"'
    )
    base = {**RIGHT, "tests/conftest.py": CASES_AT_BASE, "tests/test_cases.py": CASES_TEST}
    edits = {**FIX, "tests/conftest.py": None, "conftest.py": moved}
    result = gate(tmp_path, edits, verify=TESTS, base_edits=base, cache=base_runs)
    repo = tmp_path / "repo"
    renamed = read_change(repo, git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")).files
    assert [(f.old_path, f.path, f.status) for f in renamed if f.path == "conftest.py"] == [
        ("tests/conftest.py", "conftest.py", "renamed")
    ]
    assert result.verdict == "done", describe(result)
    assert step(result, "infra_removed").passed


# -- 4e. the base's configuration read as leniently as the tools that share its file ------------------


def test_a_base_configuration_with_duplicates_or_a_byte_order_mark_keeps_its_options(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = calc\nname = calc-tools\n\n[tool:pytest]\naddopts = --strict-markers\n"
        "[tool:pytest]\ntestpaths = tests\n"
    )
    (tmp_path / "tox.ini").write_text("\ufeff[pytest]\naddopts = -ra\nAddopts = -q\n", encoding="utf-8")
    assert base_options(tmp_path, "setup.cfg") == ({"addopts": "--strict-markers", "testpaths": "tests"}, ".")
    assert read_options(tmp_path / "tox.ini") == {"addopts": "-ra", "Addopts": "-q"}  # keys keep their case
