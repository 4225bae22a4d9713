"""One worker filling the disk does not take the fleet down (issue 14): `hilbert run` on a 64 MiB tmpfs
as HILBERT_HOME (the event log and every workspace on it), where the worker on T1 writes zeros until
the disk is full and then idles, while its peer on T2 does a small honest task. The run finishes
normally: the hog is named in a `disk_full` event, halted, and its work archived (which gives the
space back: `disk_ok`); the peer's work is merged. Before the disk guard (`hilbert.fleet.disk`) the
run died of sqlite's `database or disk is full` with the peer's work not landed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import run_cli
from git_support import git
from hilbert.commands import command_env
from hilbert.errors import RunError
from hilbert.fleet.disk import MIB, Reserve, assess, fastest
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.fleet.state import Fold
from hilbert.models.types import ToolCall
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply

FILL = "head -c 200M /dev/zero > big"


class HogAndPeer:
    """T1's worker fills the disk, then runs a harmless command each turn (it never finishes); T2's
    writes its line and finishes, and writes it again whenever the stop gate sends it back."""

    name = "hog-and-peer"

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        found = re.search(r"^Task (\w+):", brief, re.MULTILINE)
        task = found.group(1) if found else "?"
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if task == "T1":
            call = ToolCall(f"call_{turn}", "shell", {"command": FILL if turn == 0 else "sleep 0.2"})
        elif turn % 2 == 0:
            call = ToolCall(f"call_{turn}", "shell", {"command": "echo peer > peer.txt"})
        else:
            call = ToolCall(f"call_{turn}", "finish", {"claim": "done", "evidence": "peer.txt holds it"})
        return Reply(tool_calls=(call,))


PROVIDED = "HILBERT_TEST_DISK_"  # + SIZE: an empty tmpfs of SIZE mounted for a user who is not root
SMALL_DISK = pytest.mark.skipif(
    (os.geteuid() != 0 or shutil.which("mount") is None)
    and not any(k.startswith(PROVIDED) for k in os.environ),
    reason="needs root to mount a small tmpfs for the disk to fill, or one mounted for this user "
    "(`make test-unprivileged` mounts them; run the suite as root, as CI does)",
)


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "64m") -> Iterator[Path]:
    """`folder` as a tmpfs of its own of `size`, unmounted afterwards; for a user who is not root, the
    empty one `tests/unprivileged.sh` mounted for it (`HILBERT_TEST_DISK_64M`), emptied afterwards."""
    provided = os.environ.get(PROVIDED + size.upper())
    if os.geteuid() != 0:
        if not provided:
            pytest.skip(f"no {size} tmpfs was mounted for this user ({PROVIDED}{size.upper()})")
        disk = Path(provided)
        assert not any(disk.iterdir()), f"{disk} is not empty: one test at a time uses it"
        try:
            yield disk
        finally:
            for child in disk.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        return
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs as root: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@SMALL_DISK
@pytest.mark.timeout(240)
def test_a_worker_filling_the_disk_is_halted_and_its_peer_lands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("disk\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    tasks = (
        Task(id="T1", title="hog", verify="test -f hog.txt", claims=("hog.txt",)),
        Task(id="T2", title="peer", verify="grep -qx peer peer.txt", claims=("peer.txt",)),
    )
    (tmp_path / "PLAN.md").write_text(write_plan(Plan(goal="disk", tasks=tasks)))
    with small_disk(tmp_path / "home") as home, FakeServer(HogAndPeer()) as server:
        env = {
            **command_env(hilbert_python_first=True),
            "HILBERT_HOME": str(home),
            "HILBERT_FLEET__DISK_MIN_FREE_MB": "8",
            "HILBERT_FLEET__DISK_RESERVE_MB": "4",
            "HILBERT_FLEET__DISK_CHECK_S": "0.2",
            "HILBERT_FLEET__MAX_ATTEMPTS": "3",
        }
        ran = run_cli(
            "run", "--plan", "PLAN.md", "--repo", "repo", "--workers", "2", "--unsandboxed",
            "--test-command", "true", "--model", f"openai:fake@{server.openai_base_url}",
            cwd=tmp_path, env=env, timeout=200,
        )  # fmt: skip
        with EventStore.open(home / "hilbert.db") as store:
            run = store.events(kinds=["fleet_started"])[0].run
            state = Fold(store, run).catch_up()
            events = store.events(run=run)
        reserve = list((home / "runs" / run).glob("disk-reserve*"))
        archives = sorted(p.name for p in (home / "runs" / run / "archive").glob("*.tar.gz"))
        integration = state.started.integration if state.started else ""
        landed = subprocess.run(
            ["git", "--git-dir", integration, "show", "hilbert/integration:peer.txt"],
            capture_output=True, text=True,
        )  # fmt: skip
    trace = "\n".join(f"{e.agent} {e.kind} {str(e.data)[:150]}" for e in events if e.kind != "model_call")
    output = ran.stdout[-3000:] + ran.stderr + "\n" + trace  # what happened, when an assertion fails
    # the run ended as runs end (the hog's task is stopped, so not every task is done), not in a crash
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, output
    assert any(e.kind == "fleet_finished" for e in events), output
    hog = next(e.data for e in events if e.kind == "task_started" and e.data["task"] == "T1")
    full = [e.data for e in events if e.kind == "disk_full"]
    assert full and full[0]["worker"] == hog["worker"] and full[0]["task"] == "T1", output
    assert any(e.kind == "disk_ok" for e in events), output
    stops = [e for e in events if e.kind == "stop_requested"]
    assert [(e.agent, e.data["to"]) for e in stops] == [("harness", hog["worker"])], output
    closed = [e.data["message"] for e in events if e.kind == "workspace_closed"]
    assert any(m.startswith(f"{hog['worker_id']}: archived") for m in closed), output
    assert any(name.startswith(f"{hog['worker_id']}-") for name in archives), archives
    assert {t: s.status for t, s in state.states.items()} == {"T1": "needs_you", "T2": "done"}, output
    assert "T1" in state.stopped
    assert not reserve, reserve  # given back when the run ended
    assert landed.returncode == 0 and landed.stdout == "peer\n", landed.stderr + output


def fill(folder: Path) -> None:
    """Write zeros into `folder` until its file system has no room left."""
    with open(folder / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
        while True:
            filler.write(bytes(MIB))


@SMALL_DISK
def test_a_log_write_on_a_full_disk_waits_for_the_reserve_and_is_kept(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "8m") as disk:
        reserve = Reserve(disk / "reserve", 2 * MIB)
        assert reserve.make()
        store = EventStore.open(disk / "hilbert.db")
        fill(disk)
        with pytest.raises(RunError, match="is full"):  # no hook: one line, not sqlite's error
            store.append("r", "harness", "note", {"text": "x" * 100_000})
        given: list[bool] = []

        def make_room() -> bool:  # as the fleet's disk guard does, with its reserve
            given.append(reserve.give_up_one())
            return given[-1]

        store.on_full(make_room)
        kept = store.append("r", "harness", "note", {"text": "y" * 100_000})
        store.close()
        with EventStore.open(disk / "hilbert.db") as again:
            assert [e.id for e in again.events(run="r")] == [kept.id]  # committed, and only once
    assert given[:1] == [True]


def test_the_disk_is_full_below_the_floor_or_after_a_failed_write_and_has_room_above_both() -> None:
    floor, reserve = 100, 10
    assert assess(99, floor, reserve, full=False, alarmed=False) == "full"
    assert assess(500, floor, reserve, full=False, alarmed=True) == "full"  # a write of the log failed
    assert assess(500, floor, reserve, full=False, alarmed=False) is None
    assert assess(105, floor, reserve, full=True, alarmed=False) is None  # no room for the reserve yet
    assert assess(110, floor, reserve, full=True, alarmed=False) == "ok"
    assert assess(500, floor, reserve, full=True, alarmed=True) is None


def test_the_worker_halted_is_the_one_whose_workspace_grew_most() -> None:
    before = {"ada": 10, "bob": 500}
    assert fastest(before, {"ada": 400, "bob": 520}) == "ada"  # bob is bigger, ada grew faster
    assert fastest(before, {"ada": 400, "bob": 520}, spared={"ada"}) == "bob"
    assert fastest({}, {"cy": 7}) == "cy"  # not seen before: all of it is growth
    assert fastest(before, {"ada": 10, "bob": 400}) is None  # nobody grew: the disk filled from outside
