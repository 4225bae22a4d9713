"""Run one case: build its git repository, play the worker, run the gate and a verify-only harness.

Each case gets its own repository, HOME and virtual environment, so that one case's side effects (a
cheat that writes into its venv, say) cannot reach another case:

- the repository: the pristine sdist with the bug injected is the base commit; one more commit with
  the pristine files back (the upstream fix) is left at `refs/remotes/origin/main`, as a provisioned
  clone of a project that has moved on would have it; the worker's commit (the case's edits, added
  with `git add -A` and, for the paths the edits wrote, `git add -f`) is the head;
- the venv: `python -m venv --without-pip`, plus a `.pth` to the bench interpreter's site-packages
  (pytest and its plugins), so `python` on the verify PATH is the venv's and has pytest;
- after the commit the case's `worker_runs` run in the checkout (the worker's own commands);
- then the gate decides on base..head, and the verify command runs with the same environment in the
  worker's checkout and on a plain `git archive` export of head: the verify-only harnesses a cheat
  must fool (either one) to count as effective;
- for an honest fix, the held-out tests also run on a clean clone of head (a fix that fails them, or
  fails verify, is a broken case, not a false alarm).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shlex
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from hilbert.commands import Runner
from hilbert.judge.change import Allowances
from hilbert.judge.gate import GateResult, run_gate
from hilbert.settings import TimeoutSettings
from hilbert.workspaces.git import Git

from .cases import Bug, Case, Edit, Project, apply_edits

WRITES = ("write", "append", "copy", "compile_pyc", "symlink")


@dataclass(frozen=True)
class Settings:
    work: Path  # where the cases' repositories, venvs and homes go
    site_packages: Path  # the bench interpreter's site-packages: pytest for the case venvs
    python: str  # the interpreter the venvs are made from
    timeout_s: float = 120.0
    gate: bool = True  # False: check the cases only (--cases-only)
    gate_cache: Path | None = None  # where the gate keeps its runs at a base (shared by the cases of a bug)


@dataclass(frozen=True)
class Outcome:
    case: Case
    verify_passed: bool  # a verify-only harness: verify on head in the worker's checkout or a plain export
    heldout_passed: bool | None  # honest fixes with held-out tests; None otherwise
    verdict: str  # "done" | "not_done" | "error" (the gate raised) | "skipped" (--cases-only)
    said: str  # what the gate said, on one line
    seconds: float
    failed: tuple[str, ...] = ()  # the gate's steps that failed
    gate_s: float = 0.0  # the gate call alone


@dataclass(frozen=True)
class BugCheck:
    project: str
    bug: str
    verify_fails_on_base: bool
    heldout_fails_on_base: bool | None
    broken: str  # the bug's `broken`: with "test", the held-out tests should pass on base


async def sh(command: str, cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[int, str]:
    """Run `bash -c command`; return (exit status, output). A timeout kills the process group: 124."""
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", command, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = await proc.communicate()
        return 124, out.decode("utf-8", "replace")
    except asyncio.CancelledError:  # another case failed: leave no process behind
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.communicate()
        raise
    return proc.returncode if proc.returncode is not None else -1, out.decode("utf-8", "replace")


async def make_venv(path: Path, settings: Settings) -> dict[str, str]:
    """A fresh venv at `path` that sees pytest; returns the environment verify runs with."""
    proc = await asyncio.create_subprocess_exec(settings.python, "-m", "venv", "--without-pip", str(path))
    try:
        status = await proc.wait()
    except asyncio.CancelledError:
        proc.kill()
        await proc.wait()
        raise
    if status != 0:
        raise RuntimeError(f"python -m venv {path} failed")
    (site,) = path.glob("lib/python3*/site-packages")
    (site / "_bench_pytest.pth").write_text(f"{settings.site_packages}\n")
    home = path.parent / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{path / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


def _written(edits: tuple[Edit, ...], repo: Path) -> list[str]:
    """The paths the edits wrote, to add with -f (a worker commits them even where .gitignore says no)."""
    paths = []
    for edit in edits:
        if edit.op == "compile_pyc":
            paths.append(os.path.relpath(importlib.util.cache_from_source(str(repo / edit.path)), repo))
        elif edit.op in WRITES or edit.op == "rename":
            paths.append(edit.to if edit.op in ("copy", "rename") else edit.path)
    return [p for p in paths if os.path.lexists(repo / p)]


async def build_repo(git: Git, pristine: Path, bug: Bug, case: Case | None, repo: Path) -> tuple[str, str]:
    """The case's repository at `repo`: returns (base sha, head sha); head = base without a case."""
    shutil.copytree(pristine, repo, symlinks=True)
    apply_edits(repo, bug.inject, f"bug {bug.id} inject")
    await git.run("init", "-q", "-b", "main", cwd=repo)
    await git.run("add", "-A", cwd=repo)
    await git.run("commit", "-q", "-m", f"base: {bug.id} (bug injected)", cwd=repo)
    base = (await git.run("rev-parse", "HEAD", cwd=repo)).stdout.strip()
    for path in {p for edit in bug.inject for p in (edit.path, edit.to) if p}:  # upstream: pristine again
        if (pristine / path).exists():
            shutil.copy2(pristine / path, repo / path)
        elif (repo / path).exists():
            (repo / path).unlink()
    await git.run("add", "-A", cwd=repo)
    await git.run("commit", "-q", "-m", f"Fix {bug.id}", cwd=repo)
    await git.run("update-ref", "refs/remotes/origin/main", "HEAD", cwd=repo)
    await git.run("reset", "-q", "--hard", base, cwd=repo)
    if case is None:
        return base, base
    apply_edits(repo, case.edits, case.name)
    await git.run("add", "-A", cwd=repo)
    forced = _written(case.edits, repo)
    if forced:
        await git.run("add", "-f", "--", *forced, cwd=repo)
    await git.run("commit", "-q", "--allow-empty", "-m", f"worker: {case.id}", cwd=repo)
    return base, (await git.run("rev-parse", "HEAD", cwd=repo)).stdout.strip()


def write_heldout(bug: Bug, folder: Path) -> Path | None:
    if not bug.heldout:
        return None
    for path, text in bug.heldout:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


async def run_heldout(
    git: Git, repo: Path, sha: str, bug: Bug, where: Path, env: dict[str, str], t: float
) -> bool:
    """Whether the held-out tests pass on a clean clone of `sha` (with the files copied in)."""
    await git.run("clone", "-q", "--no-checkout", str(repo), str(where))
    await git.run("checkout", "-q", "--detach", sha, cwd=where)
    for path, text in bug.heldout:
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(text)
    files = " ".join(path for path, _ in bug.heldout)
    rc, _ = await sh(f"python -m pytest -q -p no:cacheprovider {files}", where, env, t)
    return rc == 0


def gate_said(result: GateResult) -> str:
    steps = ", ".join(f"{step.name} {'ok' if step.passed else 'FAILED'}" for step in result.steps)
    notes = [*result.reasons] or [f for step in result.steps for f in step.findings][:3]
    return f"{result.verdict} ({steps})" + (": " + "; ".join(notes) if notes else "")


async def check_bug(project: Project, bug: Bug, pristine: Path, settings: Settings, git: Git) -> BugCheck:
    """The bug is real: verify fails on the base commit; the held-out tests fail there too, unless the
    product is right and only a test is wrong (`broken: test`)."""
    folder = settings.work / "bugs" / project.name / bug.id
    folder.mkdir(parents=True)
    base, _ = await build_repo(git, pristine, bug, None, folder / "repo")
    env = await make_venv(folder / "venv", settings)
    rc, _ = await sh(bug.verify, folder / "repo", env, settings.timeout_s)
    held = None
    if bug.heldout:
        held = not await run_heldout(
            git, folder / "repo", base, bug, folder / "clean", env, settings.timeout_s
        )
    return BugCheck(project.name, bug.id, rc != 0, held, bug.broken)


async def run_case(project: Project, case: Case, pristine: Path, settings: Settings, git: Git) -> Outcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    bug = project.bug(case.bug)
    folder = settings.work / "cases" / project.name / bug.id / case.id
    folder.mkdir(parents=True)
    repo = folder / "repo"
    base, head = await build_repo(git, pristine, bug, case, repo)
    env = await make_venv(folder / "venv", settings)
    for command in case.worker_runs:
        rc, out = await sh(command, repo, env, settings.timeout_s)
        if rc != 0:
            raise RuntimeError(f"{case.name}: worker_runs command failed (exit {rc}): {out[-300:]}")
    heldout = write_heldout(bug, folder / "heldout")
    verdict, said, failed, gate_s = "skipped", "", (), 0.0
    if settings.gate:
        (folder / "scratch").mkdir()
        gate_started = loop.time()
        try:
            result = await run_gate(
                repo, base, head, verify=bug.verify, scratch=folder / "scratch", git=git,
                runner=Runner.unsandboxed(env, timeouts=TimeoutSettings(verify_s=settings.timeout_s)),
                heldout=heldout, allow=Allowances(test_edits=bug.allow), cache=settings.gate_cache,
            )  # fmt: skip
            verdict, said = result.verdict, gate_said(result)
            failed = tuple(step.name for step in result.steps if not step.passed)
        except Exception as err:  # a crash of the gate is recorded, not fatal to the benchmark
            verdict, said = "error", f"the gate raised {type(err).__name__}: {err}"
        gate_s = loop.time() - gate_started
    rc, _ = await sh(bug.verify, repo, env, settings.timeout_s)
    if rc != 0 and case.kind == "cheat":  # the naive gate: export the commit, run verify, exit 0
        export = folder / "plain-export"
        export.mkdir()
        archive = f"git -C {shlex.quote(str(repo))} archive {head} | tar -x -C {shlex.quote(str(export))}"
        rc, _ = await sh(
            f"{archive} && cd {shlex.quote(str(export))} && {bug.verify}", folder, env, settings.timeout_s
        )
    held = None
    if case.kind == "honest" and bug.heldout:
        held = await run_heldout(git, repo, head, bug, folder / "clean", env, settings.timeout_s)
    said = " ".join(said.split())
    return Outcome(case, rc == 0, held, verdict, said, loop.time() - started, failed, gate_s)
