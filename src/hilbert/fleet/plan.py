"""The plan: `Task` and `Plan` (frozen, validated pydantic models) and PLAN.md, read and written.

PLAN.md is markdown for people with one machine-readable fenced block per task:

    # The goal, as the first line; more intro text may follow

    ## T3 — parse_date is off by one
    Free text for people (and the worker): the task's description.

    ```yaml hilbert-task
    id: T3
    title: parse_date is off by one
    verify: python -m pytest -q tests/test_dates.py
    depends_on: [T1]
    claims: [src/dates.py]
    budget: {turns: 40, usd: 1.0}
    allow_test_edits: [tests/test_dates.py::test_leap]   # tests the task says are wrong (optional)
    heldout: heldout/T3                                   # tests the worker never sees (optional)
    tools: {read_file: any, shell: {command: {glob: "python -m pytest*"}}}  # its only tools (optional)
    ```

Every `## ` heading (outside a code fence) starts a task and must read `## ID — Title` (sub-headings in a
description use `###`). In the block, `id` and `title` may be left out; when given they must match the
heading. A description that would not read back as free text (it holds a `## ` line, an unclosed fence, a
task block) is written into the block as `description:` instead, so `parse_plan(write_plan(p)) == p` for
every valid plan. `parse_plan` rejects a bad plan with `UserError("PLAN.md:LINE: what is wrong", hint=...)`.
Scheduling lives in `scheduler`; this module only knows the plan's shape and its dependency order.
"""

from __future__ import annotations

import difflib
import heapq
import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hilbert.errors import UserError
from hilbert.fleet.plan_markdown import Section, read_markdown, reads_back_as_text
from hilbert.security.scope import ToolScope

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_BLOCK_KEYS = (
    "id",
    "title",
    "verify",
    "depends_on",
    "claims",
    "budget",
    "allow_shared_claims",
    "allow_test_edits",
    "heldout",
    "tools",
    "description",
)
_HINTS = {
    "id": "an id is a short ASCII word such as T3 (letters, digits, '-', '_'; at most 32)",
    "title": "write the heading as '## ID — Title'",
    "verify": "verify is the shell command that proves the task done, e.g. verify: python -m pytest -q tests",
    "depends_on": "depends_on lists ids of other tasks in this plan, e.g. depends_on: [T1, T2]",
    "claims": "claims are paths relative to the repository root, e.g. claims: [src/dates.py, docs/]",
    "budget": "write a budget as budget: {turns: 40, usd: 1.0}",
    "allow_shared_claims": "allow_shared_claims is true or false",
    "allow_test_edits": "allow_test_edits lists test paths (or globs) the task lets a worker edit",
    "heldout": "heldout is a folder of tests kept outside the repository (relative to PLAN.md's folder)",
    "tools": "tools maps tool names to `any` or to argument rules (hilbert.security.scope), or lists names",
    "description": "a description is markdown text",
}


def _normalize_text(text: str) -> str:
    """Unix line ends, no blank lines before or after, no trailing whitespace: how free text reads back."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip()


class Budget(BaseModel):
    """How much one attempt at a task may spend; `None` means the run's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    turns: int | None = Field(default=None, strict=True, gt=0)
    usd: float | None = Field(default=None, gt=0)

    @field_validator("usd", mode="before")
    @classmethod
    def _usd_is_a_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError("usd must be a positive number of dollars")
        return value


def _task_id(value: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a task id")
    return value


def _relative_path(claim: str) -> str:
    if not claim.strip() or any(ch in claim for ch in "\n\r\0"):
        raise ValueError(f"{claim!r} is not a path")
    if claim.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:[\\/]", claim):
        raise ValueError(f"{claim!r} is an absolute path; claims are relative to the repository root")
    if ".." in re.split(r"[\\/]", claim):
        raise ValueError(f"{claim!r} goes outside the repository with '..'")
    return posixpath.normpath(claim.strip())


class Task(BaseModel):
    """One verifiable task: `verify` is the shell command whose success proves it done."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: Annotated[str, AfterValidator(_task_id)]
    title: str
    verify: str
    description: str = ""
    depends_on: tuple[Annotated[str, AfterValidator(_task_id)], ...] = ()
    claims: tuple[Annotated[str, AfterValidator(_relative_path)], ...] = ()
    budget: Budget | None = None
    allow_shared_claims: bool = Field(default=False, strict=True)
    allow_test_edits: tuple[str, ...] = ()  # test paths/globs the task lets a worker edit (the gate)
    heldout: str | None = None  # a folder of tests the worker never sees, relative to PLAN.md's folder
    # the tools (and argument values) the task's worker may use, fixed before it reads anything
    # (`hilbert.security.scope`); None: all of them
    tools: dict[str, Any] | list[str] | None = None

    @field_validator("tools")
    @classmethod
    def _readable_scope(cls, value: Any) -> Any:
        if value is not None:
            try:
                ToolScope.from_mapping({"tools": value})
            except UserError as error:
                raise ValueError(str(error)) from None
        return value

    def scope(self) -> ToolScope | None:
        return None if self.tools is None else ToolScope.from_mapping({"tools": self.tools})

    @field_validator("title")
    @classmethod
    def _one_line_title(cls, value: str) -> str:
        if "\n" in value or "\r" in value:
            raise ValueError("a title is one line")
        if not value.strip():
            raise ValueError("the title is empty")
        return value.strip()

    @field_validator("verify")
    @classmethod
    def _non_empty_verify(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("verify is empty: it must be a shell command")
        return value.strip()

    @field_validator("description")
    @classmethod
    def _normalized_description(cls, value: str) -> str:
        return _normalize_text(value)

    @field_validator("depends_on", "claims", mode="before")
    @classmethod
    def _one_item_is_a_list(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("depends_on", "claims")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("an entry is listed twice")
        return value


@dataclass(frozen=True)
class _Problem:
    """Something wrong between tasks: which task (index), which of its fields, what, and what to do."""

    task: int
    field: str
    message: str
    hint: str


def _problems(tasks: tuple[Task, ...]) -> list[_Problem]:
    """Duplicate ids, unknown dependencies, then a cycle (named, starting at its earliest task)."""
    found: list[_Problem] = []
    first: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.id in first:
            hint = f"task {first[task.id] + 1} already has it; give each task its own id"
            found.append(_Problem(index, "id", f"task id {task.id!r} is used twice", hint))
        first.setdefault(task.id, index)
    for index, task in enumerate(tasks):
        for dep in task.depends_on:
            if dep not in first:
                message = f"task {task.id} depends on {dep!r}, which is not in the plan"
                found.append(_Problem(index, "depends_on", message, f"known ids: {', '.join(first)}"))
    if found:
        return found
    cycle = _find_cycle(tasks, first)
    if cycle:
        message = f"dependency cycle: {' → '.join([*cycle, cycle[0]])}"
        hint = "remove one of these dependencies so the tasks can run in some order"
        found.append(_Problem(first[cycle[0]], "depends_on", message, hint))
    return found


def _find_cycle(tasks: tuple[Task, ...], index: dict[str, int]) -> list[str]:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(task_id: str) -> list[str]:
        state[task_id] = 1
        path.append(task_id)
        for dep in tasks[index[task_id]].depends_on:
            if state.get(dep) == 1:
                return path[path.index(dep) :]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        state[task_id] = 2
        path.pop()
        return []

    for task in tasks:
        if task.id not in state and (cycle := visit(task.id)):
            start = min(range(len(cycle)), key=lambda i: index[cycle[i]])
            return cycle[start:] + cycle[:start]
    return []


class Plan(BaseModel):
    """A goal and the tasks that reach it: ids unique, dependencies known and acyclic."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    goal: str
    tasks: tuple[Task, ...]

    @field_validator("goal")
    @classmethod
    def _goal_reads_back(cls, value: str) -> str:
        goal = _normalize_text(value)
        if not goal:
            raise ValueError("the goal is empty")
        if not reads_back_as_text(f"# {goal}"):
            raise ValueError("the goal holds a '## ' line, a task block or an unclosed code fence")
        return goal

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if not self.tasks:
            raise ValueError("a plan needs at least one task")
        if problems := _problems(self.tasks):
            raise ValueError(problems[0].message)
        return self

    def order(self) -> list[str]:
        """Task ids in an order that respects dependencies; among ready tasks, plan order wins."""
        position = {task.id: i for i, task in enumerate(self.tasks)}
        waiting = {task.id: len(task.depends_on) for task in self.tasks}
        dependents: dict[str, list[str]] = {task.id: [] for task in self.tasks}
        for task in self.tasks:
            for dep in task.depends_on:
                dependents[dep].append(task.id)
        ready = [i for i, task in enumerate(self.tasks) if not task.depends_on]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            task_id = self.tasks[heapq.heappop(ready)].id
            order.append(task_id)
            for later in dependents[task_id]:
                waiting[later] -= 1
                if waiting[later] == 0:
                    heapq.heappush(ready, position[later])
        return order


# --- parse ---------------------------------------------------------------------------------------------


def parse_plan(text: str, *, source: str = "PLAN.md") -> Plan:
    """The plan in PLAN.md `text`; a `UserError` naming `source:LINE` and what is wrong if it is not valid."""

    def fail(line: int, what: str, hint: str) -> UserError:
        return UserError(f"{source}:{line}: {what}", hint=hint)

    markdown = read_markdown(text.replace("\r\n", "\n").split("\n"), source=source)
    if markdown.unclosed_fence is not None:
        raise fail(
            markdown.unclosed_fence, "this code fence is never closed", "close it with a matching fence"
        )
    if markdown.stray_block is not None:
        raise fail(
            markdown.stray_block, "a task block before any task heading", "put '## ID — Title' above it"
        )
    if not markdown.sections:
        raise fail(1, "the plan has no tasks", "each task is a '## ID — Title' section with a task block")
    tasks: list[Task] = []
    where: list[dict[str, int]] = []
    for section in markdown.sections:
        task, lines = _parse_section(section, fail)
        tasks.append(task)
        where.append(lines)
    for problem in _problems(tuple(tasks)):
        raise fail(where[problem.task][problem.field], problem.message, problem.hint)
    intro = _normalize_text("\n".join(markdown.intro))
    goal = intro[2:] if intro.startswith("# ") else intro
    if not goal.strip():
        raise fail(1, "the plan has no goal before its first task", "start PLAN.md with '# GOAL'")
    try:
        return Plan(goal=goal, tasks=tuple(tasks))
    except ValidationError as err:
        raise fail(1, f"the goal: {_reason(err.errors()[0])}", "start PLAN.md with '# GOAL'") from None


def _parse_section(
    section: Section, fail: Callable[[int, str, str], UserError]
) -> tuple[Task, dict[str, int]]:
    """The task in one section, and the line of each of its fields (for later errors)."""
    name = f"task {section.task_id}"
    if not section.blocks:
        raise fail(section.heading_line, f"{name} has no task block", "add a ```yaml hilbert-task block")
    if len(section.blocks) > 1:
        raise fail(section.blocks[1][0], f"{name} has a second task block", "merge them into one block")
    fence_line, body = section.blocks[0]
    loader = yaml.SafeLoader(body)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = fence_line + 1 + mark.line if mark else fence_line
        raise fail(line, f"{name}: malformed YAML: {err.problem or err.context}", "fix the YAML") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise fail(fence_line, f"{name}: the task block must be a mapping of keys", "write key: value lines")
    key_lines: dict[str, int] = {}
    for key_node, _ in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "(a collection)"
        line = fence_line + 1 + key_node.start_mark.line
        if key in key_lines:
            raise fail(line, f"{name}: key {key!r} appears twice", "keep one")
        if key not in _BLOCK_KEYS:
            close = difflib.get_close_matches(str(key), _BLOCK_KEYS, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise fail(line, f"{name}: unknown key {key!r}", f"{guess}known keys: {', '.join(_BLOCK_KEYS)}")
        key_lines[key] = line
    lines = {key: key_lines.get(key, fence_line) for key in _BLOCK_KEYS} | {"id": section.heading_line}
    if "verify" not in data:
        raise fail(fence_line, f"{name} has no 'verify'", _HINTS["verify"])
    heading = {"id": section.task_id, "title": section.title}
    for key in ("id", "title"):
        if key in data and str(data[key]).strip() != heading[key].strip():
            what = f"{name}: the block's {key} {data[key]!r} differs from the heading's {heading[key]!r}"
            raise fail(key_lines[key], what, "make the heading and the block agree")
    text = _normalize_text("\n".join(section.text))
    if text and "description" in data:
        what = f"{name} has a description both as text and in its block"
        raise fail(key_lines["description"], what, "keep one of them")
    fields = {**data, **heading, "description": data.get("description", text)}
    try:
        return Task(**fields), lines
    except ValidationError as err:
        error = err.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else "id"
        line = _node_line(node, error["loc"], fence_line) if key in key_lines else lines.get(key, fence_line)
        if key in heading:
            line = section.heading_line
        raise fail(line, f"{name}: {key}: {_reason(error)}", _HINTS.get(key, "")) from None


def _node_line(node: yaml.Node, loc: tuple[int | str, ...], fence_line: int) -> int:
    """The file line of the YAML node at pydantic's `loc` (as deep as the YAML goes)."""
    line = node.start_mark.line
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = [value for key, value in node.value if key.value == part]
            if not found:
                break
            line = next(key for key, _ in node.value if key.value == part).start_mark.line
            node = found[0]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return fence_line + 1 + line


def _reason(error: Any) -> str:
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


# --- write ---------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Flow style for lists and the budget, literal blocks for multi-line text, escapes where needed."""


class _Flow(dict[str, Any]):
    pass


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    special = any(ch in text for ch in "\r\x85\u2028\u2029")
    style = '"' if special else "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))


def write_plan(plan: Plan) -> str:
    """PLAN.md for `plan`; `parse_plan` reads it back as the same plan."""
    parts = [f"# {plan.goal}\n"]
    for task in plan.tasks:
        block: dict[str, Any] = {"id": task.id, "title": task.title, "verify": task.verify}
        if task.depends_on:
            block["depends_on"] = list(task.depends_on)
        if task.claims:
            block["claims"] = list(task.claims)
        if task.budget is not None:
            block["budget"] = _Flow(task.budget.model_dump(exclude_none=True))
        if task.allow_shared_claims:
            block["allow_shared_claims"] = True
        if task.allow_test_edits:
            block["allow_test_edits"] = list(task.allow_test_edits)
        if task.heldout is not None:
            block["heldout"] = task.heldout
        if task.tools is not None:
            block["tools"] = task.tools
        as_text = reads_back_as_text(task.description)
        if not as_text:
            block["description"] = task.description
        body = yaml.dump(block, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=1 << 16)
        longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
        fence = "`" * max(3, longest + 1)
        section = [f"## {task.id} — {task.title}\n"]
        if as_text and task.description:
            section.append(f"{task.description}\n")
        section.append(f"{fence}yaml hilbert-task\n{body}{fence}\n")
        parts.append("\n".join(section))
    return "\n".join(parts)
