"""`hilbert demo --single`: one agent fixes a failing test in a generated project, fully offline.

The agent is hilbert's own loop speaking a real wire protocol (through the official SDK) to the fake
model server's simulated engineer over loopback. The demo then checks the result itself — it runs
the project's tests independently of what the agent claimed — and shows what changed.
"""

from __future__ import annotations

import difflib
import random
import shutil
import subprocess
import uuid
from pathlib import Path

import click

from hilbert.commands import command_env
from hilbert.errors import UserError
from hilbert.models import PriceTable, make_model
from hilbert.security.redact import Redactor
from hilbert.settings import BudgetSettings, Settings
from hilbert.sim.sample import generate_sample_project
from hilbert.testing.fake_server import FakeServer
from hilbert.ui.edge import command_runner
from hilbert.ui.run_agent import run_one_agent

MARKER = ".hilbert-demo"
# USD per million tokens, like claude-sonnet-4-5, so the demo shows what such a run would cost.
SONNET_LIKE_PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
TASK = (
    "The test suite of this project fails. Run `{command}`, find the bug in the code and fix it. "
    "Do not change the tests. Finish when the whole suite passes, with the test output as evidence."
)


async def run_demo(directory: Path, *, seed: int | None, protocol: str, unsandboxed: bool = False) -> bool:
    seed = random.randrange(100_000) if seed is None else seed
    project_dir = fresh_demo_dir(directory) / "project"
    project = generate_sample_project(project_dir, seed, bugs=1)
    before = _snapshot(project_dir)
    redact = Redactor.from_env().redact  # for what is printed straight from the agent's and tests' output
    click.secho(f"hilbert demo — sample project seed {seed} in {project_dir}", bold=True)
    click.echo(f"model: the fake server's simulated engineer over {protocol} (priced like claude-sonnet-4-5)")
    failing = run_tests(project_dir, project.test_command)
    click.echo(
        f"before: `{project.test_command}` → exit {failing.returncode}: {redact(last_line(failing.stdout))}\n"
    )

    with FakeServer("engineer", seed=seed, record=directory / "requests.jsonl") as server:
        base = server.openai_base_url if protocol.startswith("openai") else server.base_url
        model_name = f"{protocol}:fake-engineer@{base}"
        settings = Settings(
            home=directory,
            db=directory / "hilbert.db",
            model=model_name,
            budgets=BudgetSettings(max_turns=40),
            unsandboxed=unsandboxed,
        )
        prices = PriceTable.default().with_overrides({"fake-engineer": SONNET_LIKE_PRICE})
        model = make_model(model_name, prices=prices, env={})
        result = await run_one_agent(
            settings,
            task=TASK.format(command=project.test_command),
            workspace=project_dir,
            name="Poincaré",
            run=f"demo-{uuid.uuid4().hex[:8]}",
            model=model,
            runner=command_runner(settings, command_env(hilbert_python_first=True)),
        )

    after = run_tests(project_dir, project.test_command)
    verified = after.returncode == 0
    click.secho("\nSummary", bold=True)
    for bug in project.bugs:
        click.echo(f"  injected bug: {bug.operator} in {bug.file}:{bug.line}")
    click.echo(f"  agent says: {result.status}" + (f" — {redact(result.claim)}" if result.claim else ""))
    verdict = click.style("PASS" if verified else "FAIL", fg="green" if verified else "red", bold=True)
    click.echo(f"  independent check `{project.test_command}`: {verdict} ({redact(last_line(after.stdout))})")
    for line in _diff(before, _snapshot(project_dir)):
        click.echo(f"  {redact(line)}")
    click.echo(f"  event log: {settings.db_path} (read it with `hilbert log --db {settings.db_path}`)")
    return verified and result.status == "finished"


def fresh_demo_dir(directory: Path) -> Path:
    """Reuse the demo folder only if an earlier demo made it; never delete anything else."""
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER).exists():
        raise UserError(f"{directory} exists and was not made by `hilbert demo`", hint="pass --dir NEW_DIR")
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / MARKER).write_text("made by hilbert demo; safe to delete\n")
    return directory


def run_tests(project_dir: Path, command: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=project_dir,
            capture_output=True,
            text=True,
            timeout=300,
            env=command_env(hilbert_python_first=True),
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, stdout="(the tests ran for more than 300 s)")


def last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts and ".hilbert" not in p.parts
    }


def _diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path, ""), after.get(path, "")
        if old != new:
            lines += [
                ln.rstrip("\n")
                for ln in difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=1
                )
            ]
    return lines or ["(no files changed)"]
