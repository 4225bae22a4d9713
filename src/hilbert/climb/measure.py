"""The harness's measurement of a commit: the metric, run by the harness alone, `repeat` times.

For each commit: a clean export of its tree (`hilbert.workspaces.export`: nothing uncommitted, no git
dir) in a folder of its own, bound read-only inside the sandbox where the sandbox can (bubblewrap) and
listed before and after every run where it cannot: a run that wrote into the tree (a cache of its
answer, a changed benchmark) is a failed measurement that names what it wrote. While the metric runs,
every command slot of the run's `Runner` is held (`Slots`), so no test, gate or build of an explorer
runs beside it; one measurement at a time (`Measurer.lock`). A try is measured interleaved with the
best (`compare`: best, try, best, try, ...), so that drift of the machine between two measurements
does not pass for a gain. The median of the readings is the commit's score; `hilbert.climb.metric`
reads each one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.climb.metric import MetricError, median, read_metric, spread
from hilbert.commands import Runner, Timeout
from hilbert.workspaces import Git
from hilbert.workspaces.export import export_commit


@dataclass(frozen=True)
class Measurement:
    """The readings of one commit; `error` says why there is no score (then `values` may be short)."""

    values: tuple[float, ...] = ()
    error: str = ""
    wrote: tuple[str, ...] = ()  # what a run wrote into the tree

    @property
    def median(self) -> float:
        return median(self.values)

    @property
    def spread(self) -> float:
        return spread(self.values)


@dataclass
class Measurer:
    """Measures commits of the repository `repo` with `metric` through `runner`, under `scratch`."""

    repo: Path
    metric: str
    runner: Runner
    git: Git
    scratch: Path
    timeout: Timeout
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def measure(self, commit: str, repeat: int, label: str) -> Measurement:
        """`commit` measured `repeat` times."""
        return (await self.compare((commit,), repeat, label))[0]

    async def compare(self, commits: tuple[str, ...], repeat: int, label: str) -> tuple[Measurement, ...]:
        """Each of `commits` measured `repeat` times, interleaved (a, b, a, b, ...): a machine that
        gets busier or quieter meanwhile moves them alike, so their difference is the change's own."""
        async with self.lock:
            root = self.scratch / label
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            try:
                trees = [
                    await export_commit(self.git, self.repo, commit, root / f"tree-{i}")
                    for i, commit in enumerate(commits)
                ]
                found: list[Measurement] = [Measurement() for _ in commits]
                for _ in range(repeat):
                    for i, tree in enumerate(trees):
                        if not found[i].error:
                            found[i] = await self._run(root, tree, found[i])
                return tuple(found)
            finally:
                await asyncio.to_thread(shutil.rmtree, root, True)

    async def _run(self, root: Path, tree: Path, so_far: Measurement) -> Measurement:
        """One more reading of the export `tree` on top of `so_far`, or why there is none."""
        values = so_far.values
        alone = dataclasses.replace(self.runner, slots=None)  # the slots are held around it instead
        before = _listing(tree)
        async with all_slots(self.runner):
            ran = await alone.run(self.metric, root=root, cwd=tree, timeout=self.timeout, readonly=(tree,))
        wrote = _changed(before, _listing(tree))
        if wrote:
            shown = ", ".join(wrote[:3]) + (" …" if len(wrote) > 3 else "")
            return Measurement(values, f"the metric's run wrote into the tree: {shown}", wrote)
        if not ran.ok:
            tail = " ".join(ran.text(root).strip().splitlines()[-1:]).replace(f"{tree}/", "")[:200]
            return Measurement(values, f"`{self.metric}` failed ({ran.status()}): {tail}")
        try:
            return Measurement((*values, read_metric(ran.output.render())))
        except MetricError as bad:
            return Measurement(values, str(bad))


@contextlib.asynccontextmanager
async def all_slots(runner: Runner) -> AsyncIterator[None]:
    """Hold every command slot of `runner` (nothing else of the run runs meanwhile)."""
    async with contextlib.AsyncExitStack() as stack:
        if runner.slots is not None:
            for _ in range(runner.slots.count):
                await stack.enter_async_context(runner.slots)
        yield


def _listing(tree: Path) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(tree):
        for name in files + dirs:
            path = Path(folder) / name
            info = path.lstat()
            size = 0 if path.is_dir() and not path.is_symlink() else info.st_size
            found[str(path.relative_to(tree))] = (size, info.st_mtime_ns if name in files else 0)
    return found


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[str, ...]:
    return tuple(sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)))


__all__ = ["Measurement", "Measurer", "all_slots"]
