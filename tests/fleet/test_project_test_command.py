"""The project's test command is a setting: a repository whose tests run with `make check` goes through
`hilbert run` end to end, its merge checks running `make check`, and the run's cost cap in hilbert.toml
reaching the fleet (no flag default goes around it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer

MAKEFILE = "check:\n\tpython -m pytest -q -p no:cacheprovider\n"


def plan_text(bugs: list[str]) -> str:
    """One task per buggy module, each verified by its own test file."""
    blocks = [
        f"## T{n} — fix {bug}\n\n```yaml hilbert-task\nclaims: [{bug}]\n"
        f"verify: python -m pytest -q -p no:cacheprovider tests/test_{Path(bug).stem}.py\n```\n"
        for n, bug in enumerate(bugs, 1)
    ]
    return "# make the tests pass\n\n" + "\n".join(blocks)


def test_a_repository_tested_with_make_check_goes_through_a_fleet_run(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "repo", 3, bugs=2)
    (project.path / "Makefile").write_text(MAKEFILE)
    commit_all(project.path)
    (tmp_path / "PLAN.md").write_text(plan_text(sorted({b.file for b in project.bugs})))
    (tmp_path / "hilbert.toml").write_text('[commands]\ntest = "make check"\n[fleet]\nmax_cost_usd = 3.5\n')
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(tmp_path / "home")}

    shown = run_cli("config", cwd=tmp_path, env=env).stdout.splitlines()
    assert 'commands.test = "make check"' in next(line for line in shown if line.startswith("commands.test"))
    assert next(line for line in shown if line.startswith("fleet.max_cost_usd")).split() == [
        "fleet.max_cost_usd",
        "=",
        "3.5",
        "(hilbert.toml)",
    ]
    with FakeServer("engineer", seed=3) as engineer:
        ran = run_cli(
            "run",
            "--plan",
            "PLAN.md",
            "--repo",
            "repo",
            "--workers",
            "2",
            "--model",
            f"openai:fake@{engineer.openai_base_url}",
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
    assert ran.returncode == 0, ran.stderr + ran.stdout[-3000:]
    assert "2 of 2 tasks merged onto hilbert/integration" in ran.stdout
    assert "the project's tests `make check`; the run's cost cap: $3.5" in ran.stdout
    with EventStore.open(tmp_path / "home" / "hilbert.db") as store:
        started = store.events(kinds=["fleet_started"])[0].data
        checked = [e.data for e in store.events(agent="harness", kinds=["merge_checks_passed"])]
        merged = {e.data["task"] for e in store.events(agent="harness", kinds=["merged"])}
    assert started["test_command"] == "make check" and started["max_cost_usd"] == 3.5  # what the fleet used
    assert merged == {"T1", "T2"}
    assert checked and all(data["commands"][-1] == "make check" for data in checked)
    # the integration branch passes `make check` too
    check = tmp_path / "check"
    integration = next((tmp_path / "home" / "runs").glob("*/integration.git"))
    subprocess.run(
        ["git", "clone", "-q", "-b", "hilbert/integration", str(integration), str(check)], check=True
    )
    assert subprocess.run(["make", "-s", "check"], cwd=check, env=env, capture_output=True).returncode == 0
