"""What a run checks before any model is called (docs/design/first_run.md): every model named for it
answers, the person's working tree holds nothing the workers would not see, and which other live run
works on the same repository. Each failure is one line saying what to do (`UserError`).

The sandbox is checked where the command runner is built (`hilbert.ui.edge.command_runner`: it fails
closed), the repository where the run is opened.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hilbert.errors import UserError
from hilbert.fleet.state import FleetState
from hilbert.workspaces.git import Git


async def models_answer(models: Sequence[Any]) -> None:
    """Refuse the run when a model's server does not answer (one `GET /models` each, at once; a
    model shared by several roles is asked once). Models that cannot be probed are left alone."""
    unique = {m.name: m for m in models if m is not None and hasattr(m, "probe")}
    answers = await asyncio.gather(*(m.probe() for m in unique.values()))
    silent = [(name, why) for name, why in zip(unique, answers, strict=True) if why is not None]
    if silent:
        name, why = silent[0]
        url = getattr(getattr(unique[name], "endpoint", None), "base_url", None)
        name += f" at {url}" if url else ""
        others = f" (and {len(silent) - 1} more)" if len(silent) > 1 else ""
        raise UserError(
            f"the model {name} does not answer: {why}{others}",
            hint="check that its server is running and the URL and key are right, or name another model",
        )


async def as_the_person_ignores(repo: Path, git: Git) -> Git:
    """The harness's git, with the person's own global ignore file (`core.excludesFile`, else git's
    default `$XDG_CONFIG_HOME/git/ignore`): the harness reads no global configuration, and a globally
    ignored `.env` must not count as a change, nor go into a snapshot. Only that one key is read."""
    found = await git.run(
        "config", "--global", "--path", "--get", "core.excludesFile", cwd=repo, check=False,
        extra_env={"GIT_CONFIG_GLOBAL": None, "HOME": os.environ.get("HOME")},
    )  # fmt: skip
    path = found.stdout.strip()
    if not path:
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        path = os.path.join(config, "git", "ignore")
    return replace(git, config=(*git.config, f"core.excludesFile={path}")) if os.path.isfile(path) else git


async def uncommitted(repo: Path, git: Git) -> list[str]:
    """The working tree's changes a run started from HEAD would not see: tracked files changed and
    untracked files the person does not ignore (`git status --porcelain` lines). Nothing is written to
    their repository (`--no-optional-locks`: the index is not refreshed). A bare repository has none."""
    bare = await git.run("rev-parse", "--is-bare-repository", cwd=repo, check=False)
    if bare.stdout.strip() == "true":
        return []
    git = await as_the_person_ignores(repo, git)
    status = await git.run("--no-optional-locks", "status", "--porcelain", "--untracked-files=all", cwd=repo)
    return [line for line in status.stdout.splitlines() if line.strip()]


def refuse_dirty(repo: Path, changes: Sequence[str]) -> None:
    shown = ", ".join(line[3:] for line in changes[:3]) + (
        f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    )
    raise UserError(
        f"{repo} has uncommitted changes the workers would not see: {shown}",
        hint="commit or stash them, or pass --allow-dirty to run on a snapshot of them "
        "(made in the run's own clone, not in your repository)",
    )


def live_on(states: Sequence[FleetState], repo: Path) -> list[FleetState]:
    """The runs on `repo` whose process is alive now."""
    here = repo.resolve()
    return [
        s
        for s in states
        if s.started is not None
        and s.finished is None
        and Path(s.started.repo).resolve() == here
        and s.process_alive()
    ]


__all__ = ["live_on", "models_answer", "refuse_dirty", "uncommitted"]
