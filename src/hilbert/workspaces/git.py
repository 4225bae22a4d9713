"""The one place hilbert starts a `git` process.

`Git.run(...)` runs git (through `hilbert.commands.process.run_process`, so a cancelled call kills
git's whole process group) as an argument list (never a shell string) with an environment that nothing a
worker or the person's machine wrote can steer:

- every inherited `GIT_*` variable is dropped (a harness started from inside a git hook would otherwise
  act on the wrong repository), then `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null` and
  `HOME=<harness folder>` are set, so only the repository's own config and the flags below apply;
- `-c core.hooksPath=/dev/null` so no hook in any repository ever runs, `-c core.fsmonitor=false` so no
  configured monitor command runs, `-c gc.auto=0` / `maintenance.auto=false` so nothing repacks behind
  our back, and a fixed identity (`hilbert <hilbert@localhost>`) with signing off;
- no recursion into a nested repository (a submodule, or one a worker made below its work tree, whose
  own config may name a filter, an fsmonitor or another work tree that would run as the harness):
  `diff.ignoreSubmodules=all`, `status.submoduleSummary=false`, `submodule.recurse=false`,
  `fetch.recurseSubmodules=false`. A `.gitmodules` in a work tree (`submodule.<name>.ignore=none`)
  outranks `diff.ignoreSubmodules`, and plumbing (`diff-files`, `diff-index` against the work tree)
  ignores it: so a command that compares a work tree with an index also says
  `--ignore-submodules=all`, and the harness never lets a gitlink into an index it keeps
  (`hilbert.workspaces.workspaces`: nested repositories are left out of every commit);
- with `mark=` the run's mark (`hilbert.commands.leftovers`: `HILBERT_RUN_MARK=TOKEN:git`), so that after
  the run dies a later process finds a git it left running (and gives it time to end by itself).

A failure becomes `hilbert.errors.RunError` whose message holds git's stderr on one line. Callers that
expect a non-zero exit as an answer (`merge-base --is-ancestor`, `diff --quiet`) pass `check=False`.
Nothing here knows about workspaces; that lives in `hilbert.workspaces.workspaces`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.commands.leftovers import marking
from hilbert.commands.process import run_process
from hilbert.errors import RunError

HARNESS_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "user.name=hilbert",
    "user.email=hilbert@localhost",
)


@dataclass(frozen=True)
class GitResult:
    """What one git process returned."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    raw: bytes = field(default=b"", repr=False)  # stdout as git wrote it (a blob's bytes)


@dataclass(frozen=True)
class Git:
    """Runs git for the harness; `home` is a harness-owned folder used as `HOME`. At most
    `processes` git processes of one runner run at once (a fleet of 1,024 workers provisioning together
    would otherwise run out of file descriptors: each process holds three pipes and a waiter). The
    limit is an asyncio semaphore: use one runner within one event loop. `mark`: the run's mark (the
    `Runner`'s), carried by every git process; "" for none."""

    home: Path
    processes: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(max(32, 4 * (os.cpu_count() or 1))), compare=False
    )
    mark: str = ""
    config: tuple[str, ...] = ()  # more `-c key=value` after HARNESS_CONFIG (the stop hook's, `judge.hook`)

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
        env.update(
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL="/dev/null",
            GIT_TERMINAL_PROMPT="0",
            HOME=str(self.home),
            LC_ALL="C",
        )
        return marking(env, self.mark, harness_git=True) if self.mark else env

    async def run(
        self,
        *args: str | os.PathLike[str],
        cwd: Path | None = None,
        check: bool = True,
        stdin: bytes | None = None,
        extra_env: Mapping[str, str | None] | None = None,
    ) -> GitResult:
        """Run `git <harness flags> *args`; raise RunError on a non-zero exit unless `check=False`.
        `extra_env` sets variables (e.g. `GIT_INDEX_FILE` for a private index), or removes those set
        to None (e.g. to let a person's own git configuration apply)."""
        argv = ["git"]
        for item in (*HARNESS_CONFIG, *self.config):
            argv += ["-c", item]
        argv += [os.fspath(a) for a in args]
        out, err_out = bytearray(), bytearray()
        async with self.processes:
            try:
                code = await run_process(
                    argv,
                    cwd=cwd,
                    env=_with(self.environment(), extra_env or {}),
                    timeout_s=None,
                    stdout=out.extend,
                    stderr=err_out.extend,
                    stdin=stdin,
                )
            except FileNotFoundError as err:
                raise RunError("git is not installed", hint="install git (2.30 or newer) and retry") from err
        result = GitResult(
            args=tuple(argv[1 + 2 * len(HARNESS_CONFIG) :]),
            returncode=code if code is not None else -1,
            stdout=out.decode("utf-8", "replace"),
            stderr=err_out.decode("utf-8", "replace"),
            raw=bytes(out),
        )
        if check and result.returncode != 0:
            raise RunError(
                f"git {_describe(result.args)} failed (exit {result.returncode}): {one_line(result.stderr)}",
                hint="the git message above says what is wrong with the repository or ref",
            )
        return result


def one_line(text: str) -> str:
    """Squash git's multi-line stderr into one line."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or "(no message)"


def _with(env: dict[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _describe(args: tuple[str, ...]) -> str:
    words = [a for a in args if not a.startswith("--git-dir") and not a.startswith("--work-tree")]
    return " ".join(words[:4])
