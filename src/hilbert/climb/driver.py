"""The climb's driver: open the run (or resume it from its log), measure the base, let `explorers`
explorers try ideas in parallel until the tries, the time or the money run out, then finish.

A resume reads everything from the fold: the settings (`climb_started`), the best and the noise, the
tries done. A try that was in flight when the process died is reverted as `interrupted` (its
workspace archived) and a fresh try takes its place — unless the best branch had already moved to it
(the process died between the landing and `try_kept`): then it is kept, as the branch says (its
holdout was measured before the landing). Every `renoise_every` tries the best is measured again and
the noise taken from there. With a holdout (`--holdout-metric`), its files' folders are hidden from
every command but the harness's holdout runs (`sealed_folders`), and it is measured on the base and
on each try the metric found better, before it is kept (`tries.measure_holdout`). `results.tsv`
beside the log is rewritten from the fold after every try.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import os
import shlex
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hilbert.climb import events as ce
from hilbert.climb.measure import KINDS, Kind, Measurer
from hilbert.climb.metric import noise
from hilbert.climb.results import progress_line, write_results
from hilbert.climb.state import ClimbFold, ClimbState
from hilbert.climb.tries import Climb, measure_holdout, merge_trees, one_try
from hilbert.commands import Runner, verify_timeout
from hilbert.commands.leftovers import kill_marked, new_mark
from hilbert.errors import RunError, UserError
from hilbert.fleet.names import Name, allocate
from hilbert.models.types import Model
from hilbert.store import EventStore
from hilbert.workspaces import Git, Workspaces
from hilbert.workspaces.integration import Integration, refuse_submodules


@dataclass(frozen=True)
class ClimbOptions:
    """What `hilbert climb` was asked (a resume takes them from the log instead)."""

    repo: Path
    metric: str
    goal: str
    test_command: str
    explorers: int = 3
    tries: int = 0
    repeat: int = 5
    renoise_every: int = 10
    max_cost_usd: float = 0.0
    max_time_s: float = 0.0
    guards: tuple[str, ...] = ()
    holdout: str = ""
    stop_on_overfit: bool = False
    metric_kind: str = "number"  # `hilbert.climb.measure.KINDS`
    check: str = ""


def best_branch(run: str) -> str:
    return f"hilbert/climb/{run}/best"


def results_path(c: Climb) -> Path:
    """`results.tsv` beside the log, one per climb: `<run>-results.tsv`."""
    return c.store.path.parent / f"{c.run}-results.tsv"


@contextlib.asynccontextmanager
async def open_climb(
    options: ClimbOptions | None, *, run: str, root: Path, store: EventStore, runner: Runner, model: Model
) -> AsyncIterator[Climb]:
    """The climb `run` in the folder `root`: fresh with `options`, else resumed from its log."""
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, run):
        async with _opened(options, run=run, root=root, store=store, runner=runner, model=model) as c:
            yield c


@contextlib.contextmanager
def _locked(root: Path, run: str) -> Iterator[None]:
    """Hold the climb folder's lock while this process drives it (the kernel drops it when it dies):
    two processes never drive one climb."""
    with (root / "climb.lock").open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UserError(
                f"climb {run} is live: {holder} is driving it", hint="watch it: hilbert climb --status"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        yield


@contextlib.asynccontextmanager
async def _opened(
    options: ClimbOptions | None, *, run: str, root: Path, store: EventStore, runner: Runner, model: Model
) -> AsyncIterator[Climb]:
    fold = ClimbFold(store, run)
    state = fold.catch_up()
    if options is None and state.started is None:
        raise UserError(f"run {run} is not a climb", hint="start one with `hilbert climb --metric ...`")
    if options is not None and state.started is not None:
        raise UserError(f"run {run} exists already", hint=f"resume it: hilbert climb --run {run} --resume")
    started = state.started
    if started is not None:  # a resume: first, kill what the dead process's commands left running
        await asyncio.to_thread(kill_marked, started.mark)
    mark = started.mark if started is not None else new_mark()  # one mark for the climb's life
    git = Git(home=root / "home", mark=mark)
    (root / "home").mkdir(parents=True, exist_ok=True)
    if started is None:
        assert options is not None
        if options.goal not in ("min", "max"):
            raise UserError(f"unknown goal {options.goal!r}", hint="use --goal min or --goal max")
        if options.metric_kind not in KINDS:
            raise UserError(
                f"unknown metric kind {options.metric_kind!r}", hint="use --metric-kind number or time"
            )
        source = options.repo.absolute()
        sealed_folders(options.holdout, source)  # refused before anything is written
        await refuse_submodules(source, git)
        branch = best_branch(run)
        path = root / "integration.git"
        await git.run("clone", "--bare", "--quiet", "--no-tags", source, path)
        await git.run("-C", path, "branch", branch, "HEAD")
        base = (await git.run("-C", path, "rev-parse", "HEAD")).stdout.strip()
        started = ce.ClimbStarted(
            repo=str(source), integration=str(path), branch=branch, base=base, metric=options.metric,
            goal=options.goal, test_command=options.test_command, explorers=options.explorers,
            tries=options.tries, repeat=options.repeat, renoise_every=options.renoise_every,
            max_cost_usd=options.max_cost_usd, max_time_s=options.max_time_s,
            guards=list(options.guards), model=model.name, mark=mark, holdout=options.holdout,
            stop_on_overfit=options.stop_on_overfit, metric_kind=options.metric_kind, check=options.check,
        )  # fmt: skip
        store.append(run, "harness", started.kind, started.data())
        fold.catch_up()
    integration = Integration(Path(started.integration), git, started.branch)
    sealed = sealed_folders(started.holdout, Path(started.repo))
    marked = runner.hiding(root, *sealed).marked(mark)
    # the holdout's own runner: the sealed folders bound read-only (a sandbox shows nothing of /tmp else)
    seeing = dataclasses.replace(runner.sandbox, keep=(*runner.sandbox.keep, *sealed))
    harness = dataclasses.replace(runner, sandbox=seeing).hiding(root).marked(mark)
    timeout = verify_timeout(marked.timeouts)
    kind: Kind = "time" if started.metric_kind == "time" else "number"
    measurer = Measurer(
        integration.path,
        started.metric,
        marked,
        git,
        root / "measure",
        timeout,
        kind=kind,
        check=started.check,
    )
    holdout = None
    if started.holdout:
        holdout = Measurer(
            integration.path, started.holdout, harness, git, root / "holdout", timeout, measurer.lock, kind
        )
    workspaces = Workspaces(root, integration.path, mark=mark)
    yield Climb(run, root, store, fold, integration, workspaces, marked, model, measurer, holdout)


def sealed_folders(holdout: str, repo: Path) -> tuple[Path, ...]:
    """The folders of the files a holdout command names (by absolute path), hidden from everything
    but the harness's holdout runs. A holdout naming no such file, or one inside the repository, is
    refused: it would not be sealed."""
    if not holdout:
        return ()
    try:
        words = shlex.split(holdout)
    except ValueError:
        words = holdout.split()
    files = [Path(word) for word in words if Path(word).is_absolute() and Path(word).exists()]
    hint = "keep the holdout's script and data outside the repository and name them by absolute path"
    if not files:
        raise UserError(f"the holdout `{holdout}` names no file by absolute path", hint=hint)
    for path in files:
        if path.resolve().is_relative_to(repo.resolve()):
            raise UserError(f"the holdout's {path} is inside the repository {repo}", hint=hint)
    return tuple(sorted({p.resolve() if p.is_dir() else p.resolve().parent for p in files}))


async def climb(c: Climb, echo: Callable[[str], None] = lambda line: None) -> ClimbState:
    """Drive the climb to its end (`echo` hears one line per try as it ends); the final state."""
    state = c.fold.catch_up()
    started = state.started
    assert started is not None
    if state.finished is not None:
        return state
    await _close_interrupted(c)
    if state.best_median is None:
        await measure_base(c)
        state = c.fold.catch_up()
        if state.base_error:
            c.record(ce.ClimbFinished(reason=f"the base could not be measured: {state.base_error}"))
            raise RunError(
                f"the metric failed on the base: {state.base_error}",
                hint="run the metric by hand in the repository, twice: it must print the same answer for"
                " the same $HILBERT_CLIMB_SEED, and one number on its last line",
            )
    if c.holdout is not None and state.holdout_base is None and not state.holdout_error:
        await measure_holdout(c, 0, state.best)
    names = allocate(started.explorers)
    numbers = iter(range(state.next_try(), 1 << 30))
    stopping: list[str] = []

    async def explorer(name: Name) -> None:
        while not stopping:
            why = budget_spent(c.fold.catch_up())
            if why:
                stopping.append(why)
                return
            number = next(numbers)
            await one_try(c, name, number)
            state = c.fold.catch_up()
            write_results(state, results_path(c))
            echo(progress_line(state.tries[number]))
            await _maybe_renoise(c)

    await asyncio.gather(*(explorer(name) for name in names))
    state = c.fold.catch_up()
    reason = stopping[0] if stopping else "done"
    c.record(ce.ClimbFinished(reason=reason, best=state.best, median=state.best_median or 0.0))
    state = c.fold.catch_up()
    write_results(state, results_path(c))
    return state


async def measure_base(c: Climb) -> None:
    state = c.fold.catch_up()
    assert state.started is not None
    measured = await c.measurer.measure(state.best, max(state.started.repeat, 3), "base")
    if not measured.error and state.best_median is None:  # the start: is its answer its own?
        measured = dataclasses.replace(measured, error=await _unsteady(c, state.best))
    c.record(
        ce.BaselineMeasured(
            commit=state.best, values=list(measured.values), error=measured.error,
            median=measured.median if measured.values else 0.0,
            noise=noise(measured.values) if measured.values else 0.0,
        )
    )  # fmt: skip


async def _unsteady(c: Climb, commit: str) -> str:
    """Why `commit`'s answer cannot be checked — the metric answered otherwise run twice on the same
    input (a timestamp, a random draw of its own): every try would be reverted for it — else ""."""
    once, again = await c.measurer.compare((commit, commit), 1, "base-twice")
    if once.error or again.error or once.answers == again.answers:
        return once.error or again.error
    first, second = (" / ".join(answer.splitlines())[:80] for answer in (*once.answers, *again.answers))
    seed = once.seeds[0]
    return f"it answered otherwise on the same input (seed {seed}), run twice: {first!r} then {second!r}"


def budget_spent(state: ClimbState) -> str:
    started = state.started
    assert started is not None
    counted = [t for t in state.done if t.stage != "interrupted"]
    if started.tries and len(counted) + len(state.in_flight) >= started.tries:
        return f"all {started.tries} tries made"
    if started.max_time_s and time.time() - state.started_at >= started.max_time_s:
        return f"the time budget ({started.max_time_s:g} s) is spent"
    if started.max_cost_usd and state.spent_usd >= started.max_cost_usd:
        return f"the money budget (${started.max_cost_usd:g}) is spent"
    if started.stop_on_overfit and state.overfit:
        return f"overfitting: the holdout did not follow the metric on try {state.overfit[0].no}"
    return ""


async def _maybe_renoise(c: Climb) -> None:
    async with c.deciding:  # the best does not move while it is measured
        state = c.fold.catch_up()
        assert state.started is not None
        every = state.started.renoise_every
        if every and len(state.done) - state.noise_at_try >= every:
            await measure_base(c)


async def _close_interrupted(c: Climb) -> None:
    """End the tries the dead process left in flight: kept when the best branch had already moved to
    one — the merge queue's merge of it (`merge_landing` names it), or the try itself as an older
    climb landed it — (it died between the landing and `try_kept`: the branch is the truth of what
    was delivered), else reverted as interrupted. The merge trees it was building are removed."""
    tip = await c.integration.tip()
    for view in list(c.fold.catch_up().in_flight):
        state = c.fold.state
        if tip in (view.landing, view.commit) and tip and tip != state.best and view.median is not None:
            previous = state.best_median or 0.0
            c.record(ce.TryKept(try_no=view.no, commit=tip, median=view.median, previous=previous))
        else:
            reason = "the run stopped while it ran"
            c.record(ce.TryReverted(try_no=view.no, stage="interrupted", reason=reason))
        for tree in merge_trees(c, view.no):  # a merge it was building when the process died
            await tree.remove()
        worker_id = next((n.id for n in allocate(64) if n.display == view.explorer), None)
        if worker_id is not None:
            checkout = c.workspaces.existing(f"{worker_id}-{view.no}", view.base)
            if checkout.git_dir.exists():
                await c.workspaces.archive_or_remove(checkout, c.integration)


async def deliver_best(c: Climb) -> str:
    """Fetch the best branch into the person's repository under the same name (created, or
    fast-forwarded only: a plain fetch without `+`); the one write a climb makes there."""
    started = c.fold.catch_up().started
    assert started is not None
    ref = f"refs/heads/{started.branch}"
    fetched = await c.integration.git.run(
        "fetch", "--no-tags", "--no-write-fetch-head", str(c.integration.path), f"{ref}:{ref}",
        cwd=Path(started.repo), check=False,
    )  # fmt: skip
    if fetched.returncode != 0:
        raise RunError(
            f"the best was not written to {started.repo}: {fetched.stderr.strip()[:200]}",
            hint=f"fetch it yourself: git fetch {c.integration.path} {ref}:refs/heads/NAME",
        )
    return started.branch


__all__ = [
    "ClimbOptions",
    "best_branch",
    "budget_spent",
    "climb",
    "deliver_best",
    "measure_base",
    "open_climb",
    "results_path",
    "sealed_folders",
]
