"""Configuration that only declares (a marker, a fixture new tests request) is not a finding; configuration
that changes what runs or how outcomes count is, and so is a `.gitattributes` that changes what git writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_support import checks, findings_after, replace

from hilbert.judge import Change, FileChange, Finding, integrity_findings
from hilbert.judge.integrity import blocking

FIX = replace("return x + factor  # the bug: should multiply", "return x * factor")
NEW_TEST = "from calc import ops\n\n\ndef test_scale_numbers(numbers):\n    assert ops.scale(*numbers) == 6\n"
FIXTURE = "import pytest\n\n\n@pytest.fixture\ndef numbers():\n    return (2, 3)\n"
MARKERS = 'def pytest_configure(config):\n    config.addinivalue_line("markers", "slow: a slow test")\n'
PYPROJECT = 'testpaths = ["tests"]'

DECLARATIVE = {
    "a new conftest with a fixture a new test requests": {"tests/conftest.py": FIXTURE},
    "a conftest that registers a marker": {
        "tests/conftest.py": MARKERS,
        "tests/test_slow.py": "import pytest\n\n\n@pytest.mark.slow\ndef test_big():\n    assert [0] * 3\n",
    },
    "a marker registered in pyproject": {
        "pyproject.toml": replace(PYPROJECT, PYPROJECT + '\nmarkers = ["slow: a slow test"]'),
    },
    "a conftest with a fixture, a helper and a constant": {
        "tests/conftest.py": FIXTURE + "\n\nLIMIT = 3\n\n\ndef pair(a, b):\n    return (a, b)\n",
    },
}


@pytest.mark.parametrize("name", DECLARATIVE)
def test_configuration_that_only_declares_is_not_a_finding(tmp_path: Path, name: str) -> None:
    edits = {"calc/ops.py": FIX, "tests/test_numbers.py": NEW_TEST, **DECLARATIVE[name]}
    assert findings_after(tmp_path, edits) == []


STEERING = {
    "an autouse fixture": {
        "tests/conftest.py": FIXTURE.replace("@pytest.fixture", "@pytest.fixture(autouse=True)"),
    },
    "a fixture no new test requests": {"tests/conftest.py": FIXTURE.replace("numbers", "spare")},
    "a hook that rewrites reports": {
        "tests/conftest.py": FIXTURE
        + "\n\ndef pytest_runtest_logreport(report):\n    report.outcome = 'passed'\n",
    },
    "pytest_configure doing more than markers": {
        "tests/conftest.py": MARKERS + "    config.option.maxfail = 0\n",
    },
    "a conftest that runs code at import": {
        "tests/conftest.py": FIXTURE + "\nimport os\n\nos.environ['CALC_MODE'] = 'lenient'\n",
    },
    "hooks imported into a conftest": {"tests/conftest.py": FIXTURE + "\nfrom calc.plugin import *\n"},
    "a hookimpl under another name": {
        "tests/conftest.py": FIXTURE
        + "\n\n@pytest.hookimpl(specname='pytest_runtest_makereport')\ndef note(item, call):\n    pass\n",
    },
    "addopts in pyproject": {
        "pyproject.toml": replace(PYPROJECT, PYPROJECT + '\naddopts = "-p no:randomly"')
    },
    "filterwarnings in pyproject": {
        "pyproject.toml": replace(PYPROJECT, PYPROJECT + '\nfilterwarnings = ["ignore::UserWarning"]'),
    },
    "markers beside a changed testpaths": {
        "pyproject.toml": replace(PYPROJECT, 'testpaths = ["tests/unit"]\nmarkers = ["slow: slow"]'),
    },
    "a new pytest.ini, even with markers only (it outranks pyproject)": {
        "pytest.ini": "[pytest]\nmarkers =\n    slow: a slow test\n",
    },
    "a pytest section added to setup.cfg": {"setup.cfg": "[tool:pytest]\nmarkers =\n    slow: slow\n"},
}


@pytest.mark.parametrize("name", STEERING)
def test_configuration_that_changes_what_runs_is_a_blocking_finding(tmp_path: Path, name: str) -> None:
    edits = {"calc/ops.py": FIX, "tests/test_numbers.py": NEW_TEST, **STEERING[name]}
    found = findings_after(tmp_path, edits)
    assert "test_config_changed" in checks(blocking(found)), [str(f) for f in found]


def test_a_fixture_that_replaces_one_existing_tests_use_is_a_finding() -> None:
    existing = "def test_lookup(db):\n    assert db.get(1) == 'one'\n"
    conftest = "import pytest\n\n\n@pytest.fixture\ndef db():\n    return {1: 'one'}\n"
    new_test = "def test_new(db):\n    assert db\n"
    change = Change(
        files=(
            FileChange("tests/conftest.py", "added", None, conftest),
            FileChange("tests/test_new.py", "added", None, new_test),
        ),
        head_tests=(("tests/test_lookup.py", existing), ("tests/test_new.py", new_test)),
    )
    [finding] = integrity_findings(change, verify="make test")
    assert (
        finding.check == "test_config_changed" and "replaces one that existing tests use" in finding.message
    )


def test_a_conftest_the_base_had_that_gains_only_a_fixture_is_declarative() -> None:
    old = "import pytest\n\n\ndef pytest_configure(config):\n    config.option.verbose = 1\n"
    new = old + "\n\n@pytest.fixture\ndef numbers():\n    return (2, 3)\n"
    change = Change(
        files=(
            FileChange("tests/conftest.py", "modified", old, new),
            FileChange("tests/test_numbers.py", "added", None, NEW_TEST),
        )
    )
    assert integrity_findings(change, verify="make test") == []
    removed = Change(files=(FileChange("tests/conftest.py", "deleted", old, None),))
    assert checks(integrity_findings(removed, verify="make test")) == {"test_config_changed"}


def attributes(path: str, old: str | None, new: str | None) -> list[Finding]:
    status = "added" if old is None else "deleted" if new is None else "modified"
    return integrity_findings(Change(files=(FileChange(path, status, old, new),)), verify="make test")


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        (".gitattributes", None, "tests/** export-ignore\n"),
        (".gitattributes", None, "version.py export-subst\n"),
        (
            "calc/.gitattributes",
            "*.md linguist-documentation\n",
            "*.md linguist-documentation\nops.py working-tree-encoding=UTF-16\n",
        ),
        (".gitattributes", None, "[attr]steer filter=answers\n*.py steer\n"),
        (".gitattributes", "*.py filter=lfs\n", None),
        (".gitattributes", None, "*.py ident eol=crlf\n"),
    ],
)
def test_an_attribute_that_changes_what_git_writes_is_blocking(
    path: str, old: str | None, new: str | None
) -> None:
    found = attributes(path, old, new)
    assert [(f.check, f.blocking) for f in found] == [("attributes_changed", True)]


@pytest.mark.parametrize(
    "new", ["*.ipynb linguist-generated\n# notebooks\n", "* text=auto eol=lf\n", "*.bin binary\n"]
)
def test_other_attributes_are_advisory(new: str) -> None:
    """Line endings and the like are repository hygiene: they change no byte the gate runs."""
    [finding] = attributes(".gitattributes", None, new)
    assert finding.check == "attributes_changed" and not finding.blocking
    assert "(advisory)" in str(finding)
