"""The simulation's commands: `hilbert demo` (the offline demo), `hilbert fake-server` (the fake model
server, its responders from `hilbert.sim`) and `hilbert sample-project`. They import `hilbert.sim`
lazily, when run; `hilbert.ui.cli` adds them to the command line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from hilbert.errors import UserError


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default="demo-run",
    show_default=True,
    help="Where the demo writes its sample project and event log.",
)
@click.option("--seed", type=int, help="Sample-project seed (default: random, printed).")
@click.option(
    "--workers", type=click.IntRange(1, 128), default=16, show_default=True, help="Workers thinking at once."
)
@click.option("--single", is_flag=True, help="The one-agent demo instead: one agent fixes one bug.")
@click.option(
    "--climb", is_flag=True, help="The climb demo instead: three explorers speed up a slow function."
)
@click.option(
    "--protocol",
    type=click.Choice(["openai", "openai-responses", "anthropic"]),
    default="anthropic",
    show_default=True,
    help="With --single: the wire protocol the agent uses to reach the fake model.",
)
@click.option("--unsandboxed", is_flag=True, help="Accept running the workers' commands without a sandbox.")
def demo(
    directory: Path,
    seed: int | None,
    workers: int,
    single: bool,
    climb: bool,
    protocol: str,
    unsandboxed: bool,
) -> None:
    """Offline demo: a lead and a fleet of workers fix a generated project against the fake model server."""
    if climb:
        from hilbert.sim.demo.climb import run_climb_demo

        ok = asyncio.run(run_climb_demo(directory, seed=seed, unsandboxed=unsandboxed))
    elif single:
        from hilbert.sim.demo.single import run_demo

        ok = asyncio.run(run_demo(directory, seed=seed, protocol=protocol, unsandboxed=unsandboxed))
    else:
        from hilbert.sim.demo.fleet import run_fleet_demo

        ok = asyncio.run(run_fleet_demo(directory, seed=seed, workers=workers, unsandboxed=unsandboxed))
    sys.exit(0 if ok else 1)


@click.command("fake-server")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="TCP port on 127.0.0.1 (0: any free port).",
)
@click.option(
    "--responder",
    "--policy",
    "responder",
    default="engineer",
    show_default=True,
    help="Who answers: engineer, scripted:file=PATH, ... (NAME or NAME:key=value,...; --policy: old name).",
)
@click.option("--latency", help="Latency spec, e.g. realistic or ttft=0.5,tps=80.")
@click.option(
    "--faults",
    help="Fault rates, e.g. 429=0.1,529=0.05,truncate=0.05 (kinds: 429 500 529 hang truncate badjson"
    " 401 404 overflow refused; options retry_after=S, hang_s=S).",
)
@click.option(
    "--rate-limit",
    help="Rate limits per API key and model, answered with real 429s and rate-limit headers, e.g."
    " rpm=600,itpm=200000,otpm=40000 (requests, input and output tokens per minute); change_after=S,factor=F"
    " multiplies them by F once S seconds have passed since the first request.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for faults, latency, responders.")
@click.option(
    "--record",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append every request as JSON lines here.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
def fake_server(**options: Any) -> None:
    """Run the fake model server (OpenAI Chat, OpenAI Responses, Anthropic Messages)."""
    import hilbert.sim  # noqa: F401  (registers the simulation's responders: engineer, lead, ...)
    from hilbert.testing.fake_server import serve

    serve(**options)


@click.command("sample-project")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="Which project and bug(s).")
@click.option("--bugs", type=int, default=1, show_default=True, help="How many bugs to inject.")
def sample_project(dest: Path, seed: int, bugs: int) -> None:
    """Generate a small Python project whose tests fail because of injected bugs."""
    from hilbert.sim.sample import generate_sample_project

    if dest.exists() and any(dest.iterdir()):
        raise UserError(f"{dest} is not empty", hint="name a new or empty directory")
    project = generate_sample_project(dest, seed, bugs=bugs)
    click.echo(f"wrote {project.path} (seed {seed}, {bugs} bug(s)); run `{project.test_command}` there")
