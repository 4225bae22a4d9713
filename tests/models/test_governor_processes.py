"""Two hilbert processes using one provider key share one governor (issue 17): one's 429 pauses the
other, and the slot of a process killed mid-call is reclaimed. Real subprocesses (`governor_child.py`,
which builds its models as the CLI does), one real governor file in hilbert's home, the fake server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hilbert.models.governor import GovernorStore
from hilbert.testing.fake_server import EchoResponder, FakeServer
from hilbert.testing.fake_server.faults import FaultSpec

CHILD = Path(__file__).with_name("governor_child.py")
ROOT = CHILD.parents[2]


def _child(home: Path, server: FakeServer, concurrency: int = 64) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "shared-key",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), server.base_url, str(concurrency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n", child.stderr
    return child


def _go(child: subprocess.Popen[str]) -> str:
    out, err = child.communicate("go\n", timeout=60)
    return out.strip() or err


def _completions(server: FakeServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"].endswith("/messages")]


def test_one_process_429_pauses_the_other(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with FakeServer(EchoResponder(), faults="429=1.0,retry_after=2") as server:
        first, second = _child(home, server), _child(home, server)  # both started: imports done
        assert _go(first).startswith("error anthropic:fake-claude: gave up after 1 try")
        server.app.faults = FaultSpec.parse(None)
        assert _go(second) == "done 1"  # one try: it never drew the 429 the first one did
        refused, answered = _completions(server)
    assert (refused["status"], answered["status"]) == (429, 200)
    assert answered["time"] - refused["time"] >= 1.95  # it waited out the other process's Retry-After
    store = GovernorStore(home / "governor.db")
    assert [n.kind for n in store.notices()] == ["governor_throttled"]
    store.close()


def test_the_slot_of_a_killed_process_is_reclaimed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with FakeServer(EchoResponder(), faults="hang=1.0") as server:
        holder, waiter = _child(home, server, concurrency=1), _child(home, server, concurrency=1)
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        deadline = time.monotonic() + 30
        while not _completions(server):  # the holder's call is in flight: its lease taken
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.02)
        store = GovernorStore(home / "governor.db")
        (state,) = [store.state(key) for key in _keys(home)]
        store.close()
        assert state is not None and [lease.pid for lease in state.leases.values()] == [holder.pid]
        holder.kill()
        holder.communicate()
        server.app.faults = FaultSpec.parse(None)
        assert _go(waiter) == "done 1"  # with one slot, and that slot's holder dead


def _keys(home: Path) -> list[str]:
    db = sqlite3.connect(home / "governor.db")
    try:
        return [row[0] for row in db.execute("SELECT key FROM buckets")]
    finally:
        db.close()
