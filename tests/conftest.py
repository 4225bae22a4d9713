"""The whole suite's conftest. Its first job: being here, without an `__init__.py`, it puts `tests/` on
`sys.path` (pytest's default "prepend" import mode), so a support module at this level
(`git_support`) can be imported by the tests of every folder, as each folder's own `*_support`
module is by its tests.

Its second: importing `hilbert.sim` registers the simulation's responders with the fake server, so
every test may name them (`FakeServer("engineer")`, `FakeServer("judge")`) whatever else it imports.

Its third: every test gets a hilbert home of its own (`HILBERT_HOME`, inherited by the processes it
starts), so nothing a test runs writes the person's `~/.hilbert` — the governor's shared file, runs,
a climb's results — nor finds another test's governor state there. A test that sets its own
`HILBERT_HOME` (most CLI tests: a home beside their repository) overrides it.

Its fourth: options given to this pytest through `PYTEST_ADDOPTS` (a CI job's report file, a `-k`)
are for this run only; pytest has read them by now, and the projects' test runs that the tests start
do not inherit them."""

import os

import pytest

import hilbert.sim  # noqa: F401

os.environ.pop("PYTEST_ADDOPTS", None)


@pytest.fixture(autouse=True)
def hilbert_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HILBERT_HOME", str(tmp_path_factory.mktemp("hilbert-home")))
