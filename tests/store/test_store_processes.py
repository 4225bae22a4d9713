"""Several processes on one log file: concurrent writers, a follower, and writers killed with SIGKILL."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from hilbert.store import Event, EventStore

Spawn = Callable[..., subprocess.Popen[str]]
WRITERS, PER_WRITER = 4, 200


def committed(lines: str) -> list[tuple[int, str, int, int]]:
    """(id, agent, seq, i) of each complete line a writer printed with --print."""
    rows = []
    for line in lines.splitlines(keepends=True):
        if line.endswith("\n") and line.strip() not in ("", "ready"):
            id_, agent, seq, i = line.split()
            rows.append((int(id_), agent, int(seq), int(i)))
    return rows


def test_concurrent_writers_get_gapless_seqs_in_commit_order(
    tmp_path: Path, spawn_writer: Spawn, integrity: Callable[[Path], str]
) -> None:
    path = tmp_path / "events.db"  # not created yet: the writers also race to create and migrate it
    procs = [
        spawn_writer(
            path,
            "run",
            f"w{n}",
            PER_WRITER,
            "--agents",
            f"shared,own{n},shared2",
            "--wait-go",
            "--print",
            "--delay",
            "0.0005",  # a breath between appends, so that the writers interleave, not take turns
        )
        for n in range(WRITERS)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:  # release them together
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reported = {}
    for n, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        reported[f"w{n}"] = committed(out)

    assert integrity(path) == "ok"
    with EventStore.open(path) as store:
        events = store.events()
    assert len(events) == WRITERS * PER_WRITER
    assert len({e.id for e in events}) == len(events)
    by_agent: dict[str, list[Event]] = defaultdict(list)
    for event in events:  # in id (= commit) order
        by_agent[event.agent].append(event)
    for agent, mine in by_agent.items():
        assert [e.seq for e in mine] == list(range(1, len(mine) + 1)), agent  # no gaps, no repeats
    assert len(by_agent["shared"]) == WRITERS * len(range(0, PER_WRITER, 3))
    # What each writer was told when append returned is what the log holds, in its own order.
    stored = {e.id: (e.agent, e.seq, e.data["tag"], e.data["i"]) for e in events}
    for tag, rows in reported.items():
        assert [i for *_, i in rows] == list(range(PER_WRITER))
        assert [row[0] for row in rows] == sorted(row[0] for row in rows)
        for id_, agent, seq, i in rows:
            assert stored[id_] == (agent, seq, tag, i)
    # The writers really interleaved on the shared agent (otherwise this test proves little).
    shared_tags = [e.data["tag"] for e in by_agent["shared"]]
    assert sum(a != b for a, b in itertools.pairwise(shared_tags)) > len(shared_tags) // 2


def test_follow_sees_events_appended_by_another_process(tmp_path: Path, spawn_writer: Spawn) -> None:
    path = tmp_path / "events.db"
    count = 20

    async def scenario(store: EventStore) -> list[Event]:
        proc = spawn_writer(path, "run", "other", count, "--wait-go", "--delay", "0.005")
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        seen: list[Event] = []

        async def consume() -> None:
            async for event in store.follow(run="run", until=lambda e: e.data["i"] == count - 1, poll_s=0.02):
                seen.append(event)

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.2)  # the follower has polled an empty log by now
        assert seen == []
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        await asyncio.wait_for(consumer, 30)
        return seen

    with EventStore.open(path) as store:
        seen = asyncio.run(scenario(store))
    assert [e.data["i"] for e in seen] == list(range(count))
    assert all(e.data["tag"] == "other" for e in seen)


def test_sigkill_never_loses_a_committed_event_or_corrupts_the_file(
    tmp_path: Path, spawn_writer: Spawn, integrity: Callable[[Path], str]
) -> None:
    path = tmp_path / "events.db"
    rng = random.Random(20260)
    reported: set[int] = set()
    for round_ in range(6):
        proc = spawn_writer(path, "run", f"k{round_}", 0, "--agents", "a,b", "--print", "--messages")
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(rng.randint(1, 80))]  # a random number of events …
        time.sleep(rng.uniform(0, 0.01))  # … and a random way into the next one
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        reported |= {row[0] for row in committed("".join(lines) + out)}

        assert integrity(path) == "ok", f"round {round_}"
        with EventStore.open(path) as store:
            events = store.events()
            ids = {e.id for e in events}
            mine = [e for e in events if e.data["tag"] == f"k{round_}"]
            assert len(mine) >= 1
            for event in events:
                store.get_messages(event.data["messages"])  # every referenced blob is there
            for agent in ("a", "b"):
                seqs = [e.seq for e in events if e.agent == agent]
                assert seqs == list(range(1, len(seqs) + 1))
        assert reported <= ids, f"round {round_}: lost {sorted(reported - ids)}"
