"""Helpers the fleet tests share: a sample project as a git repository, the commands' environment."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hilbert.commands import command_env
from hilbert.sim.sample import SampleProject

ENV = command_env(hilbert_python_first=True)


def git_repo(project: SampleProject) -> None:
    commit_all(project.path)


def commit_all(path: Path) -> None:
    """Make `path` a git repository whose one commit holds everything in it."""
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def readme_repo(path: Path) -> Path:
    """A git repository holding only a README: for fleets whose tasks write their own files."""
    path.mkdir()
    (path / "README.md").write_text("hello\n")
    commit_all(path)
    return path
