"""Without bubblewrap, workers' shell commands run under Landlock: only the workspace writable, hidden
folders neither listable nor readable, no TCP, and everyday work (pytest, git) still runs inside."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_layout import tcp_listener, two_workspaces

from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.models.types import ToolCall
from hilbert.security import landlock as launcher
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import Sandbox, detect

NO_LANDLOCK_REASON = (
    "this kernel has no Landlock: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) failed "
    "(not Linux on x86_64/aarch64, not built in, or `landlock` missing from the lsm= boot list)"
)


def shell(box: ToolBox, command: str) -> str:
    outcome = asyncio.run(box.run(ToolCall("c1", "shell", {"command": command})))
    return outcome.content


@pytest.fixture
def landlock() -> Sandbox:
    """The sandbox `detect` picks on this machine when bubblewrap is taken away."""
    abi = abi_version()
    if abi == 0:
        pytest.skip(NO_LANDLOCK_REASON)
    found = detect(which=lambda name: None, network=abi < 4)  # ABI 1-3 cannot refuse TCP: allow it
    assert found.kind == "landlock" and found.abi == abi, found.why
    assert found.describe().startswith(f"sandboxed (Landlock ABI {abi}: only the workspace writable")
    return found


def test_only_the_workspace_is_writable_and_hidden_folders_cannot_be_listed_or_read(
    tmp_path: Path, landlock: Sandbox
) -> None:
    run_root, mine, theirs = two_workspaces(tmp_path)
    shared = tmp_path / "shared"  # readable (as the venv is), never writable
    shared.mkdir()
    (shared / "data.txt").write_text("readable data\n")
    walls = dataclasses.replace(landlock.hiding(run_root), keep=(shared,))
    box = ToolBox(mine, runner=Runner(walls, policy=False))
    out = shell(
        box,
        "echo mine > notes.txt; mkdir -p sub && mv notes.txt sub/ && cat sub/notes.txt; "
        f"cat {shared}/data.txt; "
        f"ls {theirs}; cat {theirs}/work.py; cat {run_root}/message.key; rm -rf {theirs}; "
        f"rm -f {shared}/data.txt; echo x > {shared}/new.txt; touch {tmp_path}/outside.txt; ls {tmp_path}",
    )
    assert out.startswith("[exit 2]"), out  # `ls` of the folder above a hidden one fails last
    assert (mine / "sub" / "notes.txt").read_text() == "mine\n" and "mine\nreadable data\n" in out
    assert (theirs / "work.py").read_text() == "precious = True\n"  # a peer's work survives rm -rf
    assert (shared / "data.txt").exists() and not (shared / "new.txt").exists()
    assert not (tmp_path / "outside.txt").exists()
    assert "precious" not in out and "00000000" not in out and "work.py" not in out.splitlines(), out
    assert out.count("Permission denied") >= 6, out


def test_the_launcher_hides_exactly_the_hidden_folders(tmp_path: Path, landlock: Sandbox) -> None:
    """Outside /tmp too (hilbert's home): what sits beside a hidden folder stays readable."""
    hidden, beside = tmp_path / "home" / ".hilbert", tmp_path / "home" / "project"
    for folder in (hidden, beside):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text(f"{folder.name} content\n")
    (tmp_path / "top.txt").write_text("top content\n")
    script = (
        f"cat {beside}/f.txt {tmp_path}/top.txt; cat {hidden}/f.txt; ls {hidden}; ls {hidden.parent}; "
        f"echo x > {beside}/new.txt; echo done"
    )
    argv = [sys.executable, "-I", "-S", launcher.__file__, "--write", str(tmp_path / "ws")]
    done = subprocess.run(
        [*argv, "--hide", str(hidden), "--", "bash", "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout == "project content\ntop content\ndone\n", done
    assert done.stderr.count("Permission denied") == 4, done.stderr  # read, list, list above, write
    assert not (beside / "new.txt").exists()


def test_there_is_no_tcp_inside(tmp_path: Path, landlock: Sandbox) -> None:
    if landlock.abi < 4:
        pytest.skip(f"Landlock ABI {landlock.abi} cannot restrict TCP (ABI 4, Linux 6.7, can)")
    with tcp_listener() as probe:
        inside = shell(ToolBox(tmp_path, runner=Runner(landlock, policy=False)), probe)
        outside = shell(ToolBox(tmp_path, runner=Runner.unsandboxed()), probe)
        allowed = shell(
            ToolBox(tmp_path, runner=Runner(dataclasses.replace(landlock, network=True), policy=False)), probe
        )
    assert inside.startswith("[exit 1]") and "PermissionError" in inside, inside
    assert outside.startswith("[exit 0]"), outside  # the same command reaches it unsandboxed
    assert allowed.startswith("[exit 0]"), allowed  # and inside when the network is allowed


def test_commands_cannot_signal_processes_outside(tmp_path: Path, landlock: Sandbox) -> None:
    if landlock.abi < 6:
        pytest.skip(f"Landlock ABI {landlock.abi} cannot scope signals (ABI 6, Linux 6.12, can)")
    out = shell(
        ToolBox(tmp_path, runner=Runner(landlock, policy=False)),
        f"kill -0 {os.getpid()}; sleep 0.1 & kill $!",
    )
    assert out.startswith("[exit 0]") and "Operation not permitted" in out, out  # its own child: fine


def test_pytest_runs_inside_with_its_temporary_files_in_the_workspace(
    tmp_path: Path, landlock: Sandbox
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\n"
        "def test_add(tmp_path):\n"
        "    (tmp_path / 'n').write_text(str(add(2, 3)))\n"
        "    assert (tmp_path / 'n').read_text() == '5'\n"
        "    print('TMP', tmp_path)\n"
    )
    (workspace / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    box = ToolBox(workspace, runner=Runner(landlock, command_env(hilbert_python_first=True), policy=False))
    out = shell(box, "python -m pytest -q -s tests")
    assert out.startswith("[exit 0]") and "1 passed" in out, out
    assert f"TMP {workspace / '.hilbert' / 'tmp'}" in out, out  # TMPDIR is the workspace's own


def test_git_works_in_the_workspace_and_does_not_see_the_temporary_folder(
    tmp_path: Path, landlock: Sandbox
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("hello\n")
    git = "git -c user.name=t -c user.email=t@t"
    out = shell(
        ToolBox(workspace, runner=Runner(landlock, policy=False)),
        f"mktemp > /dev/null && git init -q && {git} add -A && {git} commit -qm first && "
        "echo more >> README.md && git status --porcelain && git diff --stat",
    )
    assert out.startswith("[exit 0]"), out
    assert " M README.md" in out and ".hilbert" not in out, out  # the TMPDIR folder stays out of git
    log = subprocess.run(["git", "-C", str(workspace), "log", "--format=%s"], capture_output=True, text=True)
    assert log.stdout == "first\n"
    assert any((workspace / ".hilbert" / "tmp").glob("tmp*"))


def test_without_bubblewrap_and_landlock_commands_are_refused_unless_accepted(tmp_path: Path) -> None:
    refused = detect(which=lambda name: None, landlock_abi=lambda: 0)
    assert refused.kind == "refuse" and "no Landlock" in refused.why and "not installed" in refused.why
    assert (
        detect(which=lambda name: None, landlock_abi=lambda: 0, accept_unsandboxed=True).kind == "unsandboxed"
    )
    too_old = detect(which=lambda name: None, landlock_abi=lambda: 3)  # cannot keep the network out
    assert too_old.kind == "refuse" and "cannot block the network" in too_old.why
    out = asyncio.run(
        ToolBox(tmp_path, runner=Runner(refused)).run(ToolCall("c1", "shell", {"command": "touch x"}))
    )
    assert out.is_error and not (tmp_path / "x").exists()
