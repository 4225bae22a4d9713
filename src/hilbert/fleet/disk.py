"""The disk under the run's folder: a reserve for the event log, a watch, and a pause while it is full.

Where no quota holds a worker to its share, the fleet survives a full disk by design:

- **Reserve.** At the start the run's folder gets `fleet.disk_reserve_mb` of allocated space in a few
  files (`disk-reserve/`, given back when the run ends). When a write of the event log fails because
  the disk is full, the store calls `DiskGuard.make_room` (`EventStore.on_full`): one piece is given
  up and the write is tried again, so the log records what happens. Only then: given up as soon as
  free space merely falls low, the room would go to whatever is still filling the disk, and the log
  would find none.
- **Watch.** Every `fleet.disk_check_s` (at once after a failed write) it reads the free space of the
  run folder's file system (`os.statvfs`). Below `fleet.disk_min_free_mb`, or after a failed write,
  the disk is *full*: `disk_full` is recorded with the free bytes and the running worker whose
  workspace (its work tree, git dir and spilled command output, in allocated blocks) grew most since
  the last look, and that worker is asked to stop as `hilbert stop WORKER` asks (a `stop_requested`
  from the harness, with the reason): it halts at its next turn, and its workspace is archived and
  removed as any halted attempt's is, which gives the space back. While the disk stays full and that
  worker is gone, the next one that grows is halted the same way; when nothing grew (the disk filled
  from outside), nobody is.
- **Pause.** While full, no attempt starts and no merge batch begins (the driver reads `full`); work in
  flight goes on. A merge batch that ran while the disk was full (`spoiled`) counts only the
  candidates it merged: the others are queued again (`merge_requeued`), not failed for a conflict or
  red checks that may have been the disk's. When free space is back above the floor and the reserve
  together, the reserve is made again, `disk_ok` is recorded and the driver is woken (`woken`) to
  start what waited.

Workspace sizes are read (in a thread) only when free space is within four times the floor, so a
roomy disk costs one `statvfs` per look. The decisions are pure (`assess`, `fastest`); `DiskGuard`
applies them. Limits: a worker that writes without pause can take a given-up piece before the log
does (each failed write gives up the next piece; with none left the log waits `WAIT_S`, blocking
the run, then fails in one line); a worker's work that cannot be compressed cannot be archived on a
full disk (its attempt then ends in a harness error and the workspace stays). The kinds `disk_full`,
`disk_ok` and `disk_error` are registered here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Literal

from hilbert.fleet.events import FleetEvent, StopRequested, kind
from hilbert.fleet.names import Name
from hilbert.settings import FleetSettings

MIB = 1 << 20
PIECES = 4  # the reserve's files: each failed write of the log gives up one
NEAR = 4  # workspace sizes are read when free space is below NEAR times the floor
WAIT_S = 300.0  # how long a write of the log waits for room once the reserve is spent
SPELL_GAP_S = 5.0  # failed writes further apart are two spells (the store tries again every second)
HALTED = "the harness halted this worker: the disk is full and its workspace grew fastest ({grown})"


@kind("disk_full")
class DiskFull(FleetEvent):
    free_bytes: int = 0
    min_free_bytes: int = 0
    worker: str = ""  # the worker halted ("": nobody's workspace grew)
    task: str = ""
    grown_bytes: int = 0  # how much its workspace grew since the look before
    why: str = ""


@kind("disk_ok")
class DiskOk(FleetEvent):
    free_bytes: int = 0
    reserve_bytes: int = 0  # the reserve made again


@kind("disk_error")
class DiskError(FleetEvent):
    error: str = ""


def assess(free: int, floor: int, reserve: int, *, full: bool, alarmed: bool) -> Literal["full", "ok"] | None:
    """What changed: the disk became full (below the floor, or a write failed), or has room again
    (above the floor and the reserve together, with no write failed since the last look)."""
    if not full and (alarmed or free < floor):
        return "full"
    if full and not alarmed and free >= floor + reserve:
        return "ok"
    return None


def fastest(before: Mapping[str, int], now: Mapping[str, int], spared: Iterable[str] = ()) -> str | None:
    """The workspace (of `now`) that grew most since `before` (one not there before grew by all of
    it); None when none grew. `spared` are not chosen."""
    left_out = set(spared)
    grown = {name: size - before.get(name, 0) for name, size in now.items() if name not in left_out}
    best = max(grown, key=lambda name: grown[name], default=None)
    return best if best is not None and grown[best] > 0 else None


class Reserve:
    """`size` bytes of allocated space in `PIECES` files under `folder`, given up one piece at a time."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder, self.size = folder, size
        self.pieces = [folder / f"piece-{i}" for i in range(PIECES)] if size else []

    def make(self) -> bool:
        """Allocate every missing piece; False (and no partial piece left) when the disk has no room."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for piece in self.pieces:
            if not piece.exists() and not _allocate(piece, -(-self.size // PIECES)):
                return False
        return True

    def remove(self) -> None:
        """Give the whole reserve back (the run is over)."""
        while self.give_up_one():
            pass
        with contextlib.suppress(OSError):
            self.folder.rmdir()

    def give_up_one(self) -> bool:
        for piece in self.pieces:
            try:
                piece.unlink()
                return True
            except FileNotFoundError:
                continue
        return False


class DiskGuard:
    """The fleet's disk watch over the run's folder `root`. `running` names the running workers (task ->
    name); `record` appends a harness event. `full` pauses the driver; `woken` is set at `disk_ok`."""

    def __init__(
        self,
        root: Path,
        settings: FleetSettings,
        *,
        record: Callable[[FleetEvent], object],
        running: Callable[[], Mapping[str, Name]],
    ) -> None:
        self.root, self.record, self.running = root, record, running
        self.floor = settings.disk_min_free_mb * MIB
        self.check_s = settings.disk_check_s
        self.reserve = Reserve(root / "disk-reserve", settings.disk_reserve_mb * MIB)
        self.full = False
        self.spells = 0  # how often the disk became full in this run
        self.woken = asyncio.Event()
        self.sizes: dict[str, int] = {}  # worker id -> its workspace's size at the last look
        self.halted: set[str] = set()  # worker ids asked to stop whose attempt still runs
        self._alarm = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting_since = self._last_call = 0.0

    def start(self) -> None:
        """Make the reserve (no room for it: the first look finds the disk full)."""
        self.reserve.make()

    def close(self) -> None:
        """The run is over: its reserve is given back."""
        self.reserve.remove()

    def make_room(self) -> bool:
        """The store's `on_full` hook: a write of the log failed for want of space. Give up a piece of
        the reserve and look at once; whether the store should try again (for `WAIT_S` once the
        reserve is spent). Any thread; it must not write to the store."""
        now = time.monotonic()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._alarm.set)
        if now - self._last_call > SPELL_GAP_S:  # a new spell of failed writes
            self._waiting_since = now
        self._last_call = now
        return self.reserve.give_up_one() or now - self._waiting_since < WAIT_S

    def spoiled(self, spells: int) -> bool:
        """Whether the disk is full now, or was since it had been full `spells` times: what failed
        meanwhile may have failed for want of space."""
        return self.full or self.spells != spells

    async def watch(self) -> None:
        """Look every `check_s` (at once after a failed write), until cancelled."""
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                await self.look()
            except Exception as error:  # a failed look must not stop the run: say so, keep watching
                self.record(DiskError(error=f"{type(error).__name__}: {error}"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._alarm.wait(), self.check_s)

    async def look(self) -> None:
        alarmed = self._alarm.is_set()
        self._alarm.clear()
        stat = os.statvfs(self.root)
        free = stat.f_bavail * stat.f_frsize
        running = {name.id: (task, name) for task, name in self.running().items()}
        self.halted &= set(running)  # a halted worker whose attempt ended: its workspace is closed
        sizes: dict[str, int] = {}
        if self.full or alarmed or free < NEAR * self.floor:
            sizes = await asyncio.to_thread(self._sizes, list(running))
        decision = assess(free, self.floor, self.reserve.size, full=self.full, alarmed=alarmed)
        if decision == "ok":
            self.full = False
            made = await asyncio.to_thread(self.reserve.make)
            self.record(DiskOk(free_bytes=free, reserve_bytes=self.reserve.size if made else 0))
            self.woken.set()
        elif decision == "full" or (self.full and not self.halted):
            chosen = fastest(self.sizes, sizes, spared=self.halted)
            if decision == "full":
                self.full, self.spells = True, self.spells + 1
            if decision == "full" or chosen is not None:
                self.halt(free, chosen, running, sizes[chosen] - self.sizes.get(chosen, 0) if chosen else 0)
        self.sizes = sizes

    def halt(
        self, free: int, chosen: str | None, running: Mapping[str, tuple[str, Name]], grown: int
    ) -> None:
        """Record `disk_full`, and ask the worker `chosen` (an id, or nobody) to stop."""
        task, name = running[chosen] if chosen else ("", None)
        why = f"{free // MIB} MiB free, below the floor of {self.floor // MIB} MiB (fleet.disk_min_free_mb)"
        if free >= self.floor:
            why = "a write of the event log failed: the disk is full"
        self.record(
            DiskFull(
                free_bytes=free,
                min_free_bytes=self.floor,
                worker=name.display if name else "",
                task=task,
                grown_bytes=grown,
                why=why,
            )
        )
        if chosen is not None and name is not None:
            self.halted.add(chosen)
            self.record(StopRequested(to=name.display, why=HALTED.format(grown=f"{grown // MIB} MiB")))

    def _sizes(self, workers: list[str]) -> dict[str, int]:
        """Each worker's allocated bytes: its work tree, git dir and spilled command output."""
        return {
            worker: sum(
                _allocated(folder)
                for folder in (
                    self.root / "workspaces" / worker,
                    self.root / "git" / f"{worker}.git",
                    self.root / "outputs" / worker,
                )
            )
            for worker in workers
        }


def _allocated(folder: Path) -> int:
    """Bytes allocated to the files under `folder` (symbolic links not followed; vanishing files skipped)."""
    total = 0
    for top, dirs, files in os.walk(folder):
        for entry in (*dirs, *files):
            try:
                total += os.lstat(os.path.join(top, entry)).st_blocks * 512
            except OSError:
                continue
    return total


def _allocate(piece: Path, size: int) -> bool:
    """`size` bytes really allocated to the new file `piece` (not a sparse file); False without room."""
    try:
        with open(piece, "wb") as file:
            try:
                os.posix_fallocate(file.fileno(), 0, size)
            except OSError as unsupported:
                if unsupported.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                for _ in range(-(-size // MIB)):
                    file.write(bytes(MIB))
                file.flush()
                os.fsync(file.fileno())
        return True
    except OSError:
        piece.unlink(missing_ok=True)
        return False


__all__ = ["DiskError", "DiskFull", "DiskGuard", "DiskOk", "Reserve", "assess", "fastest"]
