"""The run's result in the person's repository: the integration branch as a branch of theirs, and a
PR description beside the run's log (docs/design/first_run.md).

`check_target` refuses, before the run starts, a branch the fetch must not move (checked out in one of
the repository's worktrees, or not a valid branch name); `deliver` fetches the integration branch into
the person's repository under that name — the only write hilbert makes there, a plain `git fetch`
without `+`, so git itself refuses a branch that would not fast-forward; `describe` writes the PR
description from the event log and the integration repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hilbert.errors import RunError, UserError
from hilbert.fleet.budget_lines import budget_lines
from hilbert.fleet.final_check import summary as final_summary
from hilbert.fleet.person import fixed_meanwhile
from hilbert.fleet.state import FleetState
from hilbert.store import EventStore
from hilbert.workspaces.git import Git, one_line
from hilbert.workspaces.integration import INTEGRATION, SNAPSHOT


def result_branch(run: str, into: str | None) -> str:
    """The branch the result goes to: `--into BRANCH`, else `hilbert/<run>`."""
    return into or f"hilbert/{run}"


async def check_target(repo: Path, branch: str, git: Git) -> None:
    """Refuse (one line) a branch name git would not take, or a branch checked out in any worktree of
    `repo`: fetching into it would move the ground under the person's feet."""
    valid = await git.run("check-ref-format", "--branch", branch, cwd=repo, check=False)
    if valid.returncode != 0:
        raise UserError(f"{branch!r} is not a valid branch name", hint="pass another name to --into")
    listed = await git.run("worktree", "list", "--porcelain", cwd=repo, check=False)
    if f"branch refs/heads/{branch}" in listed.stdout.splitlines():
        raise UserError(
            f"the branch {branch} is checked out in {repo}: the result cannot be written onto it",
            hint="check out another branch there, or pass another name to --into",
        )


@dataclass(frozen=True)
class Delivered:
    branch: str
    tip: str
    base: str
    snapshot: bool = False  # the run started from the person's uncommitted changes (`--allow-dirty`)


async def deliver(repo: Path, integration: Path, branch: str, base: str, git: Git) -> Delivered:
    """Fetch the integration branch into `repo` as `branch` (created, or fast-forwarded only)."""
    if not repo.is_dir():
        raise RunError(
            f"the result was not written: the repository {repo} is gone",
            hint=f"fetch it yourself: git fetch {integration} {INTEGRATION}:refs/heads/{branch}",
        )
    elsewhere = f"fetch it under another name: git fetch {integration} {INTEGRATION}:refs/heads/NAME"
    try:  # checked at the start too; the person may have switched branches since
        await check_target(repo, branch, git)
    except UserError as refused:
        raise RunError(f"the result was not written to {repo}: {refused.message}", hint=elsewhere) from None
    fetched = await git.run(
        "fetch", "--no-tags", "--no-write-fetch-head", str(integration),
        f"refs/heads/{INTEGRATION}:refs/heads/{branch}",
        cwd=repo, check=False,
    )  # fmt: skip
    if fetched.returncode != 0:
        why = one_line(fetched.stderr)
        if "non-fast-forward" in why or "rejected" in why:
            why = f"{branch} exists and the result does not fast-forward it"
        raise RunError(
            f"the result was not written to {repo}: {why}",
            hint=elsewhere,
        )
    tip = (await git.run("rev-parse", f"refs/heads/{branch}", cwd=repo)).stdout.strip()
    subject = await git.run("--git-dir", str(integration), "log", "-1", "--format=%s", base, check=False)
    return Delivered(branch, tip, base, subject.stdout.strip() == SNAPSHOT)


def how_to_look(delivered: Delivered) -> list[str]:
    """The run's last lines: where the result is, how to look at it and merge it."""
    base, branch = delivered.base[:12], delivered.branch
    lines = [
        f"the result is the branch {branch} in your repository (at {delivered.tip[:12]}):",
        f"  look:  git log --stat {base}..{branch}",
    ]
    if not delivered.snapshot:
        return [*lines, f"  merge: git merge {branch}"]
    return [  # it holds the uncommitted changes still in the person's working tree: git would refuse
        *lines,
        f"  merge: git stash -u && git merge {branch} && git stash drop",
        "  (it starts from a snapshot of your uncommitted changes, which are still in your working tree:"
        " put them aside first, the branch holds them)",
    ]


async def describe(store: EventStore, state: FleetState, integration: Path, git: Git) -> str:
    """The PR description of a run: what each task changed, the gate's evidence, the cost."""
    assert state.plan is not None and state.started is not None
    steps = store.events(run=state.run, kinds=["gate_step"])
    verdicts = store.events(run=state.run, kinds=["gate_verdict"])
    started = {e.data.get("task"): e.data for e in store.events(run=state.run, kinds=["task_started"])}
    merged = [t for t in state.plan.tasks if t.id in state.merged]
    lines = [f"# {state.plan.goal or 'hilbert run ' + state.run}", ""]
    unpriced = any(view.unpriced for view in state.agents.values())
    cost = f"${state.spent_usd:.4f}"
    if unpriced:
        no_price = "no price known for a model it used"
        cost = f"{cost} and more ({no_price})" if state.spent_usd else f"unknown ({no_price})"
    lines.append(
        f"{len(merged)} of {len(state.plan.tasks)} tasks merged by the hilbert run `{state.run}` "
        f"from `{state.started.base[:12]}`; cost {cost}."
    )
    lines += ["", "Spend and budgets:", *(f"- {line.strip()}" for line in budget_lines(state, ended=True))]
    final = final_summary(state.final_checks[-1] if state.final_checks else None)
    lines += ["", *(f"- {line.strip()}" if n else line for n, line in enumerate(final))] if final else []
    lines += ["", *(f"- {line}" for line in fixed_meanwhile(state))] if fixed_meanwhile(state) else []
    for task in state.plan.tasks:
        status = state.states[task.id].status if task.id in state.states else "pending"
        lines += ["", f"## {task.id} — {task.title} ({status.replace('_', ' ')})"]
        if task.id not in state.merged:
            continue
        done = [v for v in verdicts if v.data.get("task") == task.id and v.data.get("verdict") == "done"]
        worker = state.states[task.id].worker or "?"
        commit = str(done[-1].data.get("commit", "")) if done else ""
        lines.append(
            f"Worker {worker}; merged as `{state.merged[task.id].commit[:12]}`. Verify: `{task.verify}`."
        )
        base = str(started.get(task.id, {}).get("base") or state.started.base)
        if commit:
            stat = await git.run("--git-dir", str(integration), "diff", "--stat", base, commit, check=False)
            if stat.returncode == 0 and stat.stdout.strip():
                lines += ["", "```", stat.stdout.rstrip(), "```"]
            gate = [s.data for s in steps if s.data.get("task") == task.id and s.data.get("commit") == commit]
            if gate:
                lines += ["", "The stop gate's evidence:"]
                lines += [
                    f"- {g.get('step')}: {'passed' if g.get('passed') else 'FAILED'} — {g.get('summary')}"
                    for g in gate
                ]
    return "\n".join(lines) + "\n"


__all__ = ["Delivered", "check_target", "deliver", "describe", "how_to_look", "result_branch"]
