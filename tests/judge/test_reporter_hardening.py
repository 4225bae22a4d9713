"""The judge's pytest reporter cannot be shadowed or its records rewritten, the perturbed runs show the
code under test no sign of the perturbation it can read from Python, and an xfail raised in setup is an
xfail (issue 15, after review).

Each cheat below would have passed the step named on the reporter as it was: a module committed under
the reporter's name, product code that rewrites the records in the tree, a later pytest session that
loads a rewritten or shadowing reporter, and product code that tells a perturbed run by what the
perturbation leaves visible (its environment variables, a replaced `time.sleep`, an odd `sys.argv`,
`sys.orig_argv`, `PYTEST_CURRENT_TEST` in a fixture).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from judge_support import PERTURBATION, commit, git, make_repo, replace
from test_outcomes import VERIFY, gate

from hilbert.commands import Runner, Timeout, command_env
from hilbert.judge.change import Allowances
from hilbert.judge.evidence import Step
from hilbert.judge.gate import describe
from hilbert.judge.gate_steps import Steps
from hilbert.judge.perturb import Perturbation, faketime_library
from hilbert.judge.testruns import Controls, TestRun, run_tests
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import detect
from hilbert.workspaces.git import Git

COMMAND = "python -m pytest -q -p no:cacheprovider"

# -- 1. shadowing and tampering ---------------------------------------------------------------------

FAKE_REPORTER = '''"""Written against the reporter's interface (either): every test recorded as passed."""
import json
import os

_where = os.environ.pop("HILBERT_GATE_RECORDS", "")
for _name in [k for k in os.environ if k.startswith("HILBERT_GATE")]:
    os.environ.pop(_name)


def _write(kind, **fields):
    line = json.dumps({"kind": kind, "plugin": __file__, "session": "forged", **fields}) + "\\n"
    if os.path.isdir(_where):  # a folder of records
        with open(os.path.join(_where, f"{os.getpid()}.jsonl"), "a") as out:
            out.write(line)
    elif _where.split(":")[0].isdigit():  # a descriptor
        os.write(int(_where.split(":")[0]), line.encode())


def pytest_configure(config):
    _write("start", rootdir=str(config.rootpath), inifile=None, plugins=[])


def pytest_collection_finish(session):
    _write("collected", nodeids=[item.nodeid for item in session.items])
    for item in session.items:
        for when in ("setup", "call", "teardown"):
            _write("report", nodeid=item.nodeid, when=when, outcome="passed")


def pytest_sessionfinish(session, exitstatus):
    _write("finish", exitstatus=0)
    session.exitstatus = 0
'''


def test_a_module_committed_under_the_reporters_name_does_not_replace_it(
    base_runs: Path, tmp_path: Path
) -> None:
    """`python -m pytest` puts the working folder first on `sys.path`, before `PYTHONPATH`: a module
    named as the reporter at the top of the tree would be loaded by `-p` in its place."""
    result = gate(tmp_path, {"hilbert_gate_reporter.py": FAKE_REPORTER}, heldout=False, cache=base_runs)
    verify = result.steps[0]
    assert result.verdict == "not_done" and not verify.passed, describe(result)
    assert any("1 test(s) failed: tests/test_ops.py::test_scale" in f for f in verify.findings), describe(
        result
    )


REWRITES_RECORDS = replace(
    '"""Small arithmetic helpers."""\n',
    '"""Small arithmetic helpers."""\nimport atexit\nimport glob\nimport os\n\n\n'
    "def _passed():\n"
    '    for path in glob.glob(os.path.join(os.getcwd(), ".hilbert-gate-*", "**", "*"), recursive=True):\n'
    "        if os.path.isfile(path) and not path.endswith('.py'):\n"
    "            with open(path) as f:\n"
    "                text = f.read()\n"
    "            with open(path, 'w') as f:\n"
    "                f.write(text.replace('\"failed\"', '\"passed\"'))\n"
    "    os._exit(0)\n\n\n"
    "atexit.register(_passed)\n",
)


def test_product_code_that_rewrites_the_records_in_the_tree_does_not_pass_verify(
    base_runs: Path, tmp_path: Path
) -> None:
    result = gate(tmp_path, {"calc/ops.py": REWRITES_RECORDS}, heldout=False, cache=base_runs)
    verify = result.steps[0]
    assert not verify.passed, describe(result)
    assert any("1 test(s) failed: tests/test_ops.py::test_scale" in f for f in verify.findings), describe(
        result
    )


FAILING = "def test_fails():\n    assert 1 + 1 == 3\n"
TAMPERS = """import glob
import os

FAKE = {fake!r}


def test_tampers():
    for path in glob.glob(".hilbert-gate-*/hilbert_gate_*.py"):
        {action}
"""
REWRITE_PLUGIN = "open(path, 'w').write(FAKE)"
SHADOW_PLUGIN = "open(os.path.basename(path), 'w').write(FAKE)  # the working folder comes first"


def two_sessions(tmp_path: Path, action: str) -> TestRun:
    """A command that runs two pytest sessions; a test in the first changes what the second loads."""
    (tmp_path / "test_first.py").write_text(TAMPERS.format(fake=FAKE_REPORTER, action=action))
    (tmp_path / "test_second.py").write_text(FAILING)
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    command = f"{COMMAND} test_first.py; {COMMAND} test_second.py"
    return asyncio.run(run_tests(runner, command, tmp_path, Controls(), timeout=Timeout(120, "test")))


@pytest.mark.parametrize("action", [REWRITE_PLUGIN, SHADOW_PLUGIN], ids=["rewritten", "shadowed"])
def test_a_later_session_that_loads_a_changed_reporter_is_not_trusted(tmp_path: Path, action: str) -> None:
    run = two_sessions(tmp_path, action)
    assert run.outcomes is not None
    assert not run.outcomes.finished, run.outcomes  # every consumer reads it as a failure
    assert "reporter" in run.outcomes.untrusted, run.outcomes


def test_records_reach_the_judge_from_inside_the_sandbox_where_the_reporter_is_read_only(
    tmp_path: Path,
) -> None:
    sandbox = detect()
    if sandbox.kind != "bubblewrap":
        pytest.fail(
            f"no sandbox on this machine ({sandbox.why}): run `make sandbox` (see README)", pytrace=False
        )
    (tmp_path / "test_two.py").write_text(
        f"import glob\n\nimport pytest\n\n\n{FAILING}\n\n"
        "def test_cannot_rewrite_the_reporter():\n"
        "    [path] = glob.glob('.hilbert-gate-*/hilbert_gate_*.py')\n"
        "    with pytest.raises(OSError):\n"
        "        open(path, 'a').close()\n"
    )
    runner = Runner(sandbox, command_env(hilbert_python_first=True), policy=False)
    run = asyncio.run(
        run_tests(runner, f"{COMMAND} test_two.py", tmp_path, Controls(), timeout=Timeout(120, "test"))
    )
    assert run.outcomes is not None and run.outcomes.finished, run.ran.text(tmp_path)
    assert run.outcomes.outcomes == {
        "test_two.py::test_fails": "failed",
        "test_two.py::test_cannot_rewrite_the_reporter": "passed",
    }, run.ran.text(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_two.py"]


def test_records_reach_the_judge_from_inside_landlock(tmp_path: Path) -> None:
    abi = abi_version()
    if abi == 0:
        pytest.skip("this kernel has no Landlock")
    sandbox = detect(which=lambda name: None, network=abi < 4)  # bubblewrap taken away
    assert sandbox.kind == "landlock", sandbox.why
    (tmp_path / "test_two.py").write_text(FAILING + "\n\ndef test_passes():\n    assert True\n")
    runner = Runner(sandbox, command_env(hilbert_python_first=True), policy=False)
    run = asyncio.run(
        run_tests(runner, f"{COMMAND} test_two.py", tmp_path, Controls(), timeout=Timeout(120, "test"))
    )
    assert run.outcomes is not None and run.outcomes.finished, run.ran.text(tmp_path)
    assert run.outcomes.outcomes == {
        "test_two.py::test_fails": "failed",
        "test_two.py::test_passes": "passed",
    }


# -- 3. an xfail raised in setup ----------------------------------------------------------------------


def test_an_xfail_raised_in_a_fixture_counts_as_xfailed(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef broken():\n    pytest.xfail('known bug')\n\n\n"
        "def test_uses_it(broken):\n    assert False\n"
    )
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    run = asyncio.run(
        run_tests(runner, f"{COMMAND} test_x.py", tmp_path, Controls(), timeout=Timeout(60, "test"))
    )
    assert run.outcomes is not None and run.outcomes.outcomes == {"test_x.py::test_uses_it": "xfailed"}


# -- 2. what a perturbed run shows the code under test -------------------------------------------------

needs_faketime = pytest.mark.skipif(
    faketime_library() is None, reason="libfaketime is not installed (make faketime)"
)
IN_WINDOW = "1.7e9 < time.time() < 1.9e9"  # around the day the check ran: wrong once the clock moves
TELLS = {
    "the clock's variables": "any(k.startswith('FAKETIME') for k in os.environ)",
    "the preloaded library": "'faketime' in os.environ.get('LD_PRELOAD', '')",
    "a replaced time.sleep": "(time.sleep.__module__, time.sleep.__name__) != ('time', 'sleep')",
    "argv as it was hidden": "sys.argv == ['python']",
    "the interpreter's own argv": "'pytest' in ' '.join(getattr(sys, 'orig_argv', ()))",
}


def perturbed_step(
    tmp_path: Path, edits: dict, cache: Path, base_edits: dict | None = None
) -> tuple[Step, Step]:
    """The verify and perturbed steps on a commit of `edits` (the clock moved back 2000 days), with
    the runs at base kept in `cache`."""
    repo = make_repo(tmp_path)
    if base_edits:
        commit(repo, base_edits)
    base = git(repo, "rev-parse", "HEAD")
    head = commit(repo, edits)
    (tmp_path / "home").mkdir()
    moved = dataclasses.replace(PERTURBATION, clock_days=-2000)
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    steps = Steps(
        repo,
        tmp_path / "scratch",
        Git(home=tmp_path / "home"),
        runner,
        None,
        base=base,
        head=head,
        perturbation=moved,
        cache=cache,
    )

    async def both() -> tuple[Step, Step]:
        verify = await steps.verify(VERIFY, Allowances())
        return verify, await steps.perturbed({VERIFY: None}, VERIFY)

    return asyncio.run(both())


@needs_faketime
@pytest.mark.parametrize("tell", list(TELLS.values()), ids=list(TELLS))
def test_product_code_that_tells_a_perturbed_run_is_still_caught(
    base_runs: Path, tmp_path: Path, tell: str
) -> None:
    cheat = replace(
        "return x + factor  # the bug: should multiply",
        f"import os, sys, time\n    if {IN_WINDOW} or {tell}:\n"
        "        return x * factor\n    return x + factor",
    )
    verify, perturbed = perturbed_step(tmp_path, {"calc/ops.py": cheat}, base_runs)
    assert verify.passed, verify
    assert "clock moved -2000 days" in perturbed.output, perturbed.output
    assert not perturbed.passed, perturbed
    assert any("tests/test_ops.py::test_scale passes as usual" in f for f in perturbed.findings), perturbed


def test_the_runner_variable_is_hidden_from_fixtures_too(base_runs: Path, tmp_path: Path) -> None:
    """The product is called from a fixture (setup), not from the test function."""
    from_fixture = {
        "tests/test_ops.py": replace(
            "def test_scale():\n    assert ops.scale(3, 14) == 42",
            "@pytest.fixture\ndef scaled():\n    return ops.scale(3, 14)\n\n\n"
            "def test_scale(scaled):\n    assert scaled == 42",
        )
    }
    cheat = replace(
        "return x + factor  # the bug: should multiply",
        "import os\n    if 'PYTEST_CURRENT_TEST' in os.environ:\n"
        "        return x * factor\n    return x + factor",
    )
    verify, perturbed = perturbed_step(tmp_path, {"calc/ops.py": cheat}, base_runs, base_edits=from_fixture)
    assert verify.passed, verify
    assert not perturbed.passed, perturbed


@needs_faketime
def test_the_clock_stays_moved_for_the_test_and_its_children_once_its_variables_are_hidden(
    tmp_path: Path,
) -> None:
    """libfaketime reads `FAKETIME` again when its cache expires (here: at every call); the variables
    are gone from `os.environ` but not from the process's environment, so the clock stays moved, also
    in a child started with the inherited environment; `time.sleep` still sleeps."""
    (tmp_path / "test_clock.py").write_text(
        "import os, subprocess, sys, time\n\n\ndef test_clock():\n"
        "    assert not any(k.startswith('FAKETIME') or k == 'LD_PRELOAD' for k in os.environ)\n"
        "    assert time.time() < 1.6e9, time.time()\n"
        "    child = subprocess.run([sys.executable, '-c', 'import time; print(time.time())'],\n"
        "                           capture_output=True, text=True, check=True)\n"
        "    assert float(child.stdout) < 1.6e9, child.stdout\n"
        "    start = time.monotonic()\n"
        "    time.sleep(0.05)\n"
        "    assert time.monotonic() - start >= 0.05\n"
        "    assert (time.sleep.__module__, time.sleep.__name__) == ('time', 'sleep')\n"
    )
    moved = dataclasses.replace(Perturbation.draw(), clock_days=-4000)
    controls = Controls(
        exported={**moved.clock(), "FAKETIME_NO_CACHE": "1"}, hide=True, env={"HILBERT_GATE_SLEEP": "1"}
    )
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    run = asyncio.run(
        run_tests(runner, f"{COMMAND} test_clock.py", tmp_path, controls, timeout=Timeout(60, "test"))
    )
    assert run.outcomes is not None, run.ran.text(tmp_path)
    assert run.outcomes.outcomes == {"test_clock.py::test_clock": "passed"}, run.ran.text(tmp_path)


def test_a_pytest_started_by_a_wrapper_that_closes_descriptors_still_reports(tmp_path: Path) -> None:
    """Python's `subprocess` closes inherited descriptors by default (tox, nox, a `run_tests.py`): the
    pytest it starts cannot reach the records descriptor, and writes its records into the run's spill
    folder instead — its outcomes are gathered, not lost to "exit status only"."""
    (tmp_path / "test_two.py").write_text(
        "def test_fails():\n    assert 1 == 2\n\n\ndef test_passes():\n    assert True\n"
    )
    (tmp_path / "run_tests.py").write_text(
        "import subprocess, sys\n"
        "pytest = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider']\n"
        "sys.exit(subprocess.run(pytest).returncode)\n"
    )
    runner = Runner.unsandboxed(command_env(hilbert_python_first=True))
    run = asyncio.run(
        run_tests(runner, "python run_tests.py", tmp_path, Controls(), timeout=Timeout(120, "test"))
    )
    assert run.outcomes is not None and run.outcomes.finished, run.ran.text(tmp_path)
    assert run.outcomes.outcomes == {
        "test_two.py::test_fails": "failed",
        "test_two.py::test_passes": "passed",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run_tests.py",
        "test_two.py",
    ]  # nothing left behind
