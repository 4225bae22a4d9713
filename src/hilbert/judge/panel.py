"""The review panel: before a merge, M reviewers on models of different families read the change.

    names = choose_reviewers(settings.reviewers, m=3, exclude_family=family_of(worker), families=...)
    result = await review(task_text, change, make_reviewers([make_model(n) for n in names], families))
    if result.send_back: ...  # result.reasons go back to the worker

Each reviewer gets the thermonuclear-review skill (`skills/thermonuclear-review/SKILL.md`) as its
system prompt, then the task and the diff fenced as untrusted data (`hilbert.judge.untrusted`). The
reviewers run concurrently and never see one another's reviews; they are labelled A, B, C, and only
these labels reach the worker. A reviewer answers JSON findings `{file, lines: [start, end], category,
blocking, note}` (validated; one retry). A reviewer that gives no valid answer or whose model fails is
recorded with its error and counts as having found nothing: errors never block, so a panel with fewer
than two answers (`PanelResult.complete` false) cannot send a task back.

Two findings *agree* when they name the same file and category and their line ranges overlap. A
blocking finding that a finding of another reviewer agrees with (blocking or not: both saw the same
problem, one judged it blocking) sends the task back. Per model pair, `pair_statistics` counts each
model's findings and the findings they agreed on (matched one to one); the agreement rate is
agreed / (findings of either, counted once), summed over tasks by `merge_statistics`.

Families come from `hilbert.models.families`; `choose_reviewers` takes one model per family.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hilbert.errors import ModelError, UserError
from hilbert.judge.change import Change
from hilbert.judge.untrusted import UNTRUSTED_RULES, ask_json, fence, new_nonce
from hilbert.judge.verdict import DIFF_BUDGET_CHARS, render_diff
from hilbert.models.families import family_of
from hilbert.models.types import Message, Model, Usage
from hilbert.skills import load_skill

Category = Literal[
    "correctness", "tests", "cheating", "security", "scope", "error-handling", "performance", "style"
]
CATEGORIES: tuple[str, ...] = get_args(Category)
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SKILL_NAME = "thermonuclear-review"


class FindingAnswer(BaseModel):
    """One finding as a reviewer must write it."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(min_length=1)
    lines: tuple[int, int]
    category: Category
    blocking: bool
    note: str

    @field_validator("lines")
    @classmethod
    def _positive_and_ordered(cls, lines: tuple[int, int]) -> tuple[int, int]:
        if min(lines) < 1:
            raise ValueError("line numbers start at 1")
        return (min(lines), max(lines))


class ReviewAnswer(BaseModel):
    """A reviewer's whole answer: `{"findings": [...]}` (an empty list is a valid review)."""

    model_config = ConfigDict(extra="forbid")

    findings: list[FindingAnswer] = Field(max_length=100)


@dataclass(frozen=True)
class Reviewer:
    """A model on the panel, its anonymous label (A, B, …) and its family."""

    model: Model
    label: str
    family: str


@dataclass(frozen=True)
class ReviewFinding:
    """One finding of reviewer `reviewer` (a label): `lines` (start, end) of the new file."""

    reviewer: str
    file: str
    lines: tuple[int, int]
    category: Category
    blocking: bool
    note: str = ""

    def where(self) -> str:
        start, end = self.lines
        return f"{self.file}:{start}" + (f"-{end}" if end != start else "")

    def __str__(self) -> str:
        return f"{self.where()} [{self.category}{', blocking' if self.blocking else ''}] {self.note}"


@dataclass(frozen=True)
class Review:
    """What one reviewer answered: its findings, or the error that stood in for them."""

    label: str
    model: str
    family: str
    findings: tuple[ReviewFinding, ...] = ()
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Agreement:
    """A blocking finding and the findings of other reviewers that agree with it."""

    finding: ReviewFinding
    partners: tuple[ReviewFinding, ...]

    @property
    def reviewers(self) -> tuple[str, ...]:
        return tuple(sorted({self.finding.reviewer, *(p.reviewer for p in self.partners)}))

    def reason(self) -> str:
        notes = "; ".join(f"{f.reviewer}: {f.note}" for f in (self.finding, *self.partners) if f.note)
        who = ", ".join(self.reviewers)
        return f"{self.finding.where()} [{self.finding.category}] blocking, found by reviewers {who}: {notes}"


@dataclass(frozen=True)
class PairStats:
    """Agreement of two models (names sorted) over `tasks` reviews: each one's findings and how many
    of them were matched one to one."""

    models: tuple[str, str]
    findings: tuple[int, int]
    agreed: int
    tasks: int = 1

    @property
    def union(self) -> int:
        return self.findings[0] + self.findings[1] - self.agreed

    @property
    def rate(self) -> float | None:
        """agreed / union; None when neither model found anything."""
        return self.agreed / self.union if self.union else None


@dataclass(frozen=True)
class PanelResult:
    """Every review, the agreed blocking findings, the decision and the reasons a worker is told."""

    reviews: tuple[Review, ...]
    agreed: tuple[Agreement, ...]
    send_back: bool
    reasons: tuple[str, ...]
    pairs: tuple[PairStats, ...]

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(f"{r.label} ({r.model}): {r.error}" for r in self.reviews if r.error)

    @property
    def complete(self) -> bool:
        """At least two reviewers answered, so an agreement was possible."""
        return sum(1 for r in self.reviews if not r.error) >= 2

    @property
    def usage(self) -> Usage:
        return sum((r.usage for r in self.reviews), Usage())

    @property
    def cost_usd(self) -> float:
        return sum(r.cost_usd for r in self.reviews)

    def summary(self) -> str:
        found = sum(len(r.findings) for r in self.reviews)
        errors = f", {len(self.errors)} without a valid answer" if self.errors else ""
        decision = (
            f"sent back ({len(self.agreed)} agreed blocking)" if self.send_back else "no agreed blocker"
        )
        return f"panel: {len(self.reviews)} reviewers{errors}, {found} findings, {decision}"

    def to_json(self) -> dict[str, Any]:
        """The data of a `panel_reviewed` event (tuples become lists in JSON)."""
        extra = {"complete": self.complete, "errors": list(self.errors), "cost_usd": self.cost_usd}
        return {**asdict(self), **extra}


@dataclass(frozen=True)
class PanelPolicy:
    """When the panel reviews: `always`, or when the change touches a path matching one of `paths`
    (fnmatch globs, where `*` also crosses folders; a pattern ending in `/` is a folder prefix)."""

    when: Literal["always", "paths"] = "always"
    paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.when not in ("always", "paths"):
            raise UserError(f"panel: when={self.when!r} is not 'always' or 'paths'", hint="when = 'paths'")
        if self.when == "paths" and not self.paths:
            raise UserError("panel: when='paths' needs at least one path pattern", hint='paths = ["src/*"]')

    def applies(self, change: Change) -> bool:
        if self.when == "always":
            return True
        touched = {f.path for f in change.files} | {f.old_path for f in change.files if f.old_path}
        return any(_path_matches(path, pattern) for path in touched for pattern in self.paths)


def _path_matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        return path.startswith(pattern)
    return fnmatch.fnmatchcase(path, pattern)


def choose_reviewers(
    candidates: Sequence[str],
    *,
    m: int = 3,
    exclude_family: str | None = None,
    families: Mapping[str, str] | None = None,
) -> list[str]:
    """`m` of `candidates`, one per family, in the candidates' order. Models of `exclude_family` (the
    worker's) are taken only when the other families fall short, and then only one. A `UserError` when
    fewer than `m` families are available: the panel is never smaller than asked (ask for a smaller
    `m` explicitly); `m` must be at least 2, since a finding needs another reviewer to agree with it."""
    if m < 2:
        raise UserError(f"a review panel of {m} cannot agree on anything", hint="use at least 2 reviewers")
    by_family: dict[str, str] = {}
    for name in candidates:
        by_family.setdefault(family_of(name, families), name)
    chosen = [name for family, name in by_family.items() if family != exclude_family]
    if len(chosen) < m and exclude_family in by_family:
        chosen.append(by_family[exclude_family])
    if len(chosen) < m:
        seen = ", ".join(f"{name} ({family})" for family, name in by_family.items()) or "none"
        raise UserError(
            f"the review panel needs {m} models of distinct families; candidates give {len(chosen)}: {seen}",
            hint="name reviewers of more families, map endpoints to their families under [families], "
            "or ask for a smaller panel",
        )
    return chosen[:m]


def make_reviewers(models: Sequence[Model], families: Mapping[str, str] | None = None) -> list[Reviewer]:
    """Reviewers for `models`, labelled A, B, C… in order, each with its family."""
    return [Reviewer(model, LABELS[i], family_of(model.name, families)) for i, model in enumerate(models)]


async def review(
    task_text: str,
    change: Change,
    reviewers: Sequence[Reviewer],
    *,
    skill_text: str | None = None,
    diff_budget: int = DIFF_BUDGET_CHARS,
) -> PanelResult:
    """Ask every reviewer at once for its findings on `change` against `task_text`, and decide.
    `skill_text` replaces the shipped instructions. A reviewer's `ModelError` or invalid answer is
    recorded in its `Review.error`; other exceptions propagate."""
    _check_panel(reviewers)
    instructions = load_skill(SKILL_NAME).body if skill_text is None else skill_text
    diff = render_diff(change, diff_budget)
    paths = {f.path for f in change.files}
    reviews = await asyncio.gather(
        *(_ask(reviewer, instructions, task_text, diff, paths) for reviewer in reviewers)
    )
    return decide(reviews)


def _check_panel(reviewers: Sequence[Reviewer]) -> None:
    if len(reviewers) < 2:
        raise UserError("a review panel needs at least 2 reviewers", hint="name more reviewers")
    for a, b in combinations(reviewers, 2):
        if a.label == b.label:
            raise UserError(f"two reviewers are both labelled {a.label!r}", hint="use make_reviewers")
        if a.family == b.family:
            raise UserError(
                f"reviewers {a.model.name} and {b.model.name} are one family ({a.family}), not independent",
                hint="choose one model per family (choose_reviewers), or set families under [families]",
            )


async def _ask(reviewer: Reviewer, instructions: str, task_text: str, diff: str, paths: set[str]) -> Review:
    nonce = new_nonce()
    while nonce in diff:  # astronomically rare; the data must not hold its own fence
        nonce = new_nonce()
    messages = [
        Message("system", reviewer_system(instructions, nonce)),
        Message("user", reviewer_prompt(task_text, diff, nonce)),
    ]
    name = reviewer.model.name
    try:
        answer = await ask_json(reviewer.model, messages, ReviewAnswer)
    except ModelError as err:
        return Review(reviewer.label, name, reviewer.family, error=f"model error: {err}")
    if answer.value is None:
        error = f"no valid review: {answer.error}"
        return Review(reviewer.label, name, reviewer.family, (), error, answer.usage, answer.cost_usd)
    findings = tuple(
        ReviewFinding(reviewer.label, _path(f.file, paths), f.lines, f.category, f.blocking, f.note.strip())
        for f in answer.value.findings
    )
    return Review(reviewer.label, name, reviewer.family, findings, "", answer.usage, answer.cost_usd)


def reviewer_system(instructions: str, nonce: str) -> str:
    return (
        instructions.strip()
        + "\n\n# Untrusted data\n\n"
        + UNTRUSTED_RULES.replace("{nonce}", nonce)
        + "\n\nReply with only the JSON object described above: "
        '{"findings": [{"file": ..., "lines": [start, end], "category": ..., "blocking": true|false, '
        '"note": ...}]}, category one of ' + ", ".join(CATEGORIES) + "."
    )


def reviewer_prompt(task_text: str, diff: str, nonce: str) -> str:
    return (
        f"# The task (from the plan)\n{task_text.strip()}\n\n"
        f"# The change (unified diff; give line numbers of the new file)\n{fence(diff, 'diff', nonce)}\n\n"
        "Your findings, as the JSON object described in the system message:"
    )


def _path(file: str, paths: set[str]) -> str:
    """The path as the change names it: `./x` and diff-style `a/x`, `b/x` are mapped back to `x`."""
    file = file.strip().removeprefix("./")
    if file not in paths and file[:2] in ("a/", "b/") and file[2:] in paths:
        return file[2:]
    return file


def agree(a: ReviewFinding, b: ReviewFinding) -> bool:
    """Same file, same category, overlapping line ranges."""
    return (
        a.file == b.file
        and a.category == b.category
        and a.lines[0] <= b.lines[1]
        and b.lines[0] <= a.lines[1]
    )


def decide(reviews: Sequence[Review]) -> PanelResult:
    """The agreed blocking findings, whether they send the task back, and the pair statistics."""
    findings = [f for r in reviews for f in r.findings]
    agreements: list[Agreement] = []
    reported: set[int] = set()  # findings already named as a partner of an earlier agreement
    for i, finding in enumerate(findings):
        if not finding.blocking or i in reported:
            continue
        partners = [
            (j, other)
            for j, other in enumerate(findings)
            if other.reviewer != finding.reviewer and agree(finding, other)
        ]
        if partners:
            agreements.append(Agreement(finding, tuple(other for _, other in partners)))
            reported.update(j for j, _ in partners)
    return PanelResult(
        reviews=tuple(reviews),
        agreed=tuple(agreements),
        send_back=bool(agreements),
        reasons=tuple(a.reason() for a in agreements),
        pairs=pair_statistics(reviews),
    )


def pair_statistics(reviews: Sequence[Review]) -> tuple[PairStats, ...]:
    """For each pair of reviewers that both answered: each one's findings and the number matched one
    to one (greedily, in order) by `agree`."""
    answered = sorted((r for r in reviews if not r.error), key=lambda r: r.model)
    stats = []
    for a, b in combinations(answered, 2):
        free = list(b.findings)
        agreed = 0
        for finding in a.findings:
            match = next((other for other in free if agree(finding, other)), None)
            if match is not None:
                free.remove(match)
                agreed += 1
        stats.append(PairStats((a.model, b.model), (len(a.findings), len(b.findings)), agreed))
    return tuple(stats)


def merge_statistics(panel_events: Iterable[Mapping[str, Any]]) -> tuple[PairStats, ...]:
    """Sum the `pairs` of many panel events' data (`PanelResult.to_json()`) per model pair, for a run;
    entries without the keys it needs are skipped."""
    totals: dict[tuple[str, str], PairStats] = {}
    for data in panel_events:
        for pair in data.get("pairs") or ():
            try:
                a, b = map(str, pair["models"])
                fa, fb = map(int, pair["findings"])
                agreed, tasks = int(pair["agreed"]), int(pair.get("tasks", 1))
            except (KeyError, TypeError, ValueError):
                continue
            if a > b:
                a, b, fa, fb = b, a, fb, fa
            old = totals.get((a, b), PairStats((a, b), (0, 0), 0, 0))
            found = (old.findings[0] + fa, old.findings[1] + fb)
            totals[(a, b)] = PairStats((a, b), found, old.agreed + agreed, old.tasks + tasks)
    return tuple(totals[key] for key in sorted(totals))


def skill_text() -> str:
    """The body of the shipped review skill: the reviewers' instructions."""
    return load_skill(SKILL_NAME).body


__all__ = [
    "CATEGORIES",
    "Agreement",
    "Category",
    "FindingAnswer",
    "PairStats",
    "PanelPolicy",
    "PanelResult",
    "Review",
    "ReviewAnswer",
    "ReviewFinding",
    "Reviewer",
    "agree",
    "choose_reviewers",
    "decide",
    "make_reviewers",
    "merge_statistics",
    "pair_statistics",
    "review",
    "reviewer_prompt",
    "reviewer_system",
    "skill_text",
]
