"""`hilbert demo --climb`: three explorers climb the sample project's slow function against the fake
server's optimiser, offline, and the leaderboard shows what was kept, what was reverted and why (the
gaming tries among them), with the sealed holdout's verdict on the kept best."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import click

from hilbert.climb.driver import ClimbOptions, climb, deliver_best, open_climb, results_path
from hilbert.climb.results import leaderboard
from hilbert.commands import command_env
from hilbert.models import PriceTable, make_model
from hilbert.settings import CommandSettings, Settings
from hilbert.sim.demo.single import SONNET_LIKE_PRICE, fresh_demo_dir
from hilbert.sim.optimiser.sample import METRIC, TESTS_COMMAND, write_holdout, write_sample
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.ui.edge import command_runner


async def run_climb_demo(
    directory: Path, *, seed: int | None, tries: int = 6, unsandboxed: bool = False
) -> bool:
    seed = random.randrange(100_000) if seed is None else seed
    directory = fresh_demo_dir(directory)
    repo = write_sample(directory / "project")
    holdout = write_holdout(directory / "sealed")
    click.secho(f"hilbert demo --climb — seed {seed}: make `{METRIC}` faster in {repo}", bold=True)
    click.echo(
        f"3 explorers (the fake server's optimiser), {tries} tries; holdout sealed in {holdout.parent}"
    )
    with FakeServer("optimiser", seed=seed) as server:
        model_name = f"openai:fake-optimiser@{server.openai_base_url}"
        settings = Settings(  # hilbert's home is hidden from every command: the holdout lives beside it
            home=directory / "home", db=directory / "hilbert.db", model=model_name, unsandboxed=unsandboxed,
            commands=CommandSettings(test=TESTS_COMMAND),
        )  # fmt: skip
        prices = PriceTable.default().with_overrides({"fake-optimiser": SONNET_LIKE_PRICE})
        model = make_model(model_name, prices=prices, env={})
        runner = command_runner(settings, command_env(hilbert_python_first=True))
        options = ClimbOptions(
            repo,
            METRIC,
            "min",
            TESTS_COMMAND,
            explorers=3,
            tries=tries,
            repeat=3,
            holdout=f"python {holdout}",
            metric_kind="time",  # timed by the harness, not read from what it prints
        )
        run = f"climb-demo-{uuid.uuid4().hex[:6]}"
        with EventStore.open(settings.db_path) as store:
            root = directory / "runs" / run
            async with open_climb(options, run=run, root=root, store=store, runner=runner, model=model) as c:
                state = await climb(c, lambda line: click.echo(f"  {line}"))
                branch = await deliver_best(c)
                tsv = results_path(c)
    click.echo("\n".join(leaderboard(state)))
    click.echo(f"every try: {tsv}")
    click.echo(f"the best: `git -C {repo} log -p {branch}`")
    return bool(state.kept)


__all__ = ["run_climb_demo"]
