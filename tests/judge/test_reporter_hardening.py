"""The judge's pytest reporter after review (issue 15): an xfail raised in setup is an xfail."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hilbert.commands import Runner, Timeout, command_env
from hilbert.judge.testruns import Controls, run_tests

COMMAND = "python -m pytest -q -p no:cacheprovider"


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
