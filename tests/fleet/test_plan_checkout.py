"""`hilbert plan` runs the lead in a disposable checkout: whatever its commands write, the person's
repository is unchanged byte for byte (its git dir and its ignored files included), and an existing
plan is only replaced with --force."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.fleet.plan import parse_plan
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responders import ScriptedResponder

PLAN = {
    "goal": "make the tests pass",
    "tasks": [{"id": "T1", "title": "fix add", "description": "fix it", "verify": "python -m pytest -q"}],
}


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` (nothing skipped: .git, ignored files) and what it holds."""
    digest = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            digest[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def lead_turns(repo: Path, *, explore: bool = True) -> list[dict[str, object]]:
    """A lead that writes files with its shell (in its checkout, through an absolute path into the
    person's repository, a long output that is saved, pytest's cache), then writes the plan."""
    commands = [
        "echo scratch > notes.txt && mkdir -p build && echo x > build/out.o && python -m pytest -q",
        f"echo planted > {repo}/planted.txt; echo tried",
        "seq 1 20000",
    ][: 3 if explore else 0]
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]} for command in commands
    ]
    turns.append({"tool_calls": [{"name": "write_plan", "arguments": PLAN}]})
    turns.append(
        {"tool_calls": [{"name": "finish", "arguments": {"claim": "planned", "evidence": "PLAN.md"}}]}
    )
    return turns


def test_the_lead_plans_in_a_disposable_checkout_and_the_repository_is_untouched(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (repo / ".gitignore").write_text("build/\n.env\n")
    commit_all(repo)
    (repo / ".env").write_text("ignored, and kept as it is\n")  # an ignored file of the person's
    before = tree_digest(repo)
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(tmp_path / "home")}

    def plan(*extra: str, explore: bool = True) -> subprocess.CompletedProcess[str]:
        with FakeServer(ScriptedResponder.from_turns(lead_turns(repo.resolve(), explore=explore))) as lead:
            model = f"anthropic:lead@{lead.base_url}"
            return run_cli(
                "plan",
                "make the tests pass",
                "--repo",
                "repo",
                "--model",
                model,
                *extra,
                cwd=tmp_path,
                env=env,
            )

    done = plan()
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    assert "in a checkout of" in done.stdout
    assert [task.id for task in parse_plan((tmp_path / "PLAN.md").read_text()).tasks] == ["T1"]
    assert tree_digest(repo) == before  # no notes.txt, build/, .pytest_cache, .hilbert/outputs, planted.txt
    with EventStore.open(tmp_path / "home" / "hilbert.db") as store:
        results = store.events(agent="lead", kinds=["tool_result"])
        said = [m.content for m in store.get_messages([r.data["message"] for r in results])]
    assert said[0].startswith("[exit 1]") and "1 failed" in said[0]  # its commands really ran, and wrote
    assert said[1].startswith("refused by policy")  # the write into the repository never ran
    assert "the whole output is in .hilbert/outputs/" in said[2]
    assert not list((tmp_path / "home" / "plans").iterdir())  # the checkout is gone too

    (tmp_path / "PLAN.md").write_text("the person's edited plan\n")
    again = plan(explore=False)
    lines = again.stderr.strip().splitlines()
    assert (
        again.returncode == 2 and len(lines) == 1 and "exists already" in lines[0] and "--force" in lines[0]
    )
    assert (tmp_path / "PLAN.md").read_text() == "the person's edited plan\n"
    forced = plan("--force", explore=False)
    assert forced.returncode == 0, forced.stderr
    assert "## T1" in (tmp_path / "PLAN.md").read_text()
    assert tree_digest(repo) == before
