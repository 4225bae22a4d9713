"""Helpers the judge tests share: a small buggy project as a real git repository, commits on top of it,
and the integrity findings between two of its commits (read through hilbert's own Git runner)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from git_support import git
from hilbert.judge import Allowances, Change, Finding, change_between, integrity_findings
from hilbert.judge.perturb import Perturbation
from hilbert.workspaces.git import Git

VERIFY = "bash scripts/check.sh"
# the gates of these tests run under one fixed draw, so that their perturbed runs at base are kept
# and shared (the `base_runs` fixture) as a fleet shares them across attempts on one base
PERTURBATION = Perturbation.draw("judge tests")

OPS = '''"""Small arithmetic helpers."""


def add(a, b):
    return a + b


def scale(x, factor):
    return x + factor  # the bug: should multiply


def ratio(a, b):
    return a / b


def parse_num(text):
    if not text.strip().lstrip("-").isdigit():
        raise ValueError(f"not a number: {text!r}")
    return int(text)
'''

TESTS = """import pytest

from calc import ops


def test_add():
    assert ops.add(2, 3) == 5
    assert ops.add(-2, 2) == 0


def test_scale():
    assert ops.scale(3, 14) == 42


def test_ratio():
    assert ops.ratio(1, 3) == pytest.approx(0.3333, rel=1e-3)


def test_parse_error():
    with pytest.raises(ValueError):
        ops.parse_num("x")


def test_wrong_expectation():
    assert ops.add(2, 2) == 5
"""

BASE: dict[str, str] = {
    "calc/__init__.py": '"""calc: a tiny project for the judge tests."""\n',
    "calc/ops.py": OPS,
    "tests/test_ops.py": TESTS,
    "tests/data/cases.txt": "3 14 42\n",
    "scripts/check.sh": "#!/bin/sh\npython -m pytest -q tests\n",
    "Makefile": "test:\n\tpython -m pytest -q tests\n",
    ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    steps:\n      - run: make test\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n\n[tool.pytest.ini_options]\n'
    'testpaths = ["tests"]\n',
    "logo.bin": "",
}

Edit = str | None | Callable[[str], str]


def replace(old: str, new: str) -> Callable[[str], str]:
    """An edit that replaces `old` (which must be there) with `new`."""

    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return apply


def make_repo(root: Path) -> Path:
    """The base project, committed; returns the repository folder."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, text in BASE.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "logo.bin").write_bytes(bytes(range(256)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def commit(repo: Path, edits: dict[str, Edit], message: str = "work") -> str:
    """Apply `edits` (new text, None to delete, or a function of the old text) and commit; returns the sha."""
    for path, edit in edits.items():
        target = repo / path
        if edit is None:
            target.unlink()
            continue
        text = edit(target.read_text()) if callable(edit) else edit
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def read_change(repo: Path, base: str, head: str) -> Change:
    async def go() -> Change:
        home = repo.parent / "home"
        home.mkdir(exist_ok=True)
        return await change_between(repo, base, head, Git(home=home))

    return asyncio.run(go())


def findings_after(
    tmp_path: Path, edits: dict[str, Edit], *, verify: str = VERIFY, allow: Allowances | None = None
) -> list[Finding]:
    """The integrity findings of one commit with `edits` on top of the base project."""
    repo = make_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    head = commit(repo, edits)
    return integrity_findings(read_change(repo, base, head), verify=verify, allow=allow)


def checks(findings: list[Finding]) -> set[str]:
    return {finding.check for finding in findings}
