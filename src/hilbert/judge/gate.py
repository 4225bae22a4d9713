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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hilbert.commands import Runner
from hilbert.judge.change import Allowances, change_between, covered_advisory, is_test_path
from hilbert.judge.evidence import Step
from hilbert.judge.gate_steps import Steps, heldout_command, infrastructure, new_test_files
from hilbert.judge.integrity import blocking, integrity_findings, left_out_findings
from hilbert.judge.perturb import Perturbation
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
    cache: Path | None = None,
    perturbation: Perturbation | None = None,
    differential: bool = True,
) -> GateResult:
    """The gate for `head` against `base` in the git repository `repo`: the evidence steps, then the
    judge model's verdict when `judge` is given (`task` and `claim` are what it is told). Every command
    goes through `runner` (the worker's code runs there too: its tests, its conftest), each within
    `timeouts.verify_s`; `on_wait(step, elapsed_s)` hears that a long one is still running. Model
    errors propagate: an outage is not a verdict. A change that adds another repository (a gitlink, a
    `.git` entry) is refused on the integrity step alone: no command runs on it. `left_out`: the nested
    repositories the harness's commit left out of `head`; they are not in the change, so they are named
    in the integrity step (and in any send-back) but refuse nothing by themselves: a worker that keeps a
    clone for reference can still finish, and a fix that lives in one fails its checks without it.
    `cache`: a folder where runs at `base` are kept for later calls on the same base; `perturbation`:
    the differential step's conditions (drawn from a fresh secret seed when not given); `differential`
    False leaves that step out (`gate.differential`)."""
    allowed = allow or Allowances()
    steps_runner = Steps(
        Path(repo),
        Path(scratch),
        git,
        runner,
        on_wait,
        base=base,
        head=head,
        cache=cache,
        perturbation=perturbation,
    )
    steps: list[Step] = []

    def done(step: Step) -> None:
        steps.append(step)
        on_step(step)

    change = await change_between(Path(repo), base, head, git)
    findings = integrity_findings(change, verify=verify, allow=allowed)
    noted = tuple(str(f) for f in left_out_findings(left_out))

    def integrity_step() -> Step:
        refusing = blocking(findings)
        advisory = len(findings) - len(refusing)
        return Step(
            "integrity",
            not refusing,
            (f"{len(refusing)} blocking finding(s)" if refusing else "no check saw tampering")
            + (f"; {advisory} advisory (for the judge model and the panel)" if advisory else ""),
            tuple(str(f) for f in findings) + noted,
            found=tuple((f.check, f.path) for f in refusing),
        )

    if any(f.check == "nested_repository" for f in findings):  # refused: nothing of it is run
        done(integrity_step())
        return decide(tuple(steps), None)
    done(await steps_runner.verify(verify, allowed, [f.path for f in new_test_files(change.files)]))
    if steps_runner.gathered(verify):  # the gate's own runs make the covered findings powerless
        findings = covered_advisory(findings)
    done(integrity_step())
    touched = [f for f in change.files if f.old_path or f.status in ("modified", "deleted", "renamed")]
    restored = [  # the tests the task says are wrong are not put back: they would fail by design
        f for f in touched if is_test_path(f.old_path or f.path) and not allowed.allows(f.old_path or f.path)
    ]
    if restored:
        done(await steps_runner.restored(verify, restored, allowed))
    infra = infrastructure(change.files)
    if infra:
        done(await steps_runner.without_infrastructure(verify, infra, new_test_files(change.files), allowed))
    if heldout is not None:
        done(await steps_runner.heldout(heldout, verify, infra))
    if differential and all(step.passed for step in steps):  # only what every other check let through
        commands: dict[str, Path | None] = {verify: None}
        if heldout is not None:
            commands[heldout_command(heldout)] = heldout
        done(await steps_runner.perturbed(commands, verify))
    opinion = None
    if judge is not None:
        opinion = await ask_judge(judge, JudgeBrief(task or f"Make `{verify}` pass.", claim, steps, change))
        passed = opinion.verdict == "done"
        done(Step("model", passed, opinion.summary()))
    return decide(tuple(steps), opinion)


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
