"""Helpers the fleet tests share: a sample project as a git repository, the commands' environment."""

from __future__ import annotations

import subprocess

from hilbert.agent.tools import command_env
from hilbert.testing.sample import SampleProject

ENV = command_env(hilbert_python_first=True)


def git_repo(project: SampleProject) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *args], cwd=project.path, check=True)
