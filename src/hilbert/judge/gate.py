"""The stop gate's evidence steps on two commits: verify it ourselves, integrity, held-out tests.

`await run_gate(repo, base, head, verify=...)` runs, in order, and returns each step with its evidence:

1. `verify`: the task's command on a clean export of `head` (git archive: nothing uncommitted, no git
   dir), with the environment the caller controls;
2. `integrity`: every check of `hilbert.judge.integrity` on the base→head change; when existing test
   files changed, also `tests_restored`: the verify run again on the export with those files put back as
   they were at `base`;
3. `heldout`: the tests in a folder the worker never saw, copied into a fresh export and run there.

4. `model`: with a `judge` model, its verdict on the task, the evidence and the diff
   (`hilbert.judge.verdict`); without one the step is skipped, and the result says so.

A change that adds another git repository (a gitlink or a `.git` entry, or one the harness's commit
left out: `left_out`) is refused on step 2 alone, before anything of it is exported or run.

The decision (`decide`): a failed step 1–3 is final; the model can only veto — turn done into
not_done, or say impossible — never accept over a failed check, and a model that gives no valid
verdict cannot accept either. `on_step` sees each step as it finishes (the fleet records it as an
event). Nothing here writes outside `scratch`.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.commands import Output, Runner, verify_timeout
from hilbert.judge.change import Allowances, FileChange, change_between, is_test_path
from hilbert.judge.evidence import Step
from hilbert.judge.integrity import integrity_findings, left_out_findings
from hilbert.judge.verdict import JudgeBrief, JudgeOpinion, VerdictName, ask_judge
from hilbert.models.types import Model
from hilbert.workspaces.git import Git

NO_MODEL = "skipped: no judge model was named, so the verdict rests on the checks alone"


@dataclass(frozen=True)
class GateResult:
    """The verdict, every step with its evidence, the model's opinion (None: skipped) and the reasons
    a worker is told when the verdict is not done."""

    verdict: VerdictName
    steps: tuple[Step, ...]
    opinion: JudgeOpinion | None = None
    reasons: tuple[str, ...] = field(default=())

    @property
    def model_step(self) -> str:
        return self.opinion.summary() if self.opinion else NO_MODEL

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "steps": [
                {"name": s.name, "passed": s.passed, "summary": s.summary, "findings": list(s.findings)}
                for s in self.steps
            ],
            "model": None
            if self.opinion is None
            else {
                "model": self.opinion.model,
                "verdict": self.opinion.verdict,
                "reasons": list(self.opinion.reasons),
                "error": self.opinion.error,
            },
            "model_step": self.model_step,
        }


def decide(steps: tuple[Step, ...], opinion: JudgeOpinion | None) -> GateResult:
    """Failed checks are final; the model may veto (not done, impossible) but never accept over them."""
    reasons = [
        f"{s.name}: {why}"
        for s in steps
        if not s.passed and s.name != "model"
        for why in (s.findings or (s.summary,))
    ]
    verdict: VerdictName = "not_done" if reasons else "done"
    if opinion is not None:
        if opinion.verdict is None:
            verdict = "not_done"
            reasons.append(f"judge model: no valid verdict ({opinion.error})")
        elif opinion.verdict != "done":
            verdict = opinion.verdict
            reasons += [f"judge model: {reason}" for reason in opinion.reasons]
    return GateResult(verdict, steps, opinion, tuple(reasons))


async def run_gate(
    repo: Path,
    base: str,
    head: str,
    *,
    verify: str,
    scratch: Path,
    git: Git,
    runner: Runner,
    heldout: Path | None = None,
    allow: Allowances | None = None,
    judge: Model | None = None,
    task: str = "",
    claim: str = "",
    on_step: Callable[[Step], None] = lambda step: None,
    on_wait: Callable[[str, float], None] | None = None,
    left_out: Sequence[str] = (),
) -> GateResult:
    """The gate for `head` against `base` in the git repository `repo`: the evidence steps, then the
    judge model's verdict when `judge` is given (`task` and `claim` are what it is told). Every command
    goes through `runner` (the worker's code runs there too: its tests, its conftest), each within
    `timeouts.verify_s`; `on_wait(step, elapsed_s)` hears that a long one is still running. Model
    errors propagate: an outage is not a verdict. A change that adds another repository (a gitlink, a
    `.git` entry) is refused on the integrity step alone: no command runs on it. `left_out`: the nested
    repositories the harness's commit left out of `head`; they are not in the change, so they are named
    in the integrity step (and in any send-back) but refuse nothing by themselves: a worker that keeps a
    clone for reference can still finish, and a fix that lives in one fails its checks without it."""
    steps_runner = _Steps(Path(repo), Path(scratch), git, runner, on_wait)
    steps: list[Step] = []

    def done(step: Step) -> None:
        steps.append(step)
        on_step(step)

    change = await change_between(Path(repo), base, head, git)
    findings = integrity_findings(change, verify=verify, allow=allow or Allowances())
    noted = tuple(str(f) for f in left_out_findings(left_out))
    integrity = Step(
        "integrity",
        not findings,
        f"{len(findings)} finding(s)" if findings else "no check saw tampering",
        tuple(str(f) for f in findings) + noted,
        found=tuple((f.check, f.path) for f in findings),
    )
    if any(f.check == "nested_repository" for f in findings):  # refused: nothing of it is run
        done(integrity)
        return decide(tuple(steps), None)
    done(await steps_runner.verify(head, verify))
    done(integrity)
    touched = [f for f in change.files if f.old_path or f.status in ("modified", "deleted", "renamed")]
    allowed = allow or Allowances()
    restored = [  # the tests the task says are wrong are not put back: they would fail by design
        f for f in touched if is_test_path(f.old_path or f.path) and not allowed.allows(f.old_path or f.path)
    ]
    if restored:
        done(await steps_runner.restored(base, head, verify, restored))
    if heldout is not None:
        done(await steps_runner.heldout(head, heldout))
    opinion = None
    if judge is not None:
        opinion = await ask_judge(judge, JudgeBrief(task or f"Make `{verify}` pass.", claim, steps, change))
        passed = opinion.verdict == "done"
        done(Step("model", passed, opinion.summary()))
    return decide(tuple(steps), opinion)


class _Steps:
    def __init__(
        self,
        repo: Path,
        scratch: Path,
        git: Git,
        runner: Runner,
        on_wait: Callable[[str, float], None] | None,
    ) -> None:
        self.repo, self.scratch, self.git, self.runner, self.on_wait = repo, scratch, git, runner, on_wait
        self.exports = 0

    async def verify(self, head: str, command: str) -> Step:
        tree = await self.export(head)
        return await self.run("verify", command, tree)

    async def restored(self, base: str, head: str, command: str, files: list[FileChange]) -> Step:
        """The verify run again with the tests the change edited or removed put back as at `base`."""
        tree = await self.export(head)
        for changed in files:
            old = changed.old_path or changed.path
            if changed.old_text is None:
                continue  # binary: cannot be put back as text
            if changed.status == "renamed":
                (tree / changed.path).unlink(missing_ok=True)
            (tree / old).parent.mkdir(parents=True, exist_ok=True)
            (tree / old).write_text(changed.old_text)
        step = await self.run("tests_restored", command, tree)
        names = ", ".join(f.old_path or f.path for f in files)
        return Step(step.name, step.passed, f"{step.summary} with the original {names}", output=step.output)

    async def heldout(self, head: str, folder: Path) -> Step:
        """The held-out tests, copied into a fresh export and named one by one (so the project's own
        pytest configuration cannot leave them uncollected; none collected is a failure). The summary
        names no file and quotes nothing: the worker is told only that held-out tests failed."""
        tests = sorted(
            p
            for p in Path(folder).rglob("*.py")
            if p.is_file() and p.name not in ("conftest.py", "__init__.py")
        )
        if not tests:
            return Step("heldout", False, "no held-out tests to run")
        tree = await self.export(head)
        target = tree / ".hilbert-heldout"
        await asyncio.to_thread(shutil.copytree, folder, target)
        names = " ".join(shlex.quote(str(target.relative_to(tree) / p.relative_to(folder))) for p in tests)
        step = await self.run("heldout", f"python -m pytest -q -p no:cacheprovider {names}", tree)
        summary = "the held-out tests pass" if step.passed else "held-out tests the worker never saw fail"
        return Step("heldout", step.passed, summary, output=step.output)

    async def export(self, commit: str) -> Path:
        self.exports += 1
        tree = self.scratch / f"export-{self.exports}"
        tree.mkdir(parents=True)
        archive = self.scratch / f"export-{self.exports}.tar"
        await self.git.run("archive", "--format=tar", f"--output={archive}", commit, cwd=self.repo)
        try:
            await asyncio.to_thread(_extract, archive, tree)
        finally:
            archive.unlink(missing_ok=True)
        return tree

    async def run(self, name: str, command: str, tree: Path) -> Step:
        on_wait = self.on_wait
        done = await self.runner.run(
            command,
            root=tree,
            timeout=verify_timeout(self.runner.timeouts),
            output=Output(3000, lambda: None),
            on_wait=(lambda elapsed: on_wait(name, elapsed)) if on_wait else None,
        )
        return Step(name, done.ok, f"`{command}` → {done.status()}", output=done.text(tree))


def _extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")


def describe(result: GateResult) -> list[str]:
    """The gate's result as lines for a person: the verdict, each step, its findings."""
    lines = [f"verdict: {result.verdict}"]
    for step in result.steps:
        lines.append(f"  {'PASS' if step.passed else 'FAIL'} {step.name}: {step.summary}")
        lines += [f"    {finding}" for finding in step.findings]
    if result.opinion is None:
        lines.append(f"  SKIP model: {NO_MODEL}")
    return lines


__all__ = ["GateResult", "Step", "decide", "describe", "run_gate"]
