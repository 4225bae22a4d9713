"""The file tools open what a worker planted without being led out of the workspace.

A process the worker left running may swap a symlink at any moment; the harness's read_file and
write_file run outside the sandbox, so they must never reach the hidden run folder or the message key
through one. In-tree symlinks keep working. A long command's whole output is saved outside the
workspace (where no command can plant anything) and read back under `.hilbert/outputs/`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner
from hilbert.models.types import ToolCall
from hilbert.security.safe_open import openat2_works
from hilbert.settings import TimeoutSettings

WAYS = [
    pytest.param(
        True,
        id="openat2",
        marks=pytest.mark.skipif(not openat2_works(), reason="this kernel has no openat2"),
    ),
    pytest.param(False, id="walk"),
]


def run(box: ToolBox, name: str, **arguments: object):
    return asyncio.run(box.run(ToolCall(id="c1", name=name, arguments=dict(arguments))))


def make_box(tmp_path: Path, use_openat2: bool = True, max_output_chars: int = 200) -> ToolBox:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "b.txt").write_text("first = 1\nsecond = 2\n")
    outside = tmp_path / "run"  # stands for the hidden run folder: the message key, other workspaces
    outside.mkdir()
    (outside / "key").write_text("MESSAGE-KEY\n")
    return ToolBox(
        ws,
        runner=Runner.unsandboxed(timeouts=TimeoutSettings(shell_s=10)),
        max_output_chars=max_output_chars,
        outputs=tmp_path / "private" / "outputs",
        use_openat2=use_openat2,
    )


@pytest.mark.parametrize("use_openat2", WAYS)
def test_read_and_edit_through_a_symlink_inside_the_workspace(tmp_path: Path, use_openat2: bool) -> None:
    box = make_box(tmp_path, use_openat2)
    os.symlink("sub/b.txt", box.root / "a")
    assert run(box, "read_file", path="a").content == "     1\tfirst = 1\n     2\tsecond = 2"
    assert not run(box, "edit_file", path="a", old="second = 2", new="second = 3").is_error
    assert (box.root / "sub" / "b.txt").read_text() == "first = 1\nsecond = 3\n"
    assert os.readlink(box.root / "a") == "sub/b.txt"  # still the link: edited through it, not replaced
    assert not run(box, "write_file", path="a", content="whole\n").is_error
    assert (box.root / "sub" / "b.txt").read_text() == "whole\n"
    assert run(box, "grep", pattern="whole", path="a").content == "a:1:whole"


@pytest.mark.parametrize("use_openat2", WAYS)
def test_links_out_of_the_workspace_are_refused_at_the_open(tmp_path: Path, use_openat2: bool) -> None:
    box = make_box(tmp_path, use_openat2)
    key = tmp_path / "run" / "key"
    os.symlink(key, box.root / "absolute")
    os.symlink("../run/key", box.root / "relative")
    os.symlink(tmp_path / "run", box.root / "dir")
    os.symlink("relative", box.root / "chain")
    for path in ("absolute", "relative", "dir/key", "chain", "dir/planted"):
        for name, extra in [
            ("read_file", {}),
            ("write_file", {"content": "pwned"}),
            ("edit_file", {"old": "MESSAGE", "new": "pwned"}),
            ("grep", {"pattern": "KEY"}),
        ]:
            out = run(box, name, path=path, **extra)
            assert out.is_error and "outside the workspace" in out.content, (path, name, out.content)
    assert run(box, "write_file", path="dir/new/deeper.txt", content="x").is_error
    assert key.read_text() == "MESSAGE-KEY\n"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["key"]


SWAPPER = """
import os, shutil, sys
folder, outside = sys.argv[1:3]
real = folder + ".real"
os.makedirs(real)
with open(os.path.join(real, "key"), "w") as file:
    file.write("a file of the workspace\\n")


def step(call, *args):
    try:
        call(*args)
    except OSError:  # the harness made or removed something meanwhile
        pass


print("ready", flush=True)
while True:
    step(os.rename, real, folder)  # a real folder: what a check by name sees and passes
    step(os.rename, folder, real)
    if os.path.isdir(folder) and not os.path.islink(folder):  # one the harness made: away with it
        shutil.rmtree(folder, ignore_errors=True)
    step(os.symlink, outside, folder)  # a link to the run's folder: what an open by name follows
    step(os.unlink, folder)
"""


@pytest.mark.parametrize("use_openat2", WAYS)
def test_a_link_swapped_while_the_tools_run_never_leads_out(tmp_path: Path, use_openat2: bool) -> None:
    """A process left running flips `d` between a real folder and a link to the run's folder as fast as
    it can (the red team's check-then-open race); whatever the timing, no read or write reaches the key."""
    box = make_box(tmp_path, use_openat2)
    key = tmp_path / "run" / "key"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(box.root / "d"), str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        for turn in range(300):
            assert "MESSAGE-KEY" not in run(box, "read_file", path="d/key").content
            run(box, "write_file", path="d/key", content=f"write {turn}\n")
            run(box, "edit_file", path="d/key", old="MESSAGE", new="pwned")
    finally:
        swapper.kill()
        swapper.communicate()
    assert key.read_text() == "MESSAGE-KEY\n"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["key"]


def test_a_long_output_is_saved_outside_the_workspace_and_read_back(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    out = run(box, "shell", command="seq 1 3000")
    saved = out.content.split("the whole output is in ")[1].split("]")[0]
    assert saved.startswith(".hilbert/outputs/")
    assert not (box.root / ".hilbert").exists()  # nothing in the workspace for a command to swap
    files = list((tmp_path / "private" / "outputs").iterdir())
    assert len(files) == 1 and files[0].read_text().split() == [str(n) for n in range(1, 3001)]
    assert run(box, "read_file", path=saved, start_line=3000).content == "  3000\t3000"
    assert run(box, "grep", pattern="^2999$", path=".hilbert/outputs").content == f"{saved}:2999:2999"
    assert run(box, "grep", pattern="^17$", path=saved).content == f"{saved}:17:17"
    assert run(box, "read_file", path=".hilbert/outputs/../../run/key").is_error


def test_a_planted_hilbert_folder_neither_catches_nor_hides_the_output(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    os.symlink(tmp_path / "run", box.root / ".hilbert")
    out = run(box, "shell", command="seq 1 3000")
    saved = out.content.split("the whole output is in ")[1].split("]")[0]
    assert run(box, "read_file", path=saved, start_line=1).content.startswith("     1\t1\n")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["key"]
