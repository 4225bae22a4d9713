"""Running one agent from the command line, with its progress printed live from the event log.

The printer is a reader of the log like any other view: it follows the store while the agent runs
and prints each event as it is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import click

from hilbert.agent.loop import AgentResult, run_agent
from hilbert.agent.policies import CostLimit, TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner
from hilbert.context.policy import compaction_for
from hilbert.errors import UserError
from hilbert.models import PriceTable
from hilbert.models.types import Model
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.ui.edge import models as edge_models
from hilbert.ui.log_view import format_event


async def run_one_agent(
    settings: Settings,
    *,
    task: str,
    workspace: Path,
    name: str,
    run: str,
    runner: Runner,
    model: Model | None = None,
    echo: Callable[[str], None] = click.echo,
) -> AgentResult:
    """Run one agent in `workspace`, printing each event as it lands in the log, then a summary.
    The model is built from the settings unless one is given; `runner` runs the agent's commands (built
    at the edge: its sandbox, policy and environment); the compaction spec is
    `settings.context.strategy`."""
    if model is None:
        if not settings.model:
            raise UserError("no model given", hint="pass --model, e.g. --model anthropic:claude-sonnet-4-5")
        prices = PriceTable.default().with_overrides(settings.prices)
        if not prices.known(settings.model):
            echo(
                f"note: no price known for {settings.model}: costs show as $0 and --max-cost cannot stop it"
                f' (add [prices."{settings.model.split("@")[0]}"] to hilbert.toml)'
            )
        model = edge_models(settings).for_role("worker", settings.model)
    workspace.mkdir(parents=True, exist_ok=True)
    toolbox = ToolBox(workspace, runner=runner)
    started = time.monotonic()
    with EventStore.open(settings.db_path) as store:
        compaction = compaction_for(settings.context.strategy, model=model, store=store)
        policies = [
            TurnLimit(settings.budgets.max_turns),
            CostLimit(settings.budgets.max_cost_usd),
            compaction,
        ]
        redact = store.redactor.redact  # the summary below prints the model's words, not the log's
        echo(f"run {run}: agent {name} on {model.name} in {toolbox.root} (log: {settings.db_path})")
        echo(f"its commands: {runner.describe()}")
        async with printing(store, run, echo):
            result = await run_agent(
                run=run, agent=name, task=task, model=model, toolbox=toolbox, store=store, policies=policies
            )
    usage = result.usage
    echo(
        f"\n{name}: {result.status}"
        + (f" — {redact(result.reason)}" if result.reason else "")
        + f"\n  turns {result.turns}, tokens in {usage.input_tokens:,} ({usage.cache_read_tokens:,} cached),"
        f" out {usage.output_tokens:,}, est. cost ${result.cost_usd:.4f}, {time.monotonic() - started:.1f}s"
    )
    if result.claim:
        echo(f"  claim: {redact(result.claim)}")
    return result


class EventPrinter:
    """Prints a run's events (of `kinds`, or all) in commit order, each once, as they appear in the log."""

    def __init__(
        self,
        store: EventStore,
        run: str,
        echo: Callable[[str], None],
        kinds: Sequence[str] | None = None,
        after_id: int = 0,
    ) -> None:
        self.store, self.run, self.echo, self.kinds = store, run, echo, kinds
        self.after_id = after_id

    def flush(self) -> None:
        for event in self.store.events(run=self.run, kinds=self.kinds, after_id=self.after_id):
            self.echo(format_event(event, self.store))
            self.after_id = event.id

    async def follow(self, interval_s: float = 0.05) -> None:
        while True:
            self.flush()
            await asyncio.sleep(interval_s)


@contextlib.asynccontextmanager
async def printing(
    store: EventStore,
    run: str,
    echo: Callable[[str], None],
    kinds: Sequence[str] | None = None,
    after_id: int = 0,
) -> AsyncIterator[None]:
    """Print `run`'s events (of `kinds`, or all; those after `after_id`) as they are committed while the
    body runs, and the last ones after it."""
    printer = EventPrinter(store, run, echo, kinds, after_id)
    following = asyncio.create_task(printer.follow())
    try:
        yield
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        printer.flush()
