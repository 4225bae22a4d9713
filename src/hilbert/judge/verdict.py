"""The judge model: a second opinion, from another family, that can only say no.

`ask_judge(model, brief)` shows a model the task, the evidence the harness gathered itself (verify,
integrity, held-out), the worker's claim and the diff, and gets back a validated verdict
`done | not_done | impossible` with reasons. Everything the worker wrote — claim, diff, the output of
its code — is fenced as untrusted data (`hilbert.judge.untrusted`): a comment in the diff that
addresses the judge is evidence of intent, not an instruction. The gate (`hilbert.judge.gate`) only lets
this verdict veto: it never accepts over a failed check.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hilbert.judge.change import Change, FileChange
from hilbert.judge.evidence import WITHHELD, Step
from hilbert.judge.untrusted import UNTRUSTED_RULES, ask_json, fence, new_nonce
from hilbert.models.types import Message, Model, Usage

VerdictName = Literal["done", "not_done", "impossible"]
DIFF_BUDGET_CHARS = 40_000
OUTPUT_CHARS = 1500

JUDGE_SYSTEM = (
    "You are the judge of a coding agent's work. The agent says its task is done; you decide whether "
    "it is, from the task, the evidence the harness gathered by itself, and the change. Look for work "
    "that only looks done: tests edited, skipped or deleted to pass, answers hard-coded for the tests' "
    "inputs, checks bypassed, the task only partly done, or a claim the evidence contradicts. A failed "
    "check of the harness is final; you may add reasons, never overrule it. Say `impossible` only when "
    "the task cannot be done as stated (for instance its check contradicts its description).\n\n"
    + UNTRUSTED_RULES
    + "\n\nReply with only a JSON object: "
    '{"verdict": "done" | "not_done" | "impossible", "reasons": ["one short sentence each"]}. '
    "Give at least one reason for not_done or impossible."
)


class ModelVerdict(BaseModel):
    """The judge model's answer, as it must be written."""

    model_config = ConfigDict(extra="forbid")

    verdict: VerdictName
    reasons: list[str] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _reasons_for_no(self) -> ModelVerdict:
        if self.verdict != "done" and not any(r.strip() for r in self.reasons):
            raise ValueError(f"a {self.verdict} verdict needs at least one reason")
        return self


@dataclass(frozen=True)
class JudgeBrief:
    """What the judge is shown: the task as the plan states it, the worker's claim, the harness's
    evidence steps, and the change."""

    task: str
    claim: str
    evidence: Sequence[Step]
    change: Change


@dataclass(frozen=True)
class JudgeOpinion:
    """The model's verdict (None when it gave no valid one: `error` says why) and what it cost."""

    model: str
    verdict: VerdictName | None
    reasons: tuple[str, ...]
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    def summary(self) -> str:
        if self.verdict is None:
            return f"{self.model}: no valid verdict ({self.error})"
        because = "; ".join(self.reasons)
        return f"{self.model}: {self.verdict}" + (f" — {because}" if because else "")


async def ask_judge(model: Model, brief: JudgeBrief, *, diff_budget: int = DIFF_BUDGET_CHARS) -> JudgeOpinion:
    """Ask `model` for its verdict on `brief`. Model errors propagate (an outage is not a verdict)."""
    nonce = new_nonce()
    while _contains(brief, nonce):  # astronomically rare; the data must not hold its own fence
        nonce = new_nonce()
    messages = [
        Message("system", JUDGE_SYSTEM.replace("{nonce}", nonce)),
        Message("user", judge_prompt(brief, nonce, diff_budget)),
    ]
    answer = await ask_json(model, messages, ModelVerdict)
    if answer.value is None:
        return JudgeOpinion(model.name, None, (), answer.error, answer.usage, answer.cost_usd)
    reasons = tuple(r.strip() for r in answer.value.reasons if r.strip())
    return JudgeOpinion(model.name, answer.value.verdict, reasons, "", answer.usage, answer.cost_usd)


def judge_prompt(brief: JudgeBrief, nonce: str, diff_budget: int) -> str:
    lines = ["# The task (from the plan)", brief.task.strip(), "", "# Evidence the harness gathered itself"]
    for step in brief.evidence:
        lines.append(f"- {'PASS' if step.passed else 'FAIL'} {step.name}: {step.summary}")
    findings = [f"{step.name}: {finding}" for step in brief.evidence for finding in step.findings]
    if findings:  # they quote the change (paths, literals), so they are fenced like it
        lines += ["", fence("\n".join(findings), "findings of the harness's checks", nonce)]
    for step in brief.evidence:
        # never the held-out tests' output: the judge's reasons go back to the worker
        if step.output and not step.passed and step.name not in WITHHELD:
            lines += ["", fence(step.output[-OUTPUT_CHARS:], f"output of the {step.name} step", nonce)]
    lines += ["", "# The agent's claim", fence(brief.claim.strip() or "(no claim)", "claim", nonce)]
    lines += ["", "# The change", fence(render_diff(brief.change, diff_budget), "diff", nonce)]
    lines += ["", "Your verdict, as the JSON object described in the system message:"]
    return "\n".join(lines)


def render_diff(change: Change, budget: int) -> str:
    """Unified diffs, file by file, until `budget` characters; the files left out are named."""
    parts: list[str] = []
    used, left_out = 0, []
    for changed in change.files:
        text = _file_diff(changed)
        if used + len(text) > budget:
            left_out.append(changed.path)
            continue
        parts.append(text)
        used += len(text)
    if left_out:
        parts.append(f"(not shown, over the size budget: {', '.join(left_out)})")
    return "\n".join(parts) or "(no change)"


def _file_diff(changed: FileChange) -> str:
    old_name = changed.old_path or changed.path
    header = f"--- a/{old_name}\n+++ b/{changed.path}\n"
    if (changed.old_text is None and changed.status != "added") or (
        changed.new_text is None and changed.status != "deleted"
    ):
        return header + f"(binary file {changed.status})\n"
    old = (changed.old_text or "").splitlines(keepends=True)
    new = (changed.new_text or "").splitlines(keepends=True)
    body = "".join(difflib.unified_diff(old, new, f"a/{old_name}", f"b/{changed.path}", n=3))
    return body if body else header + f"({changed.status}, same content)\n"


def _contains(brief: JudgeBrief, nonce: str) -> bool:
    texts = [
        brief.claim,
        *(s.output for s in brief.evidence),
        *(f for s in brief.evidence for f in s.findings),
    ]
    texts += [t for f in brief.change.files for t in (f.old_text, f.new_text) if t]
    return any(nonce in text for text in texts)


__all__ = [
    "JUDGE_SYSTEM",
    "JudgeBrief",
    "JudgeOpinion",
    "ModelVerdict",
    "ask_judge",
    "judge_prompt",
    "render_diff",
]
