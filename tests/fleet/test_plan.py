"""PLAN.md: what a person or the lead writes reads as the plan they meant, a bad plan names its line, and
writing a plan and reading it back gives the same plan."""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from hilbert.errors import UserError
from hilbert.fleet.plan import Budget, Plan, Task, parse_plan, write_plan

FLEET_MD = Path(__file__).parents[2] / "docs" / "design" / "fleet.md"

GOOD = """\
# Fix the date bugs

The dates module mishandles month ends.

## T1 — Add failing tests
Write tests first.

```yaml hilbert-task
id: T1
title: Add failing tests
verify: python -m pytest -q tests/test_dates.py --co
claims: [tests/test_dates.py]
```

## T2 — parse_date is off by one
Fix it. A code sample:

```python
## not a heading, inside a fence
print("x")
```

```yaml hilbert-task
verify: 'python -m pytest -q tests/test_dates.py -k "parse"'
depends_on: [T1]
claims: [src/dates.py, ./docs/]
budget: {turns: 40, usd: 1.5}
allow_shared_claims: true
```
"""


def test_a_plan_reads_as_its_goal_and_tasks() -> None:
    plan = parse_plan(GOOD)
    assert plan.goal == "Fix the date bugs\n\nThe dates module mishandles month ends."
    first, second = plan.tasks
    assert (first.id, first.title, first.description) == ("T1", "Add failing tests", "Write tests first.")
    assert first.claims == ("tests/test_dates.py",) and first.budget is None
    assert second.verify == 'python -m pytest -q tests/test_dates.py -k "parse"'
    assert second.description.startswith("Fix it. A code sample:\n\n```python\n## not a heading")
    assert second.depends_on == ("T1",)
    assert second.claims == ("src/dates.py", "docs")  # normalised: "./docs/" and "docs" are one path
    assert second.budget == Budget(turns=40, usd=1.5) and second.allow_shared_claims


def test_the_design_docs_example_parses() -> None:
    doc = FLEET_MD.read_text()
    example = re.search(r"\n(    ## T3 —.*?\n    ```\n)", doc, re.S)
    assert example, "fleet.md lost its PLAN.md example"
    block = textwrap.dedent(example[1])
    plan = parse_plan(f"# Dates\n\n## T1 — base\n\n```yaml hilbert-task\nverify: 'true'\n```\n\n{block}")
    task = plan.tasks[1]
    assert (task.id, task.depends_on, task.claims) == ("T3", ("T1",), ("src/dates.py",))
    assert task.budget == Budget(turns=40, usd=1.0)


def _section(task_id: str, body: str, *, text: str = "") -> str:
    return f"## {task_id} — Task {task_id}\n{text}\n```yaml hilbert-task\n{body}\n```\n"


def _plan(*sections: str) -> str:
    return "# Goal\n\n" + "\n".join(sections)


# Lines: 1 "# Goal", 2 blank, 3 first heading, 4 blank (text), 5 fence, 6.. block.
REJECTED = [
    ("missing verify", _plan(_section("T1", "claims: [a]")), 5, "task T1 has no 'verify'"),
    ("empty verify", _plan(_section("T1", "claims: [a]\nverify: '  '")), 7, "verify is empty"),
    ("malformed yaml", _plan(_section("T1", "verify: x\nclaims: [a, b\nbudget: {}")), 8, "malformed YAML"),
    ("unknown key", _plan(_section("T1", "verify: x\nverfy: y")), 7, "unknown key 'verfy'"),
    ("duplicate key", _plan(_section("T1", "verify: x\nverify: y")), 7, "'verify' appears twice"),
    ("not a mapping", _plan(_section("T1", "- verify: x")), 5, "must be a mapping"),
    (
        "duplicate id",
        _plan(_section("T1", "verify: x"), _section("T1", "verify: y")),
        9,
        "task id 'T1' is used twice",
    ),
    (
        "unknown dependency",
        _plan(_section("T1", "verify: x\ndepends_on: [T9]")),
        7,
        "depends on 'T9', which is not in the plan",
    ),
    (
        "cycle",
        _plan(
            _section("T1", "verify: x"),
            _section("T2", "verify: x\ndepends_on: [T3]"),
            _section("T3", "verify: x\ndepends_on: [T1, T2]"),
        ),
        13,
        "dependency cycle: T2 → T3 → T2",
    ),
    ("self dependency", _plan(_section("T1", "verify: x\ndepends_on: T1")), 7, "cycle: T1 → T1"),
    ("absolute claim", _plan(_section("T1", "verify: x\nclaims: [a, /etc/passwd]")), 7, "absolute path"),
    ("claim with ..", _plan(_section("T1", "verify: x\nclaims:\n  - a\n  - src/../../x")), 9, "'..'"),
    ("section without block", _plan("## T1 — Lonely\nno block here\n"), 3, "task T1 has no task block"),
    (
        "two blocks",
        _plan(_section("T1", "verify: x") + "\n```yaml hilbert-task\nverify: y\n```\n"),
        9,
        "second task block",
    ),
    ("block id differs", _plan(_section("T1", "id: T2\nverify: x")), 6, "block's id 'T2' differs"),
    ("block title differs", _plan(_section("T1", "title: Other\nverify: x")), 6, "block's title"),
    ("no tasks", "# Goal\n\nJust words.\n", 1, "the plan has no tasks"),
    ("no goal", _section("T1", "verify: x"), 1, "no goal"),
    ("bad id", _plan(_section("T/1", "verify: x")), 3, "'T/1' is not a task id"),
    ("heading not a task", _plan("## Background\n", _section("T1", "verify: x")), 3, "'## ID — Title'"),
    ("unclosed fence", _plan(_section("T1", "verify: x"), "```python\nprint()\n"), 9, "never closed"),
    ("block before any task", "# Goal\n\n```yaml hilbert-task\nverify: x\n```\n", 3, "before any task"),
    ("budget", _plan(_section("T1", "verify: x\nbudget: {turns: 0}")), 7, "budget"),
    ("string dependency id", _plan(_section("T1", "verify: x\ndepends_on: [1]")), 7, "valid string"),
    (
        "description twice",
        _plan(_section("T1", "verify: x\ndescription: inside", text="outside\n")),
        8,
        "description both as text and in its block",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "what"), [case[1:] for case in REJECTED], ids=[c[0] for c in REJECTED]
)
def test_a_bad_plan_names_its_line_and_what_is_wrong(text: str, line: int, what: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_plan(text, source="plans/PLAN.md")
    message = caught.value.message
    assert message.startswith(f"plans/PLAN.md:{line}: "), message
    assert what in message, message
    assert caught.value.hint


def test_windows_line_ends_read_like_unix_ones() -> None:
    assert parse_plan(GOOD.replace("\n", "\r\n")) == parse_plan(GOOD)


def test_models_reject_bad_values_when_built_in_code() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        Task(id="T1", title="t", verify="x", claims=("/abs",))
    with pytest.raises(ValidationError, match="verify is empty"):
        Task(id="T1", title="t", verify=" ")
    with pytest.raises(ValidationError, match="usd"):
        Budget(usd=float("inf"))
    t1 = Task(id="T1", title="t", verify="x", depends_on=("T2",))
    t2 = Task(id="T2", title="t", verify="x", depends_on=("T1",))
    with pytest.raises(ValidationError, match="cycle: T1 → T2 → T1"):
        Plan(goal="g", tasks=(t1, t2))
    with pytest.raises(ValidationError, match="at least one task"):
        Plan(goal="g", tasks=())
    with pytest.raises(ValidationError, match="goal"):
        Plan(goal="g\n## T9 — sneaky", tasks=(Task(id="T1", title="t", verify="x"),))


def test_order_respects_dependencies_and_keeps_plan_order_among_ready_tasks() -> None:
    def task(task_id: str, *deps: str) -> Task:
        return Task(id=task_id, title=task_id, verify="true", depends_on=deps)

    plan = Plan(goal="g", tasks=(task("A", "D"), task("B"), task("C", "B"), task("D"), task("E", "A", "C")))
    assert plan.order() == ["B", "C", "D", "A", "E"]


# --- round trips over generated plans -------------------------------------------------------------------

PIECES = [
    "plain words",
    "**bold** and _it_",
    "`inline code`",
    "```",
    "```python",
    "````",
    "~~~",
    "```yaml hilbert-task",
    "id: T1",
    "## T2 — looks like a task",
    "##",
    "## Not a task heading",
    "### a sub-heading",
    "# a top heading",
    "   ```",
    "    indented code",
    "- a list item",
    "> a quote",
    "---",
    "ünïcødé — Erdős, Poincaré, 数学, 🚀",
    "quotes \"double\" and 'single'",
    "trailing spaces   ",
    "\ttab",
    "line\u2028separator\x85next",
    "back\\slash",
    "",
    "",
]
VERIFIES = [
    "python -m pytest -q",
    'pytest -k "not slow" tests/',
    "echo 'it''s' && test -f x",
    "sh -c \"echo '$HOME' # not a comment\"",
    "make test\nmake lint",
    "yes",
    "123",
    "`which python` -V",
    "a: b",
]
CLAIMS = ["src/a.py", "docs/", "tests/x y.py", "yes", "1.5", "src/日本.py", "[odd]", "a#b", "null"]


def _text(rng: random.Random, pieces: int) -> str:
    return "\n".join(rng.choice(PIECES) for _ in range(rng.randint(0, pieces)))


def _random_plan(rng: random.Random) -> Plan:
    ids = [rng.choice(["T", "task-", "X_", ""]) + str(i) for i in range(1, rng.randint(2, 7))]
    tasks = []
    for index, task_id in enumerate(ids):
        earlier = ids[:index]
        budget = rng.choice(
            [None, Budget(), Budget(turns=rng.randint(1, 99)), Budget(turns=3, usd=rng.random() * 10 + 1e-9)]
        )
        tasks.append(
            Task(
                id=task_id,
                title=rng.choice(["Fix it", "Erdős — “quoted” `code` #1", "yes", "a: b # c", "## x"]),
                verify=rng.choice(VERIFIES),
                description=_text(rng, 8),
                depends_on=tuple(rng.sample(earlier, rng.randint(0, len(earlier)))),
                claims=tuple(rng.sample(CLAIMS, rng.randint(0, 3))),
                budget=budget,
                allow_shared_claims=rng.random() < 0.3,
            )
        )
    rng.shuffle(tasks)  # dependencies may point forward in the file
    goal = rng.choice(["Fix the bugs", "# Already a heading", "Goal with `code`\n\n```\nfenced\n```"])
    return Plan(goal=goal, tasks=tuple(tasks))


def test_written_plans_read_back_as_the_same_plan() -> None:
    rng = random.Random(20240603)
    in_block = 0
    for _ in range(400):
        plan = _random_plan(rng)
        text = write_plan(plan)
        assert parse_plan(text) == plan, text
        assert write_plan(parse_plan(text)) == text
        in_block += text.count("\ndescription:")
    assert in_block > 50  # the generator does reach descriptions that cannot be written as free text


def test_descriptions_stay_free_text_when_they_can() -> None:
    task = Task(id="T1", title="t", verify="x", description="Use `x`.\n\n```python\n## comment\n```")
    text = write_plan(Plan(goal="g", tasks=(task,)))
    assert "description:" not in text
    assert "Use `x`.\n\n```python\n## comment\n```\n\n```yaml hilbert-task\n" in text


def test_rewriting_a_hand_written_plan_is_stable() -> None:
    hand_written = GOOD.replace("Write tests first.", "") + "\nText after a block joins the description.\n"
    once = write_plan(parse_plan(hand_written))
    assert write_plan(parse_plan(once)) == once
    assert parse_plan(once) == parse_plan(hand_written)
    assert parse_plan(once).tasks[1].description.endswith("Text after a block joins the description.")
