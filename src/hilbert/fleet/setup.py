"""Opening a fleet run: a fresh one, or one whose orchestrator died (`resume`), made whole first.

`open_run` (an async context manager) takes the run folder's lock — one live orchestrator per run: a
second is refused, naming the live one's pid and host — folds the log, builds the `RunContext`, and
for a resume, before anything restarts:

1. kills every process the dead orchestrator started (they carry the run's mark,
   `hilbert.commands.leftovers`);
2. reconciles the integration ref and the log both ways: a `merge_landing` whose ref move happened
   gets its `merged` events; one whose move did not happen leaves its candidates queued; a `merged`
   event whose commit is not on the branch is re-queued (`merge_reconciled` says which and why);
3. settles what the dead driver did not: a candidate recorded but not submitted, a merge not marked
   done, a conflict or rejection the queue logged but nobody acted on, a task marked running whose
   attempt never started;
4. records `fleet_resumed` with the settings that changed (workers, budgets, timeouts, models may;
   the plan, repository and base come from the log and cannot).

It yields an `Opened`: the context, the merge queue seeded with the candidates still waiting, and
the attempts to resume (task -> its attempt in the fold).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import resource
import shutil
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hilbert.agent import prompts
from hilbert.agent.policies import CostPool
from hilbert.commands import Runner
from hilbert.commands.leftovers import kill_marked, new_mark
from hilbert.context.repomap import repository_map
from hilbert.context.tokens import tokenizer_for
from hilbert.errors import RunError, UserError
from hilbert.fleet.admission import kv_cache_gate
from hilbert.fleet.context import Models, RunContext
from hilbert.fleet.crash import Crashes
from hilbert.fleet.events import (
    FleetResumed,
    FleetStarted,
    Merged,
    MergeReconciled,
    MergeRequeued,
)
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.fleet.outcomes import AttemptOutcome, after_attempt, after_merge, failure
from hilbert.fleet.plan import Plan
from hilbert.fleet.preflight import as_the_person_ignores
from hilbert.fleet.state import HARNESS, AttemptView, Fold
from hilbert.fleet.tainted import hold_all, settle_all
from hilbert.models.governor import governor_path
from hilbert.security.envelope import MessageKey
from hilbert.settings import DEFAULT, Settings, known_keys
from hilbert.skills import Skill
from hilbert.store import EventStore
from hilbert.workspaces import Git, Workspaces
from hilbert.workspaces.integration import Integration

LOCK = "run.lock"


@dataclass(frozen=True)
class Opened:
    ctx: RunContext
    queue: MergeQueue
    resuming: dict[str, AttemptView]


def resumable(settings: Settings, models: Models) -> dict[str, Any]:
    """The settings a resume may change and otherwise inherits, flat (`fleet.workers`, `timeouts.gate_s`,
    `commands.test`, `model`, ...)."""
    flat: dict[str, Any] = {
        f"{section}.{key}": value
        for section in ("fleet", "budgets", "gate", "liveness", "timeouts")
        for key, value in asdict(getattr(settings, section)).items()
    }
    # the merge queue's command and the workers' compaction are the run's too: a resume without
    # --test-command must not check merges with the default suite, nor reshape resumed conversations
    flat["commands.test"] = settings.commands.test
    flat["context.strategy"] = settings.context.strategy
    flat["model"] = settings.model or models.worker.name  # as given: a resume without --model reuses it
    flat["lead_model"] = settings.lead_model
    flat["judge_model"] = settings.judge_model
    # the governor's file its calls went through (views read it from wherever `status` is asked), or none
    flat["governor.enabled"] = settings.governor.enabled
    flat["governor.path"] = str(governor_path(settings.governor, settings.home))
    return flat


def inherit(settings: Settings, recorded: Mapping[str, Any]) -> Settings:
    """`settings` for a resume: what the person set now (flag, environment, hilbert.toml) wins; every
    resumable setting left at its default goes on as the run had it."""
    known = set(known_keys())
    layers = [("the run's log", {k: v}) for k, v in recorded.items() if k in known and v is not None]
    layers += [(settings.source(k), {k: v}) for k, v in settings.items() if settings.source(k) != DEFAULT]
    return Settings.build(layers)


@contextlib.asynccontextmanager
async def open_run(
    plan: Plan | None,
    *,
    repo: Path | None,
    root: Path,
    run: str,
    store: EventStore,
    settings: Settings,
    runner: Runner,
    models: Models,
    heldout_root: Path | None = None,
    skills: Sequence[Skill] = (),
    resume: bool = False,
    crashes: Crashes | None = None,
    snapshot: bool = False,
    into: str | None = None,
) -> AsyncIterator[Opened]:
    """Open run `run` in the folder `root`: with `plan` and `repo` a fresh one; with `resume` the one
    the log holds (its plan, repository and base). Every command goes through `runner`, with the
    run's folder hidden; `heldout_root` is the folder the plan's `heldout:` paths are relative to.
    `snapshot`: a fresh run starts from the repository's working tree as it is (`--allow-dirty`);
    `into`: the person's branch the result goes to, kept in the log for a resume."""
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root, run):
        fold = Fold(store, run)
        state = fold.catch_up()
        if resume and state.started is None:
            raise UserError(f"run {run} has no fleet to resume", hint="`hilbert runs` lists the runs")
        if not resume and state.started is not None:
            raise RunError(f"run {run} exists already", hint="resume it with --resume")
        mark = new_mark()  # every command and harness git of this process carries it
        git = Git(home=root / "home", mark=mark)
        (root / "home").mkdir(parents=True, exist_ok=True)
        started = state.started
        killed: list[int] = []  # first of all: what the dead orchestrator left running
        for old in [started.mark, *(r.mark for r in state.resumed)] if started else []:
            killed += await asyncio.to_thread(kill_marked, old) if old else []
        plan = state.plan if started else plan
        assert plan is not None
        source = Path(started.repo if started else repo or ".").absolute()
        held = Path(heldout_root or Path.cwd()).absolute()
        heldout = _heldout_folders(plan, source, Path(started.heldout_root) if started else held)
        marked = runner.hiding(root).marked(mark)
        now = resumable(settings, models)
        if started is None:
            integration = await Integration.create(source, root / "integration.git", git)
            base = await (
                integration.snapshot(source, as_the_person_ignores) if snapshot else integration.tip()
            )
            started = FleetStarted(
                tasks=[t.id for t in plan.tasks],
                plan=plan.model_dump(mode="json"),
                repo=str(source),
                base=base,
                heldout_root=str(held),
                workers=settings.fleet.workers,
                test_command=settings.commands.test,
                max_cost_usd=settings.fleet.max_cost_usd,
                model=models.worker.name,
                integration=str(integration.path),
                sandbox=marked.describe(),
                mark=mark,
                settings=now,
                pid=os.getpid(),
                host=socket.gethostname(),
                into=into or "",
            )
            store.append(run, HARNESS, started.kind, started.data())  # resumable from here on
            fresh = True
        else:
            integration, base, fresh = Integration(root / "integration.git", git), started.base, False
        ctx = RunContext(
            run=run,
            root=root,
            store=store,
            fold=fold,
            settings=settings,
            models=models,
            runner=marked,
            git=git,
            integration=integration,
            workspaces=Workspaces(root, integration.path, mark=mark),
            key=MessageKey.for_run(root),
            cost=CostPool(settings.fleet.max_cost_usd),
            system_prompt=await _system_prompt(settings, models, integration, base, git),
            heldout=heldout,
            skills=tuple(skills),
            crashes=crashes or Crashes(),
            admission=kv_cache_gate(settings.governor, models.worker),
        )
        fold.catch_up()
        ctx.cost.spent_usd = ctx.state.spent_usd  # what the run spent before it was interrupted
        ctx.crashes.watch(store, run)
        _allow_open_files(16 * settings.fleet.workers + 256)
        pending: list[Candidate] = []
        resuming: dict[str, AttemptView] = {}
        if not fresh:
            before = state.settings
            changed = {k: [before.get(k), v] for k, v in now.items() if before.get(k) != v}
            ctx.record(
                FleetResumed(
                    pid=os.getpid(),
                    host=socket.gethostname(),
                    mark=mark,
                    changed=changed,
                    settings=now,
                    killed=killed,
                    into=into or "",
                )
            )
            pending, resuming = await _reconcile(ctx)
        queue = MergeQueue(
            integration,
            root / "merge-scratch",
            test_command=settings.commands.test,
            record=ctx.record,
            # one command at a time, on the critical path: it does not queue behind the workers' slots
            runner=replace(ctx.runner, slots=None),
            max_batch=settings.fleet.merge_batch,
            pending=pending,
            crash=ctx.crashes.at,
        )
        yield Opened(ctx, queue, resuming)


SENT_BACK = ("conflict", "rejected")  # how a merge queue's batch can end for a candidate, but merged


async def _reconcile(ctx: RunContext) -> tuple[list[Candidate], dict[str, AttemptView]]:
    """Make the log and the integration repository agree, and say what waits and what resumes."""
    state, integration = ctx.state, ctx.integration
    max_attempts = ctx.settings.fleet.max_attempts
    landing = state.landing
    if landing is not None:
        if await integration.contains(landing.commit):  # the ref moved; its `merged` events were lost
            for task, ref in zip(landing.tasks, landing.refs, strict=True):
                if task not in state.merged:
                    ctx.record(Merged(task=task, ref=ref, commit=landing.commit))
            ctx.record(MergeReconciled(tasks=landing.tasks, commit=landing.commit, how="ref_moved_unlogged"))
        else:  # the intent was logged, the ref never moved: the candidates wait again
            ctx.record(MergeReconciled(tasks=landing.tasks, commit=landing.commit, how="landing_lost"))
    requeue: dict[str, str] = {}
    for task, merged in list(state.merged.items()):
        if not await integration.contains(merged.commit):
            ctx.record(MergeReconciled(tasks=[task], commit=merged.commit, how="merge_lost"))
            requeue[task] = merged.ref
    resuming: dict[str, AttemptView] = {}
    for task, task_state in list(state.states.items()):
        attempt = state.attempts.get(task_state.worker or "")
        if task in state.merged and task_state.status != "done":
            ctx.set_state(replace(task_state, status="done"))
        elif task in requeue:
            ctx.set_state(replace(task_state, status="verifying"))
        elif task_state.status == "running" and (attempt is None or attempt.task != task):
            ctx.set_state(replace(task_state, status="pending", worker=None))  # it never started
        elif task_state.status == "running" and attempt is not None and attempt.ended is not None:
            ended = attempt.ended  # the attempt ended; the dead driver did not act on its outcome
            outcome = AttemptOutcome(ended.status, ended.cause, ended.reason, ended.candidate)  # type: ignore[arg-type]
            for event in after_attempt(state.task(task), task_state, outcome, max_attempts=max_attempts):
                ctx.record(event)
        elif task_state.status == "running" and attempt is not None:
            resuming[task] = attempt
        elif task_state.status == "verifying" and attempt is not None and attempt.landed in SENT_BACK:
            # the queue logged a conflict or a rejection; the dead driver did not act on it
            if attempt.landed == "conflict":
                back = Outcome(task, "conflict", hunks=attempt.landed_why)
            else:
                back = Outcome(
                    task, "rejected", output=attempt.landed_why, with_tasks=tuple(attempt.landed_with)
                )
            for event in after_merge(state.task(task), task_state, back, max_attempts=max_attempts):
                ctx.record(event)
        elif task_state.status == "failed":  # the dead driver logged a failure, not what follows it
            why = state.feedback.get(task, "its attempt failed before the run was interrupted")
            for event in failure(state.task(task), task_state, why, max_attempts=max_attempts):
                ctx.record(event)
    await _orphans(ctx, {a.worker_id for a in state.attempts.values() if not a.closed})
    for attempt in list(state.attempts.values()):  # ended, but the dead driver never closed its workspace
        if attempt.ended is not None and not attempt.closed and not attempt.worker_id.startswith("lead-"):
            checkout = ctx.workspaces.existing(attempt.worker_id, attempt.base)
            if checkout.work_tree.exists():  # removed only when its work is safe; else archived
                closing = ctx.closing(attempt.worker_id)
                await ctx.workspaces.archive_or_remove(
                    checkout, integration, attempt.candidate, closing=closing
                )
    await hold_all(ctx)  # a tainted candidate the dead driver did not hold; then the person's decisions
    settle_all(ctx)
    queued = {**state.queue, **requeue}
    verify = {t.id: t.verify for t in state.plan.tasks} if state.plan else {}
    pending = [
        Candidate(task, ref, verify.get(task, ""))
        for task, ref in queued.items()
        if ctx.state.states[task].status == "verifying"
    ]
    if pending:  # named: the queue's checks are run again, the workers' conversations are not touched
        why = "the run resumed: their merge checks run again on the integration tip"
        ctx.record(
            MergeRequeued(tasks=[c.task_id for c in pending], base=await integration.tip(), reason=why)
        )
    return pending, resuming


async def _orphans(ctx: RunContext, attempts: set[str]) -> None:
    """Checkouts no open attempt owns — provisioned by a driver that died before it logged
    `task_started`, or a lead session's — are closed (removed when they hold nothing new, else
    archived) so that their names can be given again; a git dir left without its work tree (the
    provisioning died half way) holds no work and is removed."""
    for work_tree in sorted((ctx.root / "workspaces").glob("*")):
        worker_id = work_tree.name
        if worker_id in attempts:
            continue
        checkout = ctx.workspaces.existing(worker_id, "")
        found = await ctx.git.run(
            f"--git-dir={checkout.git_dir}", "rev-parse", "--verify", checkout.ref, check=False
        )
        closing = ctx.closing(worker_id, prefix="at resume, no attempt held it: ")
        if found.returncode != 0:  # no repository to judge it by: keep the files, whatever they are
            await ctx.workspaces.archive_or_remove(checkout, ctx.integration, closing=closing)
        else:
            judged = replace(checkout, base=found.stdout.strip())
            await ctx.workspaces.archive_or_remove(judged, ctx.integration, closing=closing)
    for git_dir in sorted((ctx.root / "git").glob("*.git")):
        if (
            git_dir.name[: -len(".git")] not in attempts
            and not (ctx.root / "workspaces" / git_dir.name[:-4]).exists()
        ):
            await asyncio.to_thread(shutil.rmtree, git_dir, ignore_errors=True)


async def _system_prompt(
    settings: Settings, models: Models, integration: Integration, base: str, git: Git
) -> str:
    """Every worker's system prompt; with the repository map at the run's base (the same on resume)."""
    if not settings.context.repository_map_tokens:
        return prompts.SYSTEM_PROMPT
    return prompts.system_prompt(
        await repository_map(
            integration.path,
            base,
            tokenizer=tokenizer_for(models.worker.name),
            git=git,
            budget=settings.context.repository_map_tokens,
        )
    )


@contextlib.contextmanager
def _locked(root: Path, run: str) -> Any:
    """Hold the run folder's lock while the orchestrator lives (the kernel drops it when it dies)."""
    path = root / LOCK
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UserError(
            f"run {run} is live: {holder} is running it",
            hint="watch it with `hilbert status`, or stop it with `hilbert stop` before resuming",
        ) from None
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        yield
    finally:
        handle.close()


def _heldout_folders(plan: Plan, repo: Path, root: Path) -> dict[str, Path]:
    """Each task's held-out folder, checked before anything runs: it exists, and it is outside the
    repository (tests inside it are not held out: every worker's checkout has them)."""
    folders = {}
    for task in plan.tasks:
        if task.heldout is None:
            continue
        folder = (root / task.heldout).resolve()
        if not folder.is_dir():
            raise UserError(
                f"{task.id}: heldout folder {folder} does not exist", hint="fix `heldout:` in the plan"
            )
        if folder.is_relative_to(repo.resolve()):
            raise UserError(
                f"{task.id}: heldout folder {folder} is inside the repository, so every worker sees it",
                hint="keep held-out tests outside the repository",
            )
        folders[task.id] = folder
    return folders


def _allow_open_files(needed: int) -> None:
    """Raise this process's soft limit on open files towards `needed` (within the hard limit): each
    worker holds connections, pipes of its commands and its workspace's files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # some systems cap below what they report
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
