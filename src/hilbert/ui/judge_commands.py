"""`hilbert judge` (the stop gate on any two commits) and `hilbert hook stop` (the gate as a Claude
Code / Codex Stop hook). The click commands live here and are added to the `hilbert` group by
`hilbert.ui.cli`, which turns every `HilbertError` into one line and exit status 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hilbert.commands import Runner
from hilbert.errors import HilbertError, UserError
from hilbert.models.types import Model
from hilbert.security.redact import Redactor
from hilbert.settings import Settings

if TYPE_CHECKING:
    from hilbert.workspaces.git import Git

EXIT = {"done": 0, "not_done": 1, "impossible": 1}


@dataclass(frozen=True)
class _Judging:
    """What one run of the gate from the command line needs: the judge model (None: skipped), a
    scratch folder (removed afterwards) with a private git home, the command runner (the sandbox, the
    environment without secrets) and the redactor for what is printed from the commands' and the
    model's output."""

    judge: Model | None
    scratch: Path
    git: Git
    runner: Runner
    redactor: Redactor


@contextlib.contextmanager
def _judging(settings: Settings, prefix: str, *, hook: bool = False) -> Iterator[_Judging]:
    from hilbert.ui.edge import command_runner
    from hilbert.ui.fleet_commands import model_named
    from hilbert.workspaces.git import Git

    judge_model = model_named(settings, settings.judge_model) if settings.judge_model else None
    # the candidate's code runs sandboxed, or says why not (the hook: refused, a round within its bound)
    runner = command_runner(settings, os.environ, refuse_without_sandbox=hook)
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        yield _Judging(judge_model, Path(scratch), Git(home=home), runner, Redactor.from_env())


@click.command()
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The git repository holding both commits (read only).",
)
@click.option("--base", required=True, help="The commit the work started from (the task's base).")
@click.option("--head", default="HEAD", show_default=True, help="The commit to judge.")
@click.option("--verify", required=True, help="The task's verify command, run on a clean export of HEAD.")
@click.option(
    "--heldout",
    type=click.Path(file_okay=False, path_type=Path),
    help="A folder of tests the worker never saw, run on the head commit.",
)
@click.option(
    "--allow-test-edits", "allow", multiple=True, help="A test path (or glob) the task allows editing."
)
@click.option("--task", "task_text", default="", help="The task as the judge model is told it.")
@click.option(
    "--model",
    "-m",
    "judge_model",
    help="The judge model (default: judge_model in the settings; none: skipped).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and every step as JSON.")
@click.option(
    "--unsandboxed",
    is_flag=True,
    default=None,
    help="Accept running the commits' code without a sandbox when this machine has none.",
)
def judge(
    repo: Path,
    base: str,
    head: str,
    verify: str,
    heldout: Path | None,
    allow: tuple[str, ...],
    task_text: str,
    judge_model: str | None,
    as_json: bool,
    unsandboxed: bool | None,
) -> None:
    """Run the stop gate on two commits: verify, integrity, held-out tests, the judge model.
    Exit 0 done, 1 not done, 2 error."""
    settings = Settings.load({"judge_model": judge_model, "unsandboxed": unsandboxed})
    verdict = asyncio.run(_judge(settings, repo, base, head, verify, heldout, allow, task_text, as_json))
    sys.exit(EXIT[verdict])


async def _judge(
    settings: Settings,
    repo: Path,
    base: str,
    head: str,
    verify: str,
    heldout: Path | None,
    allow: tuple[str, ...],
    task_text: str,
    as_json: bool,
) -> str:
    from hilbert.judge.change import Allowances
    from hilbert.judge.gate import Step, describe, run_gate

    if heldout is not None and not heldout.is_dir():
        raise UserError(f"--heldout {heldout} is not a folder", hint="name the folder of held-out tests")
    with _judging(settings, "hilbert-judge-") as setup:
        top, base_sha, head_sha = await _commits(setup.git, repo, base, head)

        if not as_json:
            click.echo(f"  commands: {setup.runner.describe()}", err=True)

        def progress(step: Step) -> None:
            if not as_json:
                line = f"  {'PASS' if step.passed else 'FAIL'} {step.name}: {step.summary}"
                click.echo(setup.redactor.redact(line), err=True)

        result = await run_gate(
            top,
            base_sha,
            head_sha,
            verify=verify,
            scratch=setup.scratch / "gate",
            git=setup.git,
            runner=setup.runner,
            heldout=heldout,
            allow=Allowances(allow),
            judge=setup.judge,
            task=task_text,
            on_step=progress,
        )
    if as_json:
        report = setup.redactor.redact_json({"base": base_sha, "head": head_sha, **result.to_json()})
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(setup.redactor.redact("\n".join(describe(result))))
    return result.verdict


async def _commits(git: Any, repo: Path, base: str, head: str) -> tuple[Path, str, str]:
    if not repo.is_dir():
        raise UserError(f"--repo {repo} is not a folder", hint="name the git repository holding both commits")
    found = await git.run("rev-parse", "--show-toplevel", cwd=repo, check=False)
    if found.returncode != 0:
        raise UserError(f"{repo} is not a git repository", hint="pass --repo with the repository's path")
    top = Path(found.stdout.strip())
    shas = []
    for option, rev in (("--base", base), ("--head", head)):
        sha = await git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=top, check=False)
        if sha.returncode != 0:
            raise UserError(f"{option} {rev!r} is not a commit in {top}", hint="name a commit, branch or tag")
        shas.append(sha.stdout.strip())
    return top, shas[0], shas[1]


@click.group()
def hook() -> None:
    """Hooks for external agents (Claude Code, Codex)."""


@hook.command("stop")
@click.option(
    "--gate",
    "gate_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The gate file: verify, base, task, heldout, allow_test_edits, max_rounds, judge_model,"
    " unsandboxed.",
)
def hook_stop(gate_file: Path) -> None:
    """The Stop hook: read the hook's JSON on stdin, run the stop gate on the session's work tree,
    send the agent back with the gate's reasons while it is not done (up to max_rounds), else print
    nothing: {"decision": "block", "reason": ...}, or Claude Code's additionalContext for a version seen
    to go on after it (no "Stop hook error" then)."""
    from hilbert.judge.hook import as_block, read_gate_spec, read_hook_input

    try:
        spec = read_gate_spec(gate_file)
        payload = read_hook_input(sys.stdin.read())
        # whether the checks may run unsandboxed is the gate file's to say, not the agent's folder's
        settings = Settings.load({"judge_model": spec.judge_model, "unsandboxed": spec.unsandboxed})
        answer = asyncio.run(_hook_stop(settings, spec, payload, gate_file))
    except (HilbertError, OSError) as error:  # still one line and exit 2, worded to read as a block
        raise as_block(error) from None
    except Exception as error:  # a bug must not let the agent stop unchecked (exit 1 would)
        raise as_block(UserError(f"the hook failed ({type(error).__name__}: {error})")) from None
    if answer is not None:
        click.echo(json.dumps(answer))


async def _hook_stop(settings: Settings, spec: Any, payload: Any, gate_file: Path) -> dict[str, Any] | None:
    from hilbert.judge.hook import stop_hook

    with _judging(settings, "hilbert-hook-", hook=True) as setup:
        if setup.runner.sandbox.kind == "refuse":
            click.echo(
                f"hilbert hook stop: {setup.runner.describe()}; install bubblewrap, or set "
                f"`unsandboxed: true` in {gate_file} to accept running the checks without a sandbox",
                err=True,
            )
        answer = await stop_hook(
            payload,
            spec,
            rounds_file=gate_file.with_name(gate_file.name + ".rounds.json"),
            scratch=setup.scratch,
            git=setup.git,
            runner=setup.runner,
            judge=setup.judge,
        )
    click.echo(setup.redactor.redact(f"hilbert hook stop: {answer.note}"), err=True)
    return None if answer.output is None else setup.redactor.redact_json(answer.output)


__all__ = ["hook", "judge"]
