"""The harness's measurement of a commit: the metric, run by the harness alone, `repeat` times.

For each commit: a clean export of its tree (`hilbert.workspaces.export`: nothing uncommitted, no git
dir) in a folder of its own, bound read-only inside the sandbox where the sandbox can (bubblewrap) and
listed before and after every run where it cannot: a run that wrote into the tree (a cache of its
answer, a changed benchmark) is a failed measurement that names what it wrote. While the metric runs,
every command slot of the run's `Runner` is held (`Slots`), so no test, gate or build of an explorer
runs beside it; one measurement at a time (`Measurer.lock`). A try is measured interleaved with the
best (`compare`: best, try, best, try, ...), so that drift of the machine between two measurements
does not pass for a gain.

Every run goes through the harness's stopwatch (`hilbert.climb.timer`, inside the sandbox): a fresh
process each time, its standard output captured, its process tree's CPU time taken from the kernel.
What a reading is depends on the metric's kind (`KINDS`):

- `time`: the CPU seconds (user + system) of the command's whole process tree, imports and child
  processes included, as the harness timed it; the command is run in a loop until the loop used
  `MIN_CPU_S` (a reading is the loop's mean per run, so a sub-millisecond command does not read 0).
  A number the command prints is not read at all.
- `number`: the number the command prints on its last non-empty line (`hilbert.climb.metric`): a
  score the harness cannot compute itself (an accuracy, a size). It is trusted only as far as the
  guards, the read-only tree, the answer check and the holdout reach; use `time` for a timing.

The answer: every round draws a fresh seed, the same for every commit of the round, passed to the
metric (and `check`) as `HILBERT_CLIMB_SEED` — a value no explorer sees; a benchmark that reads it
draws its input from it. A run's answer is its standard output without the number line (its last
non-empty line, when that is one number), or the whole output of `check` when one is given, run
beside it with the same seed. `answer_differs` compares a try's answers with the best's, round by
round: a precomputed table, a cutoff or a special case answers differently on an input it never saw.
The median of the readings is the commit's score.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
import shlex
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hilbert.climb.metric import MetricError, median, read_metric, spread
from hilbert.commands import Runner, Timeout
from hilbert.security.sandbox import LANDLOCK_TMP
from hilbert.workspaces import Git
from hilbert.workspaces.export import export_commit

Kind = Literal["number", "time"]
KINDS: tuple[Kind, ...] = ("number", "time")
MIN_CPU_S = 0.05  # a `time` reading loops the command until it used this much CPU
SEED_VARIABLE = "HILBERT_CLIMB_SEED"
SCRATCH = "tmp"  # in the measurement's folder: the runs' TMPDIR, the one place they may write
TIMER = Path(__file__).with_name("timer.py")  # run as a script, inside the sandbox


@dataclass(frozen=True)
class Measurement:
    """The readings of one commit; `error` says why there is no score (then `values` may be short).
    `answers[i]` is what it answered in round `i` (with `seeds[i]`), `runs[i]` the loop's length."""

    values: tuple[float, ...] = ()
    error: str = ""
    wrote: tuple[str, ...] = ()  # what a run wrote into the tree
    answers: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    runs: tuple[int, ...] = ()

    @property
    def median(self) -> float:
        return median(self.values)

    @property
    def spread(self) -> float:
        return spread(self.values)


@dataclass(frozen=True)
class Run:
    """One stopwatch report (`hilbert.climb.timer`)."""

    runs: int
    cpu: float
    status: int
    stdout: str
    same: bool


@dataclass
class Measurer:
    """Measures commits of the repository `repo` with `metric` (of `kind`; `check`: the command
    whose output is the answer, "" for the metric's own) through `runner`, under `scratch`."""

    repo: Path
    metric: str
    runner: Runner
    git: Git
    scratch: Path
    timeout: Timeout
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    kind: Kind = "number"
    check: str = ""

    async def measure(self, commit: str, repeat: int, label: str) -> Measurement:
        """`commit` measured `repeat` times."""
        return (await self.compare((commit,), repeat, label))[0]

    async def compare(self, commits: tuple[str, ...], repeat: int, label: str) -> tuple[Measurement, ...]:
        """Each of `commits` measured `repeat` times, interleaved (a, b, a, b, ...): a machine that
        gets busier or quieter meanwhile moves them alike, so their difference is the change's own.
        Each round's seed is fresh and the same for every commit of the round."""
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
                    seed = secrets.randbelow(1 << 31)
                    for i, tree in enumerate(trees):
                        if not found[i].error:
                            found[i] = await self._reading(root, tree, found[i], seed)
                return tuple(found)
            finally:
                await asyncio.to_thread(shutil.rmtree, root, True)

    async def _reading(self, root: Path, tree: Path, so_far: Measurement, seed: int) -> Measurement:
        """One more reading (and answer) of the export `tree` on top of `so_far`, or why there is none."""
        min_cpu = MIN_CPU_S if self.kind == "time" else 0.0
        ran, error = await self._timed(root, tree, self.metric, seed, min_cpu)
        if ran is None:
            return dataclasses.replace(so_far, error=error[0], wrote=error[1])
        try:
            value = ran.cpu if self.kind == "time" else read_metric(ran.stdout)
        except MetricError as bad:
            return dataclasses.replace(so_far, error=str(bad))
        answer = answer_of(ran.stdout)
        if self.check:
            checked, error = await self._timed(root, tree, self.check, seed, 0.0)
            if checked is None:
                return dataclasses.replace(so_far, error=f"check: {error[0]}", wrote=error[1])
            answer = checked.stdout.strip()
        return dataclasses.replace(
            so_far,
            values=(*so_far.values, value),
            answers=(*so_far.answers, answer),
            seeds=(*so_far.seeds, seed),
            runs=(*so_far.runs, ran.runs),
        )

    async def _timed(
        self, root: Path, tree: Path, command: str, seed: int, min_cpu: float
    ) -> tuple[Run | None, tuple[str, tuple[str, ...]]]:
        """`command` run by the stopwatch in `tree` with the round's `seed`: its report, or None and
        (why, what it wrote where it may not). Every tree of the measurement is read-only (where the
        sandbox can) and listed before and after; the one folder it may write, its TMPDIR, is emptied
        before every run (by the stopwatch between the runs of its loop, with a bubblewrap sandbox's
        private /tmp): nothing one run leaves helps the next."""
        scratch = root / SCRATCH
        for folder in (scratch, root / LANDLOCK_TMP):
            await asyncio.to_thread(shutil.rmtree, folder, True)
        scratch.mkdir()
        fresh = [scratch, root / LANDLOCK_TMP]
        if self.runner.sandbox.kind == "bubblewrap":
            fresh.append(Path("/tmp"))  # its own tmpfs, for this command alone
        # the slots are held around it instead; the stopwatch (and the reaper it uses) readable inside
        # the sandbox even where hilbert lies under a folder it empties (/tmp)
        sandbox = self.runner.sandbox
        sandbox = dataclasses.replace(sandbox, keep=(*sandbox.keep, TIMER.parent.parent))
        alone = dataclasses.replace(self.runner, slots=None, sandbox=sandbox)
        alone = alone.with_env({SEED_VARIABLE: str(seed), "TMPDIR": str(scratch)})
        trees = tuple(sorted(root.glob("tree-*")))
        before = _listing(root)
        with tempfile.TemporaryFile() as report:
            fd = report.fileno()
            timer = [sys.executable, "-I", "-S", str(TIMER), "--report", str(fd), "--min-cpu", f"{min_cpu:g}"]
            timer += [arg for folder in fresh for arg in ("--fresh", str(folder))]
            line = shlex.join([*timer, "--", "bash", "-c", command])
            async with all_slots(self.runner):
                ran = await alone.run(
                    line, root=root, cwd=tree, timeout=self.timeout, readonly=trees, pass_fds=(fd,)
                )
            report.seek(0)
            text = report.read().decode("utf-8", "replace")
        wrote = tuple(_relative(path, tree.name) for path in _changed(before, _listing(root)))
        if wrote:
            shown = ", ".join(wrote[:3]) + (" …" if len(wrote) > 3 else "")
            return None, (f"the metric's run wrote into the tree: {shown}", wrote)
        tail = " ".join(ran.text(root).strip().splitlines()[-1:]).replace(f"{tree}/", "")[:200]
        try:
            data = json.loads(text)
            got = Run(
                int(data["runs"]), float(data["cpu"]), int(data["status"]), str(data["stdout"]), data["same"]
            )
        except (ValueError, KeyError, TypeError):
            return None, (f"`{command}` gave the harness no report ({ran.status()}): {tail}", ())
        if got.status != 0:
            printed = " ".join(got.stdout.strip().splitlines()[-1:])[:200]
            return None, (f"`{command}` failed (exit {got.status}): {tail or printed}", ())
        if not got.same:
            return None, (f"`{command}` printed something else on another run of the same input", ())
        return got, ("", ())


def _relative(path: str, tree: str) -> str:
    """A path under the measurement's folder as seen from the tree `tree` (another tree: `../tree-1/...`)."""
    return path.removeprefix(f"{tree}/") if path.startswith(f"{tree}/") else f"../{path}"


def answer_of(stdout: str) -> str:
    """A run's answer: its output's non-empty lines, stripped, without the last when it is one number
    (the metric's reading, or a timing it printed)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    with contextlib.suppress(MetricError):
        if lines:
            read_metric(lines[-1])
            lines = lines[:-1]
    return "\n".join(lines)


def answer_differs(tried: Measurement, beside: Measurement) -> str:
    """A finding when `tried` answered otherwise than `beside` (the best, measured in the same rounds
    with the same seeds), else ""."""
    for seed, mine, theirs in zip(tried.seeds, tried.answers, beside.answers, strict=False):
        if mine != theirs:
            return (
                f"answer_differs: on the harness's input (seed {seed}) it answered {_short(mine)}"
                f" where the best answered {_short(theirs)}"
            )
    return ""


def _short(answer: str) -> str:
    if not answer:
        return "nothing"
    if len(answer) <= 60:
        return repr(answer)
    return f"{answer[:50]!r}… (sha1 {hashlib.sha1(answer.encode()).hexdigest()[:10]})"


@contextlib.asynccontextmanager
async def all_slots(runner: Runner) -> AsyncIterator[None]:
    """Hold every command slot of `runner` (nothing else of the run runs meanwhile)."""
    async with contextlib.AsyncExitStack() as stack:
        if runner.slots is not None:
            for _ in range(runner.slots.count):
                await stack.enter_async_context(runner.slots)
        yield


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` (its size and mtime), but the runs' scratch folders."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        if Path(folder) == root:
            dirs[:] = [d for d in dirs if d not in (SCRATCH, LANDLOCK_TMP.parts[0])]
        for name in files + dirs:
            path = Path(folder) / name
            info = path.lstat()
            size = 0 if path.is_dir() and not path.is_symlink() else info.st_size
            found[str(path.relative_to(root))] = (size, info.st_mtime_ns if name in files else 0)
    return found


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[str, ...]:
    return tuple(sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)))


__all__ = [
    "KINDS",
    "MIN_CPU_S",
    "SEED_VARIABLE",
    "Kind",
    "Measurement",
    "Measurer",
    "all_slots",
    "answer_differs",
    "answer_of",
]
