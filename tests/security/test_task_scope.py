"""A task's tool scope in a plan: read when the plan is, named by its line when it is wrong, and enforced on
the worker's tools before any call runs — the offered tools shrink to the scope and `finish` stays."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hilbert.agent.tools import ScopedTools, ToolBox
from hilbert.commands import Runner
from hilbert.errors import UserError
from hilbert.fleet.plan import parse_plan
from hilbert.models.types import ToolCall
from hilbert.security.scope import ToolScope

PLAN = """\
# Keep the tests green

## T1 — Run the tests
Only read and run the tests.

```yaml hilbert-task
id: T1
title: Run the tests
verify: python -m pytest -q
tools:
  read_file: any
  shell: {{command: {{glob: "python -m pytest*"}}}}
{extra}```
"""


def run(tools: ScopedTools, name: str, **arguments: object) -> tuple[str, bool]:
    outcome = asyncio.run(tools.run(ToolCall("c1", name, dict(arguments))))
    return outcome.content, outcome.is_error


def test_a_plans_tool_scope_is_enforced_before_any_call_runs(tmp_path: Path) -> None:
    [task] = parse_plan(PLAN.format(extra="")).tasks
    scope = task.scope()
    assert scope is not None
    (tmp_path / "a.txt").write_text("hello\n")
    tools = ScopedTools(ToolBox(tmp_path, runner=Runner.unsandboxed()), scope)
    assert [spec.name for spec in tools.specs()] == ["read_file", "shell", "finish"]
    assert run(tools, "read_file", path="a.txt") == ("     1\thello", False)
    said, refused = run(tools, "write_file", path="a.txt", content="bye\n")
    assert refused and said.startswith("refused by policy (tool_scope): `write_file` is not among")
    said, refused = run(tools, "shell", command="rm a.txt")
    assert refused and said.startswith("refused by policy (tool_scope)") and "command" in said
    for smuggled in (
        "python -m pytest; rm a.txt",
        "python -m pytest && rm a.txt",
        "python -m pytest $(rm a.txt)",
    ):
        said, refused = run(tools, "shell", command=smuggled)
        assert refused and said.startswith("refused by policy (tool_scope)"), smuggled
    assert (tmp_path / "a.txt").read_text() == "hello\n"  # none of these calls ran
    said, _ = run(tools, "finish", claim="done", evidence="ran it")  # the loop's, never the scope's
    assert "tool_scope" not in said


def test_a_task_without_a_scope_keeps_every_tool() -> None:
    plan = parse_plan(
        PLAN.format(extra="").replace(
            'tools:\n  read_file: any\n  shell: {command: {glob: "python -m pytest*"}}\n', ""
        )
    )
    assert plan.tasks[0].tools is None and plan.tasks[0].scope() is None


def test_a_scope_that_cannot_be_read_names_the_plans_line() -> None:
    bad = PLAN.format(extra="").replace("read_file: any", "read_file: {path: {glob: 3}}")
    with pytest.raises(UserError, match=r"PLAN.md:\d+: .*tools"):
        parse_plan(bad)


def test_a_path_pattern_does_not_reach_out_through_dot_dot() -> None:
    scope = ToolScope.from_mapping({"tools": {"read_file": {"path": {"glob": "src/*"}}}})
    assert scope.check("read_file", {"path": "src/app.py"}) is None
    refused = scope.check("read_file", {"path": "src/../secret.txt"})
    assert refused is not None and refused.rule == "tool_scope"
