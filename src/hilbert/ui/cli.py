"""The `hilbert` command line: the only place that prints errors for a person.

Commands: `agent` (one agent on a task), `demo` (the offline demo), `fake-server`, `sample-project`
(the simulation's, from `hilbert.ui.sim_commands`),
`log`, the fleet's (`plan`, `run`, `status`, `top`, `send`, `stop`, `logs`, `ask`, `approve`, `reject`;
`report`, from `hilbert.ui.report_command`; `web`, from `hilbert.ui.web_command`; which run they are
about: `hilbert.ui.run_select`),
the judge's (`judge`, `hook stop`, from `hilbert.ui.judge_commands`) and `config` (every setting and
its source, `hilbert.ui.config_command`). Each builds `Settings` once (`load_settings`: its flags on
top of `HILBERT_*`, `hilbert.toml` and the defaults) and passes it down; `asyncio.run` happens in
the commands, nowhere deeper. A `HilbertError` becomes one line `hilbert: error: ...` with its hint
and exit status 2; never a traceback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import click

from hilbert.errors import HilbertError, RunError, UserError
from hilbert.security.redact import Redactor
from hilbert.settings import Settings
from hilbert.ui.config_command import load_settings
from hilbert.ui.run_select import open_run


class _Cli(click.Group):
    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Like click's main, but this is the one place that turns errors into a line."""
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("hilbert: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as bad:
            where = bad.ctx.command_path if bad.ctx else "hilbert"
            click.echo(f"hilbert: error: {bad.format_message()} — see `{where} --help`", err=True)
            sys.exit(bad.exit_code)
        except click.ClickException as bad:
            click.echo(f"hilbert: error: {bad.format_message()}", err=True)
            sys.exit(bad.exit_code)
        except HilbertError as error:
            click.echo(f"hilbert: error: {Redactor.from_env(os.environ).redact(str(error))}", err=True)
            sys.exit(2)
        except OSError as error:  # a file-system or network refusal no command turned into a HilbertError
            where = f": {error.filename}" if error.filename else ""
            click.echo(f"hilbert: error: {error.strerror or error}{where}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("hilbert: interrupted", err=True)
            sys.exit(130)


_UNSANDBOXED = click.option(
    "--unsandboxed",
    is_flag=True,
    default=None,
    help="Accept running agents' commands without a sandbox when this machine has none (bubblewrap).",
)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hilbert")
def cli() -> None:
    """hilbert: run coding agents on one goal, and keep them honest."""


@cli.command()
@click.argument("task")
@click.option(
    "--model", "-m", help="Model name, e.g. anthropic:claude-sonnet-4-5 or openai:NAME@http://host:port/v1."
)
@click.option(
    "--workspace",
    "-w",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The directory the agent works in (created if missing).",
)
@click.option("--name", default="Poincaré", show_default=True, help="The agent's name.")
@click.option("--max-turns", type=int, help="Stop after this many model calls (default 60).")
@click.option(
    "--max-cost", "max_cost_usd", type=float, help="Stop once the estimated cost reaches this (USD)."
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log file (default ~/.hilbert/hilbert.db).",
)
@click.option(
    "--context",
    metavar="SPEC",
    help="Context compaction: none, mask:M,P, forget:K,B, summary:B or hybrid:M,P,B (default: hilbert's).",
)
@_UNSANDBOXED
def agent(task: str, workspace: Path, name: str, context: str | None, **options: Any) -> None:
    """Run one agent on TASK in a workspace, printing what it does."""
    from hilbert.ui.edge import command_runner
    from hilbert.ui.run_agent import run_one_agent

    settings = load_settings(context=context, **options)
    runner = command_runner(settings)  # fails closed before the model is asked anything
    run = f"run-{uuid.uuid4().hex[:8]}"
    result = asyncio.run(
        run_one_agent(settings, task=task, workspace=workspace, name=name, run=run, runner=runner)
    )
    if result.status == "error":  # the model failed for good: say what to do, in one line
        raise RunError(result.reason)
    sys.exit(0 if result.status == "finished" else 1)


_REPO = click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The git repository to work on (never written: the run works in a clone).",
)
_MODEL = click.option("--model", "-m", help="Model name, e.g. anthropic:claude-sonnet-4-5.")
_DB = click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log file (default ~/.hilbert/hilbert.db).",
)


@cli.command()
@click.argument("goal")
@_REPO
@_MODEL
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the plan (default ./PLAN.md, or REPO-PLAN.md beside the repo when run inside it).",
)
@click.option("--force", is_flag=True, help="Replace the plan at --out if there is one already.")
@_UNSANDBOXED
@_DB
def plan(goal: str, repo: Path, out: Path | None, force: bool, **options: Any) -> None:
    """The lead explores a disposable checkout of the repository's HEAD (your repository is only read)
    and writes PLAN.md: tasks, each with a verify command."""
    from hilbert.ui.edge import command_runner
    from hilbert.ui.fleet_commands import default_plan_path, plan_command

    settings = load_settings(**options)
    runner = command_runner(settings)
    out = out or default_plan_path(repo)
    asyncio.run(plan_command(settings, goal, repo, out, runner=runner, force=force))


@cli.command()
@click.argument("goal", required=False)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The plan to carry out (written by `hilbert plan`, edited by you).",
)
@click.option("--yes", "-y", is_flag=True, help="With GOAL: run the lead's plan without asking first.")
@click.option(
    "--force", is_flag=True, help="With GOAL: replace the plan the lead writes if there is one already."
)
@_REPO
@_MODEL
@click.option("--lead-model", help="The lead's model (planning, escalations); default: --model.")
@click.option("--judge-model", help="The stop gate's judge model, of another family than --model.")
@click.option(
    "--context",
    metavar="SPEC",
    help="How workers' contexts are compacted: none, mask:M,P, forget:K,B, summary:B or hybrid:M,P,B.",
)
@_UNSANDBOXED
@click.option("--workers", type=click.IntRange(1, 1024), help="Workers thinking at once (default 4).")
@click.option(
    "--max-cost",
    "run_cost",
    type=float,
    help="The whole run's cost cap in USD (default 50): workers halt (work kept) once it is spent.",
)
@click.option(
    "--budget",
    metavar="CAP=VALUE",
    multiple=True,
    help="A budget cap ([budgets] in hilbert.toml): task_usd=2, run_tokens=1000000, agent_wall_s=900, ...",
)
@click.option(
    "--test-command", help='The project\'s tests, run by the merge queue (default "python -m pytest -q").'
)
@click.option(
    "--resume",
    "resume",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[RUN]",
    help="Go on with a run whose process died (default: the latest interrupted run on --repo). "
    "Workers, budgets, timeouts and models may change; the plan, repository and base do not.",
)
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Run on a snapshot of your uncommitted changes (committed in the run's own clone, not in your "
    "repository) instead of refusing a dirty working tree.",
)
@click.option(
    "--into",
    metavar="BRANCH",
    help="The branch of your repository the result is fetched into (default hilbert/RUN); "
    "refused if it is checked out or would not fast-forward.",
)
@_DB
def run(
    goal: str | None,
    plan_file: Path | None,
    yes: bool,
    force: bool,
    repo: Path,
    resume: str | None,
    into: str | None,
    allow_dirty: bool,
    **options: Any,
) -> None:
    """Carry out a plan (--plan PLAN.md, or GOAL: the lead plans it first) with named workers;
    verified work lands on hilbert/integration. Ctrl-C once stops cleanly (work kept, resumable with
    --resume); twice exits at once."""
    from hilbert.fleet.crash import Crashes
    from hilbert.ui.edge import command_runner
    from hilbert.ui.fleet_commands import (
        check_clean,
        check_into,
        default_plan_path,
        plan_command,
        preflight,
        resume_command,
        run_again,
        run_command,
    )

    crashes = Crashes.from_env(os.environ)  # test only: where the orchestrator kills itself
    if resume is not None:
        if goal is not None or plan_file is not None:
            raise UserError("--resume goes on with a run's own plan", hint="drop GOAL and --plan")
        settings = load_settings(**options)
        runner = command_runner(settings)
        named = resume or None
        resumed = asyncio.run(
            resume_command(settings, named, repo, runner=runner, crashes=crashes, into=into)
        )
        sys.exit(0 if resumed is None or resumed.all_done else 1)
    if (goal is None) == (plan_file is None):
        raise UserError(
            "give either a GOAL or --plan PLAN.md" + (", not both" if goal else ""),
            hint='hilbert run --plan PLAN.md, or hilbert run "GOAL" --yes to plan and run in one go',
        )
    if yes and goal is None:
        raise UserError("--yes goes with a GOAL (plan, then run without asking)", hint="drop --yes")
    settings = load_settings(**options)
    runner = command_runner(settings)  # fails closed before the lead spends anything
    if into is not None:  # before the lead spends anything
        asyncio.run(check_into(settings, repo, into))
    if goal is not None:  # before the lead spends anything: who confirms, the repository, every model
        plan_file = default_plan_path(repo)
        if not yes and not sys.stdin.isatty():
            raise UserError(
                "nobody is at the terminal to confirm the plan before it runs",
                hint=f'pass --yes to run it at once, or `hilbert plan "{goal}"` and review it first',
            )
        if allow_dirty:
            raise UserError(
                "--allow-dirty goes with --plan: the lead plans from a checkout of HEAD and would not "
                "see your uncommitted changes",
                hint="commit them first, or write PLAN.md yourself and run it with --plan and --allow-dirty",
            )
        asyncio.run(preflight(settings, repo))
        asyncio.run(check_clean(settings, repo, allow_dirty=False))
        asyncio.run(
            plan_command(settings, goal, repo, plan_file, runner=runner, next_step=False, force=force)
        )
        if not yes and not click.confirm("Run this plan now?"):
            click.echo(f"not run: the plan is in {plan_file}; review it, then run it with:")
            click.echo(f"  {run_again(settings, plan_file, repo)}")
            return
    assert plan_file is not None
    result = asyncio.run(
        run_command(
            settings, plan_file, repo, runner=runner, crashes=crashes, into=into, allow_dirty=allow_dirty
        )
    )
    sys.exit(0 if result.all_done else 1)


_RUN = click.option("--run", "run_id", help="Which run (default: the latest).")


@cli.command()
@_DB
def runs(db: Path | None) -> None:
    """The fleet runs in the log, oldest first: id, state (live, interrupted, finished), age, tasks
    done, repository."""
    from hilbert.fleet.state import Fold
    from hilbert.store import EventStore
    from hilbert.ui.fleet_views import runs_table

    settings = Settings.load({"db": db})
    if not settings.db_path.exists():
        raise UserError(f"no event log at {settings.db_path}", hint="start a run first, or pass --db")
    with EventStore.open(settings.db_path) as store:
        started = store.events(kinds=["fleet_started"])
        states = [Fold(store, e.run).catch_up() for e in started]
    if not states:
        click.echo(f"no fleet run in {settings.db_path}")
        return
    click.echo("\n".join(runs_table(states, {e.run: e.time for e in started})))


@cli.command()
@_RUN
@_DB
@click.option("--watch", "-w", is_flag=True, help="Refresh every second until the run ends (or Ctrl-C).")
def status(run_id: str | None, db: Path | None, watch: bool) -> None:
    """One line per agent: name, task, state, turns, tokens, cost, age of its last event; then the
    scope changes waiting for your approval, and what the machine's rate-limit governor does for the
    run's models (calls at once, limits, a pause, the circuit breaker, its newest notices)."""
    from hilbert.fleet.proposals import pending_lines
    from hilbert.fleet.state import Fold
    from hilbert.ui.climb_command import climb_board
    from hilbert.ui.fleet_views import run_ended, status_lines
    from hilbert.ui.top_view import governor_lines
    from hilbert.views.governor import for_run

    settings = Settings.load({"db": db})
    with open_run(db, run_id) as (store, run):
        if (board := climb_board(store, run)) is not None:  # a climb: its leaderboard
            click.echo("\n".join(board))
            return
        fold = Fold(store, run)  # each refresh applies only the events since the last
        while True:
            state = fold.catch_up()
            ended = run_ended(state)
            lines = status_lines(state) or ["(no agents yet)"]
            lines += pending_lines(store, run, ended=ended)
            at = time.time()
            if governed := governor_lines(for_run(state, settings, at), at):
                lines += ["governor (this machine's, shared by every run on the same key; now):"]
                lines += [f"  {line}" for line in governed]
            if watch:
                click.clear()
                now = "ended" if ended else "running; Ctrl-C to stop watching"
                click.echo(f"run {run} at {time.strftime('%H:%M:%S')} — {now}")
            click.echo("\n".join(lines))
            if not watch or ended:
                return
            time.sleep(1.0)


@cli.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@_DB
@_MODEL
def top(run_id: str | None, db: Path | None, model: str | None) -> None:
    """A live terminal UI over a run (the latest unless named), running or finished: the agents table,
    the selected agent's transcript, verdicts, messages, proposals and budgets; keys a (ask, by --model
    if given), s (send), x / X (stop the agent / the run), p (approve), q (quit)."""
    from hilbert.ui.top import TopApp

    with open_run(db, run_id) as (store, run):
        settings = Settings.load({"db": db, "lead_model": model})  # who answers `ask`: the lead's model
        TopApp(store, run, settings).run()


@cli.command()
@click.argument("name")
@click.argument("text")
@_RUN
@_DB
def send(name: str, text: str, run_id: str | None, db: Path | None) -> None:
    """Send NAME a message; it is delivered at the agent's next turn boundary."""
    from hilbert.ui.fleet_actions import send_message

    with open_run(db, run_id) as (store, run):
        click.echo(send_message(store, run, name, text))


@cli.command()
@click.argument("name", required=False)
@_RUN
@_DB
def stop(name: str | None, run_id: str | None, db: Path | None) -> None:
    """Stop one worker (its work is kept), or with no NAME the whole run, cleanly."""
    from hilbert.ui.fleet_actions import stop_agents

    with open_run(db, run_id) as (store, run):
        click.echo(stop_agents(store, run, name))


@cli.command()
@click.argument("proposal")
@click.option(
    "--by", type=float, help="A budget question (B1): raise its cap by this much (default: as set)."
)
@_RUN
@_DB
def approve(proposal: str, by: float | None, run_id: str | None, db: Path | None) -> None:
    """Approve PROPOSAL (P1, ...): a scope change the lead made after reading a worker's message (the
    running fleet applies it if it still applies), or the candidate of a worker that read a peer's
    message (it goes to the merge queue; after the run ended, when you run `hilbert run --resume`);
    or raise the cap of a budget question (B1, ...), one you rejected too: the work waiting on it goes
    on (work a rejection halted: `hilbert retry RUN TASK`)."""
    from hilbert.ui.fleet_actions import approve_proposal

    with open_run(db, run_id) as (store, run):
        click.echo(approve_proposal(store, run, proposal, by=by))


@cli.command()
@click.argument("proposal")
@click.option("--why", default="", help="Your reason, passed on to the lead.")
@_RUN
@_DB
def reject(proposal: str, why: str, run_id: str | None, db: Path | None) -> None:
    """Reject PROPOSAL (P1, ...): the scope change the lead made after reading a worker's message is
    never applied; or refuse to raise the cap of a budget question (B1, ...): the work waiting on it
    halts, kept (`hilbert approve B1` later raises it after all)."""
    from hilbert.ui.fleet_actions import reject_proposal

    with open_run(db, run_id) as (store, run):
        click.echo(reject_proposal(store, run, proposal, why))


@cli.command()
@click.argument("name")
@_RUN
@_DB
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they arrive.")
def logs(name: str, run_id: str | None, db: Path | None, follow: bool) -> None:
    """NAME's events, readably."""
    from hilbert.fleet.state import Fold
    from hilbert.ui.fleet_views import find_agent
    from hilbert.ui.log_view import print_log

    with open_run(db, run_id) as (store, run):
        print_log(store, run=run, agent=find_agent(Fold(store, run).catch_up(), name), follow=follow)


@cli.command()
@click.argument("name")
@click.argument("question", default="How is it going?")
@_RUN
@_DB
@_MODEL
def ask(name: str, question: str, run_id: str | None, db: Path | None, model: str | None) -> None:
    """Ask how NAME is doing: answered from its state and recent events (by --model if given)."""
    from hilbert.fleet.state import Fold
    from hilbert.ui.fleet_commands import ask_command
    from hilbert.ui.fleet_views import find_agent

    with open_run(db, run_id) as (store, run):
        agent = find_agent(Fold(store, run).catch_up(), name)
        settings = Settings.load({"db": db, "lead_model": model})  # who answers: the lead's model
        click.echo(store.redactor.redact(asyncio.run(ask_command(settings, store, run, agent, question))))


@cli.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log file (default ~/.hilbert/hilbert.db).",
)
@click.option("--run", "run_id", help="Only this run (default: the latest).")
@click.option("--agent", "agent_name", help="Only this agent.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they arrive.")
def log(db: Path | None, run_id: str | None, agent_name: str | None, follow: bool) -> None:
    """Print the event log readably."""
    from hilbert.store import EventStore
    from hilbert.ui.log_view import print_log

    settings = Settings.load({"db": db})
    if not settings.db_path.exists():
        raise UserError(f"no event log at {settings.db_path}", hint="run an agent first, or pass --db")
    with EventStore.open(settings.db_path) as store:
        runs = store.runs()
        if run_id is not None and run_id not in runs:
            raise UserError(
                f"no run {run_id!r} in {settings.db_path}", hint=f"known runs: {', '.join(runs[-5:])}"
            )
        print_log(store, run=run_id or (runs[-1] if runs else None), agent=agent_name, follow=follow)


def _add_commands() -> None:
    from hilbert.ui.climb_command import climb
    from hilbert.ui.config_command import config
    from hilbert.ui.judge_commands import hook, judge
    from hilbert.ui.report_command import report
    from hilbert.ui.retry_command import retry
    from hilbert.ui.sim_commands import demo, fake_server, sample_project
    from hilbert.ui.web_command import web

    for command in (demo, fake_server, sample_project, judge, hook, config, retry, report, web, climb):
        cli.add_command(command)


_add_commands()


def main() -> None:
    # SIGTERM ends hilbert like Ctrl-C does: tasks are cancelled, so child processes are killed and
    # every agent's log records how it ended.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    cli()


if __name__ == "__main__":
    main()
