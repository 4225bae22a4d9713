"""Workers' shell commands run in a sandbox: only the workspace writable, the run's other folders hidden,
no network — and with no sandbox and no consent, they do not run at all."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_layout import tcp_listener, two_workspaces

from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.models.types import ToolCall
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import REFUSED, Sandbox, detect
from hilbert.testing.fake_server import FakeServer


def shell(box: ToolBox, command: str) -> str:
    outcome = asyncio.run(box.run(ToolCall("c1", "shell", {"command": command})))
    return outcome.content


@pytest.fixture
def sandbox() -> Sandbox:
    found = detect()
    if found.kind != "bubblewrap":
        pytest.fail(
            f"no sandbox on this machine ({found.why}): run `make sandbox` (see README)", pytrace=False
        )
    return found


def test_only_the_workspace_is_writable_and_the_other_workspaces_are_hidden(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    run_root, mine, theirs = two_workspaces(tmp_path)
    box = ToolBox(mine, runner=Runner(sandbox.hiding(run_root), policy=False))
    out = shell(
        box,
        f"echo mine > notes.txt; ls {theirs}; cat {run_root}/message.key; rm -rf {theirs}; touch /etc/owned",
    )
    assert out.startswith("[exit 1]") and "Read-only file system" in out, out
    assert (mine / "notes.txt").read_text() == "mine\n"  # its own workspace is writable
    assert (theirs / "work.py").read_text() == "precious = True\n"  # a peer's work survives rm -rf
    assert "00000000" not in out and not Path("/etc/owned").exists()  # the key was not readable


def test_there_is_no_network_inside(tmp_path: Path, sandbox: Sandbox) -> None:
    with tcp_listener() as probe:
        inside = shell(ToolBox(tmp_path, runner=Runner(sandbox, policy=False)), probe)
        outside = shell(ToolBox(tmp_path, runner=Runner.unsandboxed()), probe)
    assert inside.startswith("[exit 1]") and "ConnectionRefusedError" in inside, inside
    assert outside.startswith("[exit 0]"), outside  # the same command reaches it unsandboxed


def test_without_a_sandbox_and_without_consent_commands_are_refused(tmp_path: Path) -> None:
    def neither(name: str) -> str | None:  # no bubblewrap on PATH, and (below) no Landlock in the kernel
        return None

    refused = detect(which=neither, landlock_abi=lambda: 0)
    assert refused.kind == "refuse" and "not installed" in refused.why
    assert detect(which=neither, landlock_abi=lambda: 0, accept_unsandboxed=True).kind == "unsandboxed"
    box = ToolBox(tmp_path, runner=Runner(refused, policy=False))
    outcome = asyncio.run(box.run(ToolCall("c1", "shell", {"command": "touch x"})))
    assert outcome.is_error and outcome.content == REFUSED and not (tmp_path / "x").exists()


def test_hilbert_run_fails_closed_without_a_sandbox_in_one_line(tmp_path: Path) -> None:
    """Without bubblewrap on PATH: Landlock where the kernel has it (the run says so), else one line."""
    bin_dir = tmp_path / "bin"  # a PATH with git and bash but no bwrap
    bin_dir.mkdir()
    for tool in ("git", "bash"):
        os.symlink(
            subprocess.run(["which", tool], capture_output=True, text=True, check=True).stdout.strip(),
            bin_dir / tool,
        )
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp_path / "PLAN.md").write_text("# goal\n\n## T1 — t\n\n```yaml hilbert-task\nverify: 'true'\n```\n")
    env = {**command_env(), "PATH": str(bin_dir), "HOME": str(tmp_path)}
    with FakeServer("echo") as server:  # a model that answers: the preflight lets the run start
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hilbert.ui.cli",
                "run",
                "--plan",
                "PLAN.md",
                "--repo",
                "repo",
                "--model",
                f"openai:m@{server.openai_base_url}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    if abi_version() > 0:
        assert "workers' commands: sandboxed (Landlock ABI" in done.stdout, done.stdout + done.stderr
        return
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert (
        "no sandbox for workers' shell commands: bubblewrap is not installed" in lines[0]
        and "--unsandboxed" in lines[0]
    )


def test_the_stop_gate_runs_the_workers_tests_in_the_sandbox_too(tmp_path: Path, sandbox: Sandbox) -> None:
    """The gate runs code the worker wrote (its tests, a conftest): that code gets the same walls."""
    from hilbert.judge.gate import run_gate
    from hilbert.workspaces.git import Git

    repo, outside = tmp_path / "repo", tmp_path / "outside.txt"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "base"], check=True)
    conftest = f"from pathlib import Path\n\nPath({str(outside)!r}).write_text('reached')\n"
    (repo / "tests" / "conftest.py").write_text(conftest)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "work"], check=True)
    (tmp_path / "home").mkdir()

    def gate(walls: Sandbox) -> bool:
        result = asyncio.run(
            run_gate(
                repo,
                "HEAD~1",
                "HEAD",
                verify="python -m pytest -q -p no:cacheprovider tests",
                scratch=tmp_path / "scratch" / walls.kind,
                git=Git(home=tmp_path / "home"),
                runner=Runner(walls, command_env(hilbert_python_first=True)),
            )
        )
        return result.steps[0].passed

    assert gate(sandbox.hiding(repo)) and not outside.exists()  # the conftest's write stayed inside
    assert gate(Sandbox("unsandboxed")) and outside.read_text() == "reached"  # without the sandbox it lands


def test_tools_that_live_under_tmp_still_run_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox has a private /tmp; a venv or a tool folder on PATH under /tmp (a checkout in /tmp, as
    on CI) is bound back read-only, so commands still find it."""
    tools = tmp_path / "tools" / "bin"
    tools.mkdir(parents=True)
    (tools / "hello").write_text("#!/bin/sh\necho hello from under tmp\n")
    (tools / "hello").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    found = detect()
    assert found.kind == "bubblewrap" and tools in found.keep
    workspace = tmp_path / "ws"
    workspace.mkdir()
    out = shell(ToolBox(workspace, runner=Runner(found, policy=False)), f"hello; touch {tools}/owned")
    assert "hello from under tmp" in out and "Read-only file system" in out, out
    assert not (tools / "owned").exists()
