"""One try of one explorer, start to end: from the current best, the explorer's idea in a workspace
of its own, committed, gated, checked against earlier tries, measured by the harness, then kept (it
lands on the best branch through the merge queue) or reverted — each step an event, each decision
typed data. A try whose base is no longer the best (another explorer's try landed while it ran) is
merged onto the new best first, and the merge is what is measured and landed.

The gate is `run_gate` (the tests, `test_command`, must pass on a clean export; integrity on the
change, with no test edits allowed) plus the climb's guard: no change to a file the metric command
names or a `--guard` path matches (`guard_findings`). Deciding needs the best not to move between
the staleness check and the landing: `Climb.deciding` is held from the check to the end.
"""

from __future__ import annotations

import asyncio
import fnmatch
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.climb import events as ce
from hilbert.climb.measure import SEED_VARIABLE, Measurer, answer_differs
from hilbert.climb.metric import MARGIN, Goal, better, clearly_better, noise
from hilbert.climb.neardup import duplicate_of, fingerprint
from hilbert.climb.state import ClimbFold
from hilbert.commands import Runner
from hilbert.fleet.attempt import HilbertLoop
from hilbert.fleet.events import FleetEvent
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.fleet.names import Name
from hilbert.fleet.plan import Task
from hilbert.fleet.seams import ModelGrant, TaskSpec
from hilbert.judge.change import Change, change_between
from hilbert.judge.gate import run_gate
from hilbert.models.types import Model
from hilbert.store import EventStore
from hilbert.workspaces import Workspaces
from hilbert.workspaces.git import one_line
from hilbert.workspaces.integration import Integration, MergeTree

TRY_PROMPT = """You are {explorer}, an explorer in a hill-climb; this is try {try_no}.
Goal: make the metric `{metric}` {direction}. {reading}
Its answer (what it prints apart from a number on its last line) must stay what the best answers, \
on inputs the harness chooses: a fresh seed each round, in ${seed_variable}.
The best so far: {best:g} (noise {noise:g}); a change counts only when it beats the best by more than \
{margin:g} x the noise.
Rules: the tests (`{tests}`) must still pass; do not change the metric's files ({guards}) or the \
tests; a change that games the metric instead of improving the code is rejected.
Ideas already tried (do not repeat them):
{tried}
Make one change you expect to improve the metric, then finish: the claim's first line names your idea."""
READING = {
    "time": "The harness times it itself: the CPU seconds of its whole process tree (fresh processes, "
    "imports and child processes included), {repeat} times, on a clean read-only copy of your commit, "
    "and keeps the median; a number it prints is not read.",
    "number": "It prints one number on its last line; the harness runs it itself, {repeat} times, on a "
    "clean read-only copy of your commit, and keeps the median.",
}
SYSTEM = """You improve a program against a metric, one idea per try, in your own copy of the repository.
Read before you change; keep the tests passing; never touch how the metric is measured."""
MAX_TURNS = 30
# reverted without a verdict on the idea: the run stopped under it, or it did not merge onto a best that
# moved while it ran — the same idea tried again is not a near-duplicate
UNDECIDED = ("interrupted", "stale")


@dataclass
class Climb:
    """What every try of one climb shares: the run, its log and fold, the repositories, the runner,
    the explorers' model and the measurer. Built once per process by the driver."""

    run: str
    root: Path
    store: EventStore
    fold: ClimbFold
    integration: Integration
    workspaces: Workspaces
    runner: Runner
    model: Model
    measurer: Measurer
    holdout: Measurer | None = None  # the sealed holdout, run by the harness on kept bests only
    deciding: asyncio.Lock = field(default_factory=asyncio.Lock)

    def record(self, event: FleetEvent) -> None:
        self.store.append(self.run, "harness", event.kind, event.data())
        self.fold.catch_up()


def guard_findings(change: Change, metric: str, guards: list[str]) -> list[str]:
    """One line per changed file the metric command names or a guard pattern matches."""
    try:
        words = shlex.split(metric)
    except ValueError:
        words = metric.split()
    named = {word.removeprefix("./") for word in words}
    lines = []
    for fc in change.files:
        for path in sorted({fc.path, fc.old_path or fc.path}):
            if path in named or any(fnmatch.fnmatchcase(path, pattern) for pattern in guards):
                lines.append(f"metric_guarded: {path}, which the metric depends on, was {fc.status}")
    return lines


def prompt_for(climb: Climb, explorer: Name, try_no: int) -> str:
    state = climb.fold.catch_up()
    started = state.started
    assert started is not None and state.best_median is not None
    tried = [f"- {t.idea}" for t in sorted(state.done, key=lambda t: t.no) if t.idea][-20:]
    return TRY_PROMPT.format(
        explorer=explorer.display,
        try_no=try_no,
        metric=started.metric,
        direction="lower" if started.goal == "min" else "higher",
        repeat=started.repeat,
        best=state.best_median,
        noise=state.noise,
        margin=MARGIN,
        tests=started.test_command,
        guards=", ".join(started.guards) or "the files its command names",
        tried="\n".join(tried) or "(none yet)",
        reading=READING[started.metric_kind].format(repeat=started.repeat),
        seed_variable=SEED_VARIABLE,
    )


async def one_try(climb: Climb, explorer: Name, try_no: int) -> None:
    """Run try `try_no` by `explorer` to its end (`try_kept` or `try_reverted` in the log)."""
    state = climb.fold.catch_up()
    started = state.started
    assert started is not None
    base = state.best
    climb.record(ce.TryStarted(try_no=try_no, explorer=explorer.display, base=base))
    revert = _reverter(climb, try_no)
    checkout = await climb.workspaces.provision(f"{explorer.id}-{try_no}", base)
    try:
        agent = f"{explorer.display}#{try_no}"
        task = Task(id=f"try-{try_no}", title="improve the metric", verify=started.test_command)
        spec = TaskSpec(task, agent, prompt_for(climb, explorer, try_no), SYSTEM)
        tools = ToolBox(checkout.work_tree, runner=climb.runner, outputs=climb.root / "outputs" / agent)
        loop = HilbertLoop(climb.run, climb.store, tools, policies=[TurnLimit(MAX_TURNS)])
        result = await loop.attempt(spec, checkout, ModelGrant(climb.model), lambda kind, data: None)
        idea = (result.claim.strip().splitlines() or ["(no idea named)"])[0][:200]
        commit = await climb.workspaces.commit(checkout, idea)
        if commit is None:
            ended = result.status + (f": {result.reason}" if result.reason else "")
            why = f"the explorer changed nothing (its idea: {idea}; it {ended})"
            return revert("no_change", why)
        ref = try_ref(try_no)
        await climb.workspaces.fetch_into(checkout, climb.integration, ref)
        await judge_try(climb, try_no, base, commit, idea)
    finally:
        await climb.workspaces.archive_or_remove(checkout, climb.integration)


def _reverter(climb: Climb, try_no: int) -> Callable[[str, str], None]:
    def revert(stage: str, reason: str) -> None:
        climb.record(ce.TryReverted(try_no=try_no, stage=stage, reason=reason))

    return revert


async def judge_try(climb: Climb, try_no: int, base: str, commit: str, idea: str) -> None:
    """Gate, de-duplicate, measure and decide on try `try_no`'s `commit` (made on `base`, stored in
    the climb's repository as `try_ref(try_no)`): `try_kept` or `try_reverted` in the log."""
    revert = _reverter(climb, try_no)
    started = climb.fold.state.started
    assert started is not None
    repo, git = climb.integration.path, climb.integration.git
    change = await change_between(repo, base, commit, git)
    guarded = guard_findings(change, f"{started.metric} {started.check}", started.guards)
    diff = (await git.run("diff", "--no-color", base, commit, cwd=repo)).stdout
    shingles = fingerprint(diff)
    tree = (await git.run("rev-parse", f"{commit}^{{tree}}", cwd=repo)).stdout.strip()
    gated = ce.TryGated(
        try_no=try_no, commit=commit, idea=idea, passed=False, reasons=[f"guard: {g}" for g in guarded],
        findings=guarded, shingles=sorted(shingles), tree=tree,
    )  # fmt: skip
    if guarded:  # refused before anything of it runs
        climb.record(gated)
        return revert("gate", "; ".join(gated.reasons))
    # every try the gate let through, whatever came after — but those never decided on their merits
    tries = climb.fold.catch_up().tries.values()
    earlier = [
        (t.no, t.shingles, t.tree)
        for t in tries
        if t.passed_gate and t.no != try_no and t.stage not in UNDECIDED
    ]
    twin = duplicate_of(shingles, tree, earlier)
    if twin is not None:  # before the gate's runs and the measurement, the costly parts
        climb.record(gated)
        return revert("duplicate", f"a near-duplicate of try {twin[0]} (similarity {twin[1]:.2f})")
    gate = await run_gate(
        repo, base, commit, verify=started.test_command, scratch=climb.root / "gate" / str(try_no),
        git=git, runner=climb.runner, task=f"improve `{started.metric}`", claim=idea,
        cache=climb.root / "base-runs", differential=False,
    )  # fmt: skip
    findings = [line for step in gate.steps for line in step.findings]
    passed = gate.verdict == "done"
    climb.record(replace(gated, passed=passed, reasons=list(gate.reasons), findings=findings))
    if not passed:
        return revert("gate", "; ".join(gate.reasons) or "the gate did not accept it")
    async with climb.deciding:  # the best does not move from here to the decision
        state = climb.fold.catch_up()
        candidate, stale = commit, ""
        if state.best != base:  # another try landed meanwhile: this one merged onto it is what counts
            merge, conflicts = await _merged_onto(climb, try_no, state.best)
            candidate = merge or commit  # not mergeable: measured alone (what it does is news), not kept
            if conflicts:
                why = f"the best moved from {base[:10]} to {state.best[:10]} while it ran, and it does not"
                stale = f"{why} merge onto the new best (conflicts in {conflicts})"
        pair = (candidate, state.best)  # the best now: the one it must beat, measured beside it
        measured, best_now = await climb.measurer.compare(pair, started.repeat, f"try-{try_no}")
        climb.record(
            ce.TryMeasured(
                try_no=try_no, commit=candidate, values=list(measured.values),
                median=measured.median if measured.values else 0.0, spread=measured.spread,
                error=measured.error, best_values=list(best_now.values), runs=list(measured.runs),
            )
        )  # fmt: skip
        if measured.error:
            return revert("measure", measured.error)
        if best_now.error:
            return revert("measure", f"the best could not be measured beside it: {best_now.error}")
        differs = answer_differs(measured, best_now)
        if differs:  # a table, a cutoff, a special case: found out on an input it never saw
            return revert("answer", differs)
        if stale:
            return revert("stale", stale)
        best = best_now.median
        goal: Goal = "max" if started.goal == "max" else "min"
        # the best's noise from its own measurements, or either side's spread now if larger
        level = max(state.noise, noise(measured.values), noise(best_now.values))
        if not clearly_better(goal, measured.values, best_now.values, level):
            why = (
                f"median {measured.median:g} vs best {best:g} beside it: not clearly better (by over"
                f" {MARGIN:g} x noise {level:g}, every reading apart)"
            )
            return revert("no_gain", why)
        overfit = await measure_holdout(climb, try_no, candidate, state.best)
        if overfit:  # better on the metric alone: not kept (and `--stop-on-overfit` ends the climb)
            return revert("overfit", overfit)
        outcome = await _through_the_queue(climb, try_no, state.best)
        if outcome.kind != "merged" or outcome.commit is None:
            stage = "merge" if outcome.kind == "rejected" else "stale"
            return revert(stage, _unlanded(outcome))
        climb.record(ce.TryKept(try_no=try_no, commit=outcome.commit, median=measured.median, previous=best))
    return None


def try_ref(try_no: int) -> str:
    """Where a try's commit waits in the integration repository."""
    return f"refs/hilbert/climb/tries/{try_no}"


def merge_trees(climb: Climb, try_no: int) -> tuple[MergeTree, MergeTree]:
    """The merge trees try `try_no` works in: its merge onto a best that moved (its own), and the
    merge queue's scratch (one, used under `deciding`). A resume removes what a dead process left."""
    return (
        climb.integration.merge_tree(climb.root / "stale" / str(try_no)),
        climb.integration.merge_tree(climb.root / "merge-scratch"),
    )


async def _merged_onto(climb: Climb, try_no: int, best: str) -> tuple[str, str]:
    """Try `try_no` merged onto `best` as the merge queue would merge it (`merge --no-ff`, in a merge
    tree of its own): the merge commit, or "" and the files that conflict."""
    tree, _ = merge_trees(climb, try_no)
    try:
        await tree.reset(best)
        merged = await tree.merge(try_ref(try_no), f"merge try-{try_no} ({try_ref(try_no)})")
        return (await tree.head(), "") if merged.ok else ("", ", ".join(merged.files) or merged.hunks)
    finally:
        await tree.remove()


async def _through_the_queue(climb: Climb, try_no: int, best: str) -> Outcome:
    """Land try `try_no` on the best branch through the merge queue, as a fleet's task lands: merged
    onto the tip (`merge --no-ff`), the tests run on the merge, the branch moved only if they pass and
    nobody moved it. `deciding` is held, so the tip is the best this try was measured beside (`best`)
    and the merge is the tree measured — unless something outside the climb wrote the branch: then
    nothing lands (`requeued`), rather than a tree nobody measured. Every step is logged
    (`merge_landing` before the ref moves: a resume reads it, `ClimbState` folds it into the try's
    `landing`)."""
    started = climb.fold.state.started
    assert started is not None
    if await climb.integration.tip() != best:
        return Outcome(f"try-{try_no}", "requeued")
    queue = MergeQueue(
        climb.integration, merge_trees(climb, try_no)[1].path, test_command=started.test_command,
        record=climb.record, runner=climb.runner, max_batch=1,
    )  # fmt: skip
    try:
        queue.submit(Candidate(f"try-{try_no}", try_ref(try_no), verify=""))
        (outcome,) = await queue.process()
        return outcome
    finally:
        await queue.close()


def _unlanded(outcome: Outcome) -> str:
    """Why the merge queue did not land a try, in one line."""
    if outcome.kind == "conflict":
        return f"the merge queue found it conflicts with the best: {one_line(outcome.hunks)[:300]}"
    if outcome.kind == "rejected":
        tail = [line for line in outcome.output.splitlines() if line.strip()][-3:]
        return f"the tests failed on it merged onto the best: {' / '.join(tail)[:300]}"
    return "the best branch is not where the climb's log has it (written outside the climb): not landed"


async def measure_holdout(climb: Climb, try_no: int, commit: str, previous: str = "") -> str:
    """The sealed holdout on `commit` (the base: `try_no` 0, else a try better on the metric, measured
    interleaved with the `previous` best), before anything is kept. Its readings go into the log only:
    never into a prompt. Why the try must not be kept — the holdout did not follow the metric (its
    median not better than the best's beside it by `MARGIN` x the noise: a looser test than the
    metric's, which also wants every reading apart; the holdout is a check, not the score), failed on
    it, or answered otherwise than the best — else "" (also without a holdout, or one that failed on
    the base: reported there)."""
    state = climb.fold.catch_up()
    assert state.started is not None
    if climb.holdout is None or (try_no and (state.holdout_error or state.holdout_base is None)):
        return ""
    repeat, label = state.started.repeat, f"holdout-{try_no}"
    # the base beside itself: a holdout whose answer is not its own on the same input is not used
    pair = await climb.holdout.compare((commit, previous or commit), repeat, label)
    measured, before = pair[0], pair[-1]
    if not previous and not measured.error and not before.error and measured.answers != before.answers:
        steady = answer_differs(before, measured).removeprefix("answer_differs: ").replace("the best", "it")
        measured = replace(
            measured, error=f"the holdout answered otherwise on the same input, run twice: {steady}"
        )
    level = max(state.holdout_noise, noise(measured.values), noise(before.values)) if measured.values else 0.0
    goal: Goal = "max" if state.started.goal == "max" else "min"
    why = ""
    if previous and before.error:
        why = f"the holdout failed on the best beside it: {before.error}"
    elif previous and measured.error:
        why = f"the holdout failed on it: {measured.error}"
    elif previous and (differs := answer_differs(measured, before)):
        why = f"holdout {differs}"
    elif previous and not better(goal, measured.median, before.median, level):
        why = (
            f"overfitting: the sealed holdout did not follow the metric (median {measured.median:g} vs"
            f" the best's {before.median:g} beside it, noise {level:g})"
        )
    climb.record(
        ce.HoldoutMeasured(
            try_no=try_no, commit=commit, values=list(measured.values), error=measured.error or before.error,
            median=measured.median if measured.values else 0.0, noise=level, overfit=bool(why),
        )
    )  # fmt: skip
    return why


__all__ = [
    "Climb",
    "guard_findings",
    "judge_try",
    "measure_holdout",
    "merge_trees",
    "one_try",
    "prompt_for",
    "try_ref",
]
