"""`hilbert retry RUN TASK [--edit]`: the person reopens a task that needs them (`hilbert.fleet.person`).

It records a `task_retry_asked` (agent "person") in the run's log; the fold makes the task pending with
fresh attempts (with `--edit`, the task as the person changed it in their editor). A live run picks
it up within a second; a run that has ended is resumed here, in the foreground, like
`hilbert run --resume RUN`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from hilbert.errors import UserError
from hilbert.fleet.events import TaskRetryAsked
from hilbert.fleet.inbox import PERSON
from hilbert.fleet.plan import Plan, Task, parse_plan, write_plan
from hilbert.fleet.setup import inherit
from hilbert.fleet.state import RETRYABLE, FleetState, Fold
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.ui.config_command import load_settings

EDIT_NOTE = "<!-- Change the task below, save and close. Its id and dependencies stay as they are. -->\n"


@click.command()
@click.argument("run_id", metavar="RUN")
@click.argument("task_id", metavar="TASK")
@click.option(
    "--edit", is_flag=True, help="Change the task first (title, verify, description...) in $EDITOR."
)
@click.option("--model", "-m", help="The workers' model from now on (default: the run's).")
@click.option("--lead-model", help="The lead's model from now on (default: the run's).")
@click.option("--max-cost", "run_cost", type=float, help="The run's cost cap (USD) from now on.")
@click.option("--into", metavar="BRANCH", help="The branch of your repository the result goes to.")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), help="Event log file.")
@click.option("--unsandboxed", is_flag=True, default=None, help="As `hilbert run --unsandboxed`.")
def retry(run_id: str, task_id: str, edit: bool, into: str | None, **options: Any) -> None:
    """Reopen TASK of RUN with fresh attempts: one that needs you (the lead gave up, or there was none
    to ask), or that was marked impossible. A run that has ended goes on (resumed here)."""
    settings = load_settings(**options)
    if not settings.db_path.exists():
        raise UserError(f"no event log at {settings.db_path}", hint="pass --db, the log the run wrote")
    with EventStore.open(settings.db_path) as store:
        state = Fold(store, run_id).catch_up()
        task = _retryable(state, run_id, task_id)
        live = state.process_alive()
        if task.id in state.retried and state.states[task.id].status == "pending":
            if live:  # asked already, and the run will start it
                click.echo(f"{task.id} is reopened already (run {run_id}); the running fleet starts it")
                return
            click.echo(f"{task.id} is reopened already; run {run_id} goes on:")
            _resume(settings, run_id, into)
        _affordable(state, inherit(settings, state.settings), run_id)
        edited = _edited(state, task) if edit else None
        asked = TaskRetryAsked(task=task.id, edited=edited or {})
        written = store.append(run_id, PERSON, asked.kind, asked.data())
        changed = " as you edited it" if edited else ""
        if live and _picked_up(store, run_id, task.id, written.id):
            click.echo(f"{task.id} reopened{changed} (run {run_id}); the running fleet starts it")
            return
    click.echo(f"{task.id} reopened{changed}; run {run_id} goes on:")
    _resume(settings, run_id, into)


def _picked_up(store: EventStore, run: str, task: str, asked: int, wait_s: float = 15.0) -> bool:
    """Whether the live run takes the reopened task: it starts it, or is still running after `wait_s`.
    False when it ended meanwhile (it may have been leaving its loop as the request came): then this
    command resumes it."""
    fold = Fold(store, run)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        state = fold.catch_up()
        if task not in state.retried:
            return True
        if state.process_alive() is False or any(
            e.id > asked for e in store.events(run=run, kinds=["fleet_finished"])
        ):
            return False
        time.sleep(0.2)
    return True


def _affordable(state: FleetState, settings: Settings, run: str) -> None:
    """Refuse a retry the run's cost cap would stop at once."""
    cap = settings.fleet.max_cost_usd
    if state.spent_usd >= cap:
        raise UserError(
            f"run {run} has spent ${state.spent_usd:.2f} of its ${cap:g} cost cap: a retry would stop now",
            hint="raise the cap for the rest of the run with --max-cost USD",
        )


def _retryable(state: FleetState, run: str, task_id: str) -> Task:
    if state.started is None or state.plan is None:
        raise UserError(f"no fleet run {run!r} in the log", hint="`hilbert runs` lists them")
    task = next((t for t in state.plan.tasks if t.id == task_id), None)
    if task is None:
        raise UserError(
            f"run {run} has no task {task_id!r}",
            hint=f"its tasks: {', '.join(t.id for t in state.plan.tasks)}",
        )
    status = state.states[task.id].status
    if status == "pending" and task.id in state.retried:
        return task  # reopened already: its resume had not started (a refused model, a live run ending)
    if status not in RETRYABLE:
        raise UserError(
            f"{task.id} is {status.replace('_', ' ')}: only a task that needs you, or is escalated or "
            "impossible, is retried",
            hint=f"`hilbert status --run {run}` shows where each task stands",
        )
    return task


def _edited(state: FleetState, task: Task) -> dict[str, Any] | None:
    """The task as the person edits it (its id and dependencies kept); None when they changed nothing."""
    assert state.plan is not None
    shown = EDIT_NOTE + write_plan(
        Plan(goal=state.plan.goal, tasks=(task.model_copy(update={"depends_on": ()}),))
    )
    text = click.edit(shown, extension=".md")
    if text is None or text == shown:
        return None
    plan = parse_plan(text.replace(EDIT_NOTE, ""), source=f"{task.id} as edited")
    if len(plan.tasks) != 1 or plan.tasks[0].id != task.id:
        raise UserError(
            f"the edited text must hold one task, {task.id}",
            hint="keep its '## ID — Title' heading as it was",
        )
    return plan.tasks[0].model_copy(update={"depends_on": task.depends_on}).model_dump(mode="json")


def _resume(settings: Settings, run: str, into: str | None) -> NoReturn:
    """Go on with the run that had ended, here in the foreground, as `hilbert run --resume RUN`."""
    from hilbert.ui.edge import command_runner
    from hilbert.ui.fleet_commands import resume_command

    runner = command_runner(settings)
    resumed = asyncio.run(resume_command(settings, run, None, runner=runner, into=into))
    sys.exit(0 if resumed is None or resumed.all_done else 1)
