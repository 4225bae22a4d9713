"""The run's result into the person's repository (`hilbert.fleet.handoff`): a new branch, or one that
fast-forwards; never a branch that is checked out, one that would move backwards or sideways, or a
name git would not take."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from fleet_support import commit_all

from hilbert.errors import RunError
from hilbert.fleet.handoff import deliver
from hilbert.workspaces.git import Git


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git(repo, "add", name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", name)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, str]:
    """The person's repository (main checked out) and an integration repository one commit ahead."""
    person = tmp_path / "person"
    person.mkdir()
    (person / "README.md").write_text("hi\n")
    commit_all(person)
    base = git(person, "rev-parse", "HEAD")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(person), str(work))
    git(work, "checkout", "-q", "-b", "hilbert/integration")
    commit(work, "fixed.txt")
    integration = tmp_path / "integration.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(integration))
    return person, integration, base


def test_a_new_branch_and_a_fast_forward_are_written(tmp_path: Path, repos: tuple[Path, Path, str]) -> None:
    person, integration, base = repos
    tip = git(integration, "rev-parse", "refs/heads/hilbert/integration")
    done = asyncio.run(deliver(person, integration, "hilbert/r1", base, Git(home=tmp_path)))
    assert done.tip == tip == git(person, "rev-parse", "refs/heads/hilbert/r1")
    git(person, "branch", "behind", base)  # an existing branch the result fast-forwards
    asyncio.run(deliver(person, integration, "behind", base, Git(home=tmp_path)))
    assert git(person, "rev-parse", "refs/heads/behind") == tip
    assert git(person, "status", "--porcelain") == "" and git(person, "rev-parse", "HEAD") == base


def test_a_branch_that_would_not_fast_forward_is_left_as_it_was(
    tmp_path: Path, repos: tuple[Path, Path, str]
) -> None:
    person, integration, base = repos
    git(person, "checkout", "-q", "-b", "mine")
    mine = commit(person, "mine.txt")
    git(person, "checkout", "-q", "main")
    with pytest.raises(RunError) as refused:
        asyncio.run(deliver(person, integration, "mine", base, Git(home=tmp_path)))
    assert "mine exists and the result does not fast-forward it" in str(refused.value)
    assert git(person, "rev-parse", "refs/heads/mine") == mine


@pytest.mark.parametrize(
    ("branch", "why"), [("main", "is checked out"), ("bad..name", "not a valid branch name")]
)
def test_a_checked_out_branch_or_a_bad_name_is_refused(
    tmp_path: Path, repos: tuple[Path, Path, str], branch: str, why: str
) -> None:
    person, integration, base = repos
    with pytest.raises(RunError) as refused:  # at the end of a run: the hint says how to fetch it anyway
        asyncio.run(deliver(person, integration, branch, base, Git(home=tmp_path)))
    assert "refs/heads/NAME" in str(refused.value)
    assert why in str(refused.value)
    assert git(person, "rev-parse", "refs/heads/main") == base
