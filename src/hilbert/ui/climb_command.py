"""`hilbert climb`: explorers try ideas against a metric; the harness measures, keeps or reverts
(`hilbert.climb`, docs/design/climb.md). `--status` prints a climb's leaderboard; `--resume` goes on
with a climb whose process died (everything it needs is in the log)."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hilbert.errors import UserError
from hilbert.settings import Settings
from hilbert.ui.config_command import load_settings

if TYPE_CHECKING:
    from hilbert.climb.driver import ClimbOptions
    from hilbert.store import EventStore


@click.command()
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The git repository to climb (only read; the best lands there as a new branch).",
)
@click.option("--metric", help="The command that prints the number, on its last line of output.")
@click.option(
    "--metric-kind",
    "metric_kind",
    type=click.Choice(["number", "time"]),
    default="number",
    show_default=True,
    help="time: the harness times the metric's whole process tree (CPU seconds) and reads no number; "
    "number: the number it prints on its last line is the score.",
)
@click.option(
    "--check",
    default="",
    help="A command whose output is the answer a try must keep (default: the metric's output without "
    "its number), run by the harness beside the metric with the same input seed.",
)
@click.option(
    "--goal", type=click.Choice(["min", "max"]), default="min", show_default=True, help="Which way is better."
)
@click.option(
    "--explorers", type=click.IntRange(1, 64), default=3, show_default=True, help="Explorers at once."
)
@click.option(
    "--tries", type=click.IntRange(0), default=0, help="Stop after this many tries (0: budgets only)."
)
@click.option(
    "--max-cost", "max_cost", type=click.FloatRange(0), default=0.0, help="Stop at this spend, USD (0: none)."
)
@click.option(
    "--max-time", "max_time", type=click.FloatRange(0), default=0.0, help="Stop after seconds (0: none)."
)
@click.option(
    "--repeat",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="Measurements per commit; the median counts.",
)
@click.option(
    "--renoise-every",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="Measure the best again every K tries (its spread is the noise).",
)
@click.option(
    "--guard",
    "guards",
    multiple=True,
    metavar="GLOB",
    help="Files the metric depends on (its data); a try that changes one is rejected.",
)
@click.option(
    "--holdout-metric",
    "holdout",
    default="",
    help="A sealed second metric (its files outside the repository, by absolute path): "
    "run by the harness on each kept best, hidden from the explorers, never in a prompt.",
)
@click.option(
    "--stop-on-overfit",
    is_flag=True,
    help="End the climb when a kept best improves the metric but not the holdout.",
)
@click.option("--test-command", help="The tests every try must pass (default: commands.test).")
@click.option("--model", "-m", help="The explorers' model, e.g. anthropic:claude-sonnet-4-5.")
@click.option("--run", "run_id", help="The climb's run id (with --resume or --status).")
@click.option("--resume", is_flag=True, help="Go on with the climb --run names.")
@click.option("--status", "show_status", is_flag=True, help="Print a climb's leaderboard and exit.")
@click.option("--yes", "-y", is_flag=True, help="Start without asking.")
@click.option(
    "--unsandboxed",
    is_flag=True,
    default=None,
    help="Accept running explorers' commands without a sandbox when this machine has none.",
)
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), help="Event log file.")
def climb(
    repo: Path, metric: str | None, goal: str, explorers: int, tries: int, max_cost: float, max_time: float,
    repeat: int, renoise_every: int, guards: tuple[str, ...], run_id: str | None, resume: bool,
    show_status: bool, yes: bool, holdout: str, stop_on_overfit: bool, metric_kind: str, check: str,
    **options: Any,
) -> None:  # fmt: skip
    """Climb a metric: explorers try ideas, the harness measures each, keeps the better, reverts the rest."""
    from hilbert.climb.driver import ClimbOptions
    from hilbert.climb.results import leaderboard
    from hilbert.climb.state import ClimbFold, is_climb
    from hilbert.store import EventStore

    settings = load_settings(**options)
    if show_status:
        if not settings.db_path.exists():
            raise UserError(f"no event log at {settings.db_path}", hint="start a climb first, or pass --db")
        with EventStore.open(settings.db_path) as store:
            run = run_id or _latest_climb(store)
            if not is_climb(store, run):
                raise UserError(f"run {run} is not a climb", hint="`hilbert runs` lists the fleet runs")
            click.echo("\n".join(leaderboard(ClimbFold(store, run).catch_up())))
        return
    if resume and not run_id:
        raise UserError("--resume needs the climb's --run", hint="`hilbert climb --status` names the latest")
    chosen: ClimbOptions | None = None
    if not resume:
        if not metric:
            raise UserError("no metric given", hint='pass --metric "python bench.py" (it prints one number)')
        if not (repo / ".git").exists():
            raise UserError(f"{repo} is not a git repository", hint="pass --repo DIR of a git checkout")
        chosen = ClimbOptions(
            repo, metric, goal, settings.commands.test, explorers, tries, repeat, renoise_every,
            max_cost, max_time, guards, holdout, stop_on_overfit, metric_kind, check,
        )  # fmt: skip
        if not yes and not click.confirm(f"Climb `{metric}` ({goal}) with {explorers} explorers?"):
            return
    run = run_id or f"climb-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    lines = asyncio.run(climb_and_report(settings, chosen, run, echo=click.echo))
    click.echo("\n".join(lines))
    sys.exit(0)


async def climb_and_report(
    settings: Settings, options: ClimbOptions | None, run: str, *, echo: Callable[[str], None]
) -> list[str]:
    """The command line's climb: the runner and the model from the settings, the climb, the best
    delivered to the person's repository; the leaderboard's lines."""
    from hilbert.climb.driver import climb, deliver_best, open_climb, results_path
    from hilbert.climb.results import leaderboard
    from hilbert.store import EventStore
    from hilbert.ui.edge import command_runner
    from hilbert.ui.fleet_commands import model_from

    runner = command_runner(settings)  # fails closed before the model is asked anything
    model = model_from(settings)
    settings.home.mkdir(parents=True, exist_ok=True)
    with EventStore.open(settings.db_path) as store:
        root = settings.home / "runs" / run
        async with open_climb(options, run=run, root=root, store=store, runner=runner, model=model) as c:
            echo(f"climb {run}: log {settings.db_path}, results {results_path(c)}")
            state = await climb(c, echo)
            branch = await deliver_best(c)
    repo = state.started.repo if state.started else "?"
    return [*leaderboard(state), f"the best is on branch {branch} of {repo}"]


def climb_board(store: EventStore, run: str) -> list[str] | None:
    """`hilbert status` on a climb run: its leaderboard; None for a run that is not a climb."""
    from hilbert.climb.results import leaderboard
    from hilbert.climb.state import ClimbFold, is_climb

    return leaderboard(ClimbFold(store, run).catch_up()) if is_climb(store, run) else None


def _latest_climb(store: Any) -> str:
    started = store.events(kinds=["climb_started"])
    if not started:
        raise UserError(f"no climb in {store.path}", hint="start one with `hilbert climb --metric CMD`")
    return str(started[-1].run)
