"""The engineer on layouts real libraries have and the sample projects do not: a package under src/,
a module longer than one read_file answer, unittest classes whose tests share names and come from a
mixin, a function under test named by a class attribute, and a bug in a module the test reaches
only through another one."""

from __future__ import annotations

import ast
import asyncio
import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import Any

import pytest
from engineer_testkit import FAST

from hilbert.context.tried import TRIED_HERE, TriedEdit, tried_edits, tried_note
from hilbert.sim.engineer import EngineerResponder, reading, tracing
from hilbert.sim.engineer.actions import Edit, Observation
from hilbert.sim.engineer.desk import Brief, Desk
from hilbert.sim.engineer.harness import COMPACTED, Episode, drive, tool_arguments
from hilbert.sim.engineer.repairs import candidates
from hilbert.sim.sample import generate_sample_project

FILLER = "".join(
    f'\n\ndef filler_{n}(value):\n    """Filler number {n}, long enough to need many pages."""\n'
    f"    return value * {n} + {n % 7}\n"
    for n in range(300)
)
LIBRARY = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    "src/shapes/__init__.py": "from shapes.core import Box, doubled\n",
    "src/shapes/core.py": (
        "from shapes import helpers\n\n\n"
        "class Box:\n"
        "    def __init__(self, w, h):\n"
        "        self.w = w\n"
        "        self.h = h\n\n"
        "    def area(self):\n"
        "        return helpers.product(self.w, self.h)\n\n\n"
        "def doubled(value):\n"
        "    return value * 2\n"
    ),
    "src/shapes/helpers.py": "def product(a, b):\n    return a * b\n",
    "src/shapes/long.py": (
        f'"""A long module."""\n{FILLER[: len(FILLER) // 2]}\n\ndef middle(value):\n    return value - 1\n'
        f'{FILLER[len(FILLER) // 2 :]}\n\ndef far_end(value):\n    """One more.\n\n    >>> far_end(1) - 1\n'
        '    1\n    """\n    return value + 1\n'
    ),
    "tests/__init__.py": "",
    "tests/test_shapes.py": (
        "import unittest\n\n"
        "import shapes\n"
        "from shapes import long\n\n\n"
        "class CheckMixin:\n"
        "    def test_twice(self):\n"
        "        self.assertEqual(self.FUNC(4), 8)\n\n\n"
        "class DoubledTest(unittest.TestCase, CheckMixin):\n"
        "    FUNC = staticmethod(shapes.doubled)\n\n"
        "    def test_value(self):\n"
        "        self.assertEqual(shapes.doubled(1), 2)\n\n\n"
        "class BoxTest(unittest.TestCase):\n"
        "    def test_value(self):\n"
        "        box = shapes.Box(2, 3)\n"
        "        self.assertEqual(box.area(), 6)\n\n\n"
        "class FarTest(unittest.TestCase):\n"
        "    def test_far_end(self):\n"
        "        self.assertEqual(long.far_end(1), 2)\n"
    ),
}


def make_library(root: Path, bug: tuple[str, str, str]) -> Path:
    for name, text in LIBRARY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    path, old, new = bug
    text = (root / path).read_text()
    assert text.count(old) == 1, old
    (root / path).write_text(text.replace(old, new))
    return root


def run_tests(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=root, env={**os.environ, **FAST}, capture_output=True, text=True)


def solve(root: Path, test_id: str, options: dict[str, str] | None = None) -> Episode:
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q {test_id}` passes."
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    responder = EngineerResponder.from_options(options or {}, seed=1)
    return asyncio.run(drive(responder, root, task, system=prompt, env=FAST, read_limit=4000))


def test_a_bug_past_the_first_page_of_a_long_module_is_read_in_parts_and_fixed(tmp_path: Path) -> None:
    root = make_library(tmp_path, ("src/shapes/long.py", "return value + 1", "return value - 1"))
    assert len((root / "src/shapes/long.py").read_text()) > 12_000
    episode = solve(root, "tests/test_shapes.py::FarTest::test_far_end")
    assert episode.claim.startswith("Fixed"), episode.claim
    assert run_tests(root).returncode == 0
    reads = tool_arguments(episode.messages, "read_file")
    assert any(r["path"] == "src/shapes/long.py" and r.get("start_line", 1) > 1 for r in reads), reads
    pages = [r for r in reads if r["path"] == "src/shapes/long.py"]
    assert len(pages) <= 3, pages  # the page where the function is, not the whole module
    edits = tool_arguments(episode.messages, "edit_file")

    def examples(text: str) -> list[str]:
        return [line for line in text.splitlines() if ">>>" in line]

    assert all(examples(e["old"]) == examples(e["new"]) for e in edits), edits  # a docstring is not code
    # `return value - 1` is also in a part of the module it never read: the tool said so, it took in more
    assert any(e["old"] == "    return value - 1" for e in edits) and edits[-1]["old"].count("\n") >= 3, edits


def _read_chars(episode: Episode, path: str) -> int:
    """How many characters read_file answered about `path` in a conversation."""
    asked = {c.id for m in episode.messages for c in m.tool_calls if c.name == "read_file"}
    asked &= {c.id for m in episode.messages for c in m.tool_calls if c.arguments.get("path") == path}
    return sum(len(m.content) for m in episode.messages if m.role == "tool" and m.tool_call_id in asked)


def test_a_test_in_a_long_class_and_a_function_deep_in_a_long_module_are_read_in_windows(
    tmp_path: Path,
) -> None:
    """A real agent reads the lines around what grep found, not page after page of a long file: the
    test's class header and the test, then the function the test calls."""
    root = make_library(tmp_path, ("src/shapes/core.py", "return value * 2", "return value * 2"))
    functions = [f"def filler_{n}(value):\n    return value * {n}\n\n\n" for n in range(400)]
    deep = (
        "".join(functions[:300]) + "def middle(value):\n    return value + 1\n\n\n" + "".join(functions[300:])
    )
    (root / "src/shapes/deep.py").write_text(deep)
    fillers = [f"\n    def test_filler_{n}(self):\n        self.assertTrue({n} >= 0)\n" for n in range(300)]
    (root / "tests/test_long.py").write_text(
        "import unittest\n\nfrom shapes import deep\n\n\nclass LongTest(unittest.TestCase):\n"
        "    maxDiff = None\n"
        f"{''.join(fillers[:150])}\n    def test_middle(self):\n        self.assertEqual(deep.middle(3), 2)\n"
        f"{''.join(fillers[150:])}"
    )
    assert len((root / "tests/test_long.py").read_text()) > 12_000
    episode = solve(root, "tests/test_long.py::LongTest::test_middle")
    assert episode.claim.startswith("Fixed `middle`"), episode.claim
    assert run_tests(root).returncode == 0
    reads = tool_arguments(episode.messages, "read_file")
    assert all(r.get("end_line") for r in reads if r.get("start_line", 1) > 1), reads  # windows, not pages
    # one first page (the imports) and two windows; the class alone is 19,000 characters
    assert _read_chars(episode, "tests/test_long.py") < 7_000, reads
    assert _read_chars(episode, "src/shapes/deep.py") < 3_000, reads
    # each candidate's re-run of the test asks for pass or fail and the line it failed at (a short
    # traceback), not a whole traceback per try
    reruns = [c["command"] for c in tool_arguments(episode.messages, "shell") if " -x " in c["command"]]
    assert reruns and all("--tb=short" in c for c in reruns), reruns


def test_a_mixin_test_is_found_in_its_base_class_and_the_class_attribute_names_the_function(
    tmp_path: Path,
) -> None:
    root = make_library(tmp_path, ("src/shapes/core.py", "return value * 2", "return value * 3"))
    episode = solve(root, "tests/test_shapes.py::DoubledTest::test_twice")
    assert episode.claim.startswith("Fixed `doubled`"), episode.claim
    assert run_tests(root).returncode == 0
    greps = tool_arguments(episode.messages, "grep")
    assert all("assertEqual" not in g["pattern"] and "FUNC" not in g["pattern"] for g in greps), greps


def test_a_bug_in_a_module_reached_through_another_is_found_by_tracing_the_test(tmp_path: Path) -> None:
    root = make_library(tmp_path, ("src/shapes/helpers.py", "return a * b", "return a // b"))
    assert run_tests(root, "tests/test_shapes.py::DoubledTest::test_value").returncode == 0  # same name
    episode = solve(root, "tests/test_shapes.py::BoxTest::test_value")
    assert episode.claim.startswith("Fixed") and "src/shapes/helpers.py" in episode.claim, episode.claim
    assert run_tests(root).returncode == 0
    commands = [c["command"] for c in tool_arguments(episode.messages, "shell")]
    assert any("settrace" in c and "BoxTest::test_value" in c for c in commands), commands


def test_a_compacted_conversation_starts_the_engineer_over_and_the_work_gets_done(tmp_path: Path) -> None:
    """Compacted every 16 turns or so (the older half dropped each time), the engineer starts over
    from what the turns left and the pinned state show (`memory.py`): the pages read, the tries put
    back (the pinned state lists every one), the try it never saw the outcome of. Started over from
    the workspace alone, it searched from the top each time and never finished (seed 5, 32 messages:
    300 replies); below about 12 turns between cuts no search this long gets anywhere."""
    project = generate_sample_project(tmp_path / "p", 5, bugs=4)
    responder = EngineerResponder.from_options({}, seed=project.seed)
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    episode = asyncio.run(
        drive(responder, project.path, project.task, system=prompt, env=FAST, compact_over=32)
    )
    assert any(m.content == COMPACTED for m in episode.messages), "the run was never compacted"
    assert episode.finished and episode.claim.startswith("Fixed"), episode.claim
    assert run_tests(project.path).returncode == 0


def test_two_bugs_in_one_function_are_fixed_one_test_at_a_time(tmp_path: Path) -> None:
    (tmp_path / "spread.py").write_text(
        "def spread(value):\n    low = value - 2\n    high = value + 2\n    return low, high\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_spread.py").write_text(
        "from spread import spread\n\n\ndef test_low():\n    assert spread(5)[0] == 4\n\n\n"
        "def test_high():\n    assert spread(5)[1] == 6\n"
    )
    responder = EngineerResponder.from_options({}, seed=1)
    task = "The tests fail (`python -m pytest -q`). Make them pass."
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST))
    # fixing `low` leaves test_high failing on the same function: a step forward, not a wrong guess
    assert episode.claim.startswith("Fixed") and episode.claim.count("`spread`") == 2, episode.claim
    assert run_tests(tmp_path).returncode == 0


def test_a_kept_fix_that_was_the_wrong_one_of_two_is_reconsidered_from_the_line_as_it_was(
    tmp_path: Path,
) -> None:
    """`max` -> `min` at the line's first call passes test_below and breaks nothing (its other tests
    failed already), so it is kept; the right repair of the line as it was (`max(value` -> `min(value`)
    is one token from the original and two from the kept fix: the engineer tries it for the next test."""
    source = "def bound(value, low, high):\n    return max(low, max(value, high))\n"
    (tmp_path / "limits.py").write_text(source)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_limits.py").write_text(
        "from limits import bound\n\n\ndef test_below():\n    assert bound(0, 1, 9) == 1\n"
        "\n\ndef test_inside():\n    assert bound(5, 1, 9) == 5\n"
        "\n\ndef test_above():\n    assert bound(12, 1, 9) == 9\n"
    )
    responder = EngineerResponder.from_options({}, seed=1)
    task = "The tests fail (`python -m pytest -q`). Make them pass."
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST))
    assert episode.claim.startswith("Fixed"), episode.claim
    assert "`return min(low, max(value, high))` -> `return max(low, min(value, high))`" in episode.claim
    assert run_tests(tmp_path).returncode == 0


def test_a_fix_that_passes_its_one_test_but_breaks_another_is_put_back(tmp_path: Path) -> None:
    """A task's command that runs one test cannot see what an edit breaks elsewhere: the engineer
    runs the whole suite too, and a candidate that fails a test that passed before is not kept."""
    (tmp_path / "clip.py").write_text(
        "def head(items, count=0):\n"
        "    everything = count == 0\n"
        "    if everything:\n"
        "        return list(items)\n"
        "    return list(items)[: count - 1]\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_clip.py").write_text(
        "from clip import head\n\n\ndef test_some():\n    assert head([1, 2, 3], 3) == [1, 2, 3]\n\n\n"
        "def test_all():\n    assert head([1, 2, 3]) == [1, 2, 3]\n"
    )
    assert run_tests(tmp_path, "tests/test_clip.py::test_all").returncode == 0
    episode = solve(tmp_path, "tests/test_clip.py::test_some")
    assert episode.claim.startswith("Fixed"), episode.claim
    assert run_tests(tmp_path).returncode == 0  # `count != 0` passed test_some alone and broke test_all
    commands = [c["command"] for c in tool_arguments(episode.messages, "shell")]
    assert "python -m pytest -q --tb=no -rf --disable-warnings" in commands, commands


def test_what_the_whole_suite_fails_already_is_run_before_the_first_edit_and_a_fix_is_never_undone(
    tmp_path: Path,
) -> None:
    """With a task's command that runs one test, the whole suite is run before the first edit and once
    after a fix that passes; a test that failed before too (not the task's) does not cost the fix, and
    learning what failed before never undoes the fix (a compaction between the undo and the redo
    lost it, and the undo read as an edit tried in vain, which later attempts skipped: seed 18's
    more-itertools)."""
    wide = "python -m pytest -q --tb=no -rf --disable-warnings"
    for name, other in (("clean", "1"), ("red-elsewhere", "2")):
        root = tmp_path / name
        (root / "tests").mkdir(parents=True)
        (root / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef one():\n    return 1\n")
        (root / "tests" / "test_calc.py").write_text(
            "from calc import add, one\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
            f"def test_one():\n    assert one() == {other}\n"
        )
        episode = solve(root, "tests/test_calc.py::test_add")
        assert episode.claim.startswith("Fixed"), (name, episode.claim)
        assert run_tests(root, "tests/test_calc.py::test_add").returncode == 0, name
        commands = [c["command"] for c in tool_arguments(episode.messages, "shell")]
        assert commands.count(wide) == 2, (name, commands)
        edits = tool_arguments(episode.messages, "edit_file")
        fix = [e for e in edits if "a + b" in e["new"]]
        assert len(fix) == 1 and not any("a + b" in e["old"] for e in edits), (name, edits)
        assert tried_edits(episode.messages) == [], name


def test_the_whole_suite_check_after_a_fix_is_on_by_default_and_off_with_wide_check_0(
    tmp_path: Path,
) -> None:
    """`engineer:wide_check=0` (for a fleet whose every task's suite holds the other tasks' bugs, where
    the check costs two whole-suite runs a task and proves nothing) fixes the bug without running the
    whole suite; without the option the whole suite is run before the first edit and after the fix."""
    wide = "python -m pytest -q --tb=no -rf --disable-warnings"
    for name, options, runs in (("default", {}, 2), ("off", {"wide_check": "0"}, 0)):
        root = tmp_path / name
        (root / "tests").mkdir(parents=True)
        (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        (root / "tests" / "test_calc.py").write_text(
            "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
        )
        episode = solve(root, "tests/test_calc.py::test_add", options)
        assert episode.claim.startswith("Fixed"), (name, episode.claim)
        assert run_tests(root).returncode == 0, name
        commands = [c["command"] for c in tool_arguments(episode.messages, "shell")]
        assert commands.count(wide) == runs, (name, commands)


def test_a_whole_suite_whose_output_was_cut_is_compared_by_its_count_of_failures() -> None:
    """Many failures elsewhere (a fleet's task beside the other tasks' bugs) make a long output that
    the tool cuts in the middle: the names a cut leaves shift when a fix makes one fewer fail, which
    must not read as a test it broke (a 128-worker fleet put back every right fix and left tasks undone)."""

    def cut(failing: list[str]) -> reading.TestReport:
        lines = [f"FAILED tests/test_m.py::{name} - AssertionError" for name in failing]
        shown = [*lines[:3], "[... cut ...]", *lines[-3:]]
        return reading.read_pytest("\n".join([*shown, f"{len(failing)} failed, 9 passed in 0.5s"]), 1)

    names = [f"test_{n}" for n in range(40)]
    before, fixed = cut(names), cut(names[1:])  # test_0 fixed: test_1 is now shown at the top
    assert not fixed.breaks_more_than(before)
    assert cut([*names, "test_new"]).breaks_more_than(before)  # one more failing: broken
    whole = reading.read_pytest("FAILED tests/test_m.py::test_a - x\n1 failed, 9 passed in 0.5s", 1)
    swapped = reading.read_pytest("FAILED tests/test_m.py::test_b - x\n1 failed, 9 passed in 0.5s", 1)
    assert swapped.breaks_more_than(whole)  # every failure listed: a new name is a test it broke
    # pytest counts each failed subtest in "N failed" and lists it as SUBFAILED(params): a whole
    # listing still, and a new name in it is a test the fix broke (a fix was kept that broke one)
    subtests = [f"SUBFAILED(args=({n}, Decimal('1.0'))) tests/test_m.py::test_repr" for n in range(3)]
    before = reading.read_pytest("\n".join([*subtests, "FAILED tests/test_m.py::test_a - x", "4 failed"]), 1)
    after = reading.read_pytest("FAILED tests/test_m.py::test_count - ValueError\n1 failed, 9 passed", 1)
    assert before.failed == ("tests/test_m.py::test_repr", "tests/test_m.py::test_a")
    assert after.breaks_more_than(before)
    labelled = "SUBFAILED[label] (i=0) t.py::T::test_a - x\nSUBFAILED[only msg] t.py::T::test_b\n2 failed"
    assert reading.read_pytest(labelled, 1).listed_count == 2  # pytest 9's forms with a subTest message


def test_an_edit_refused_only_in_words_is_taken_as_refused() -> None:
    """Over OpenAI's chat wire a tool's error loses its mark: the engineer reads the answer's words, as a
    model does, and neither believes its edit was made nor goes on from it."""
    desk = Desk(Brief.from_task("Fix it."))
    for answer, made in (
        ("edit_file: `old` found 2 times; include more context to make it unique in m.py", False),
        ("edit_file: `old` not found in m.py", False),
        ("edited m.py", True),
    ):
        desk.files["m.py"] = ["x = 1", "y = 0", "x = 1"]
        steps = desk.edit("m.py", "y = 0", "y = 1", why="")
        assert isinstance(next(steps), Edit)
        with pytest.raises(StopIteration) as done:
            steps.send(Observation(text=answer))
        assert done.value.value is made, answer
        assert desk.files.get("m.py", ["x = 1", "y = 0", "x = 1"])[1] == ("y = 1" if made else "y = 0")


def test_in_a_long_class_the_method_that_raised_is_tried_before_the_others() -> None:
    """A test that calls a class blames the whole class; the traceback says which method raised, and a
    developer looks there first (before, the class's lines were tried in reading order)."""
    others = [f"    def method_{n}(self, value):\n        return value + {n}\n\n" for n in range(20)]
    source = (
        "class Range:\n    EMPTY = 0\n\n"
        + "".join(others)
        + "    def __init__(self, *args):\n        count = len(args)\n        if count == 1:\n"
        "            self.stop = args[0]\n        elif count == 1:\n"
        "            self.start, self.stop = args\n        else:\n            raise TypeError(count)\n"
    )
    lines = source.split("\n")
    raised = next(i for i, line in enumerate(lines) if "raise TypeError" in line)
    found = candidates(lines, range(1, len(lines)), blamed=[raised])
    init = lines.index("    def __init__(self, *args):")
    fix = lines.index("        elif count == 1:")
    first_other = next(n for n, c in enumerate(found) if c.index < init)
    fixing = next(n for n, c in enumerate(found) if c.index == fix and "count == 2" in c.line)
    assert fixing < first_other < len(found), found  # 20 methods of candidates come after it


def test_the_conditions_a_raise_in_an_else_went_through_are_tried_nearest_first() -> None:
    """An exception raised in an `else:` went through every condition of its chain: a developer
    reads those first, the nearest first, before the other lines of the method."""
    source = (
        "def span(*args):\n    count = len(args)\n    start = 0\n    step = 1\n"
        "    if count == 1:\n        (stop,) = args\n    elif count == 2:\n        start, stop = args\n"
        "    elif count == 2:\n        start, stop, step = args\n    elif count == 0:\n"
        "        raise TypeError('no arguments')\n    else:\n        raise TypeError(count)\n"
        "    return start, stop, step\n"
    )  # the second `count == 2` should be `count == 3`
    lines = source.split("\n")
    raised = lines.index("        raise TypeError(count)")
    found = candidates(lines, range(1, len(lines)), blamed=[raised])
    guards = [c.index for c in found if c.index != raised][:6]
    conditions = [i for i, line in enumerate(lines) if line.lstrip().startswith(("if ", "elif "))]
    assert set(guards) <= set(conditions) and guards == sorted(guards, reverse=True), found
    fixing = next(n for n, c in enumerate(found) if c.index == conditions[2] and "count == 3" in c.line)
    first_other = next(n for n, c in enumerate(found) if c.index not in (raised, *conditions))
    assert fixing < first_other and fixing <= 6, found
    # a `not` put before a condition is the least likely repair of each: the others go first
    negations = [n for n, c in enumerate(found) if " not " in c.line]
    assert negations and min(negations) > fixing, found


def test_a_unittest_tests_traceback_blames_the_raise_and_its_conditions_come_first(tmp_path: Path) -> None:
    """pytest heads a unittest test's failure `Class.test`: read by the test's name alone, the section
    was not found, nothing was blamed, and the method's lines were tried from the top."""
    padding = "".join(f"    offset_{n} = {n} + 1\n" for n in range(12))  # lines with repairs of their own
    (tmp_path / "span.py").write_text(
        "def span(*args):\n" + padding + "    count = len(args)\n    if count == 1:\n        (stop,) = args\n"
        "        start, step = 0, 1\n    elif count == 2:\n        start, stop = args\n        step = 1\n"
        "    elif count == 2:\n        start, stop, step = args\n    else:\n        raise TypeError(count)\n"
        "    return list(range(start, stop, step))\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_span.py").write_text(
        "from unittest import TestCase\n\nfrom span import span\n\n\nclass SpanTests(TestCase):\n"
        "    def test_three(self):\n        self.assertEqual(span(0, 6, 2), [0, 2, 4])\n"
    )
    episode = solve(tmp_path, "tests/test_span.py::SpanTests::test_three")
    assert episode.claim.startswith("Fixed") and run_tests(tmp_path).returncode == 0, episode.claim
    tries = [e["new"] for e in tool_arguments(episode.messages, "edit_file")]
    assert len(tries) <= 8 and not any("offset_" in t for t in tries), tries


def solve_in_one_attempt(
    root: Path, files: dict[str, str], bug: tuple[str, str, str], test_id: str
) -> Episode:
    """`files` written under `root` with `bug` (path, text, its replacement) in, then the engineer on
    the failing `test_id` within an attempt's 60 replies."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    path, old, new = bug
    (root / path).write_text((root / path).read_text().replace(old, new))
    assert run_tests(root).returncode == 1
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    return asyncio.run(drive(responder, root, task, system=prompt, env=FAST, max_replies=60))


MEMO = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    "src/memo/__init__.py": (
        "from memo._wrappers import wrap\n\n\n"
        "class Store:\n"
        "    def __init__(self, size):\n"
        "        self.size = size\n"
        "        self.data = {}\n"
        "        self.reads = self.writes = self.total = 0\n\n"
        "    def get(self, key, default=None):\n"
        "        self.reads = self.reads + 1\n"
        "        if self.reads > 1000000:\n"
        "            self.reads = 0\n"
        "        found = self.data.get(key, default)\n"
        "        self.last = found if found is not None else default\n"
        "        return found\n\n"
        "    def put(self, key, value):\n"
        "        while len(self.data) >= self.size > 0:\n"
        "            self.data.pop(next(iter(self.data)))\n"
        "        self.writes = self.writes + 1\n"
        "        self.total = self.total + len(str(key)) * 1\n"
        "        if self.total > 1000000 or self.writes < 0:\n"
        "            self.total = self.writes = 0\n"
        "        self.data[key] = value\n\n\n"
        "def memoize(size=8):\n"
        "    def decorator(func):\n"
        "        return wrap(func, Store(size))\n\n"
        "    return decorator\n"
    ),
    "src/memo/_wrappers.py": (
        "def wrap(func, store):\n"
        "    counts = [0, 0]\n\n"
        "    def wrapper(key):\n"
        "        value = store.get(key)\n"
        "        if value is None:\n"
        "            counts[1] += 1\n"
        "            value = func(key)\n"
        "            store.put(key, value)\n"
        "        else:\n"
        "            counts[0] += 1\n"
        "        return value\n\n"
        "    wrapper.info = lambda: tuple(counts)\n"
        "    return wrapper\n"
    ),
    "tests/test_memo.py": (
        "from memo import memoize\n\n\n"
        "@memoize(size=4)\n"
        "def square(x):\n"
        "    return x * x\n\n\n"
        "def test_info():\n"
        "    assert square(3) == 9 and square(3) == 9\n"
        "    assert square.info() == (1, 1)\n"
    ),
}


def test_the_lines_a_traced_test_ran_are_tried_as_it_called_them_not_file_by_file(tmp_path: Path) -> None:
    """The test calls what a decorator from one module returned, and the bug is there, in a module the
    package imports; the decorator's own module runs many lines of bookkeeping a level further
    down. Tried file by file, those come first and the attempt's turns run out; stepping into calls,
    the function the test called comes first."""
    bug = ("src/memo/_wrappers.py", "counts[0] += 1", "counts[0] += 2")
    episode = solve_in_one_attempt(tmp_path, MEMO, bug, "tests/test_memo.py::test_info")
    assert episode.claim.startswith("Fixed") and "_wrappers.py" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    edits = tool_arguments(episode.messages, "edit_file")
    assert len(edits) <= 30 and not any("self." in e["old"] for e in edits), edits  # `Store`: untried


CONFIG_LINES = "".join(f"        self.k{n} = options.get('k{n}', {n}) * 2 + {n % 5}\n" for n in range(36))
ENGINE = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    "src/eng/__init__.py": "",
    "src/eng/config.py": (
        "class Config:\n    def __init__(self, options):\n        self.rate = options.get('rate', 1)\n"
        + CONFIG_LINES
    ),
    "src/eng/engine.py": (
        "def run(config, values):\n"
        "    return sum(_adjust(value, config.rate) for value in values)\n\n\n"
        "def _adjust(value, rate):\n"
        "    return _bound(value * rate, 0)\n\n\n"
        "def _bound(x, lo):\n"
        "    return x if x > lo else lo\n"
    ),
    "tests/test_engine.py": (
        "from eng import engine\nfrom eng.config import Config\n\n\n"
        "def test_run():\n    assert engine.run(Config({'rate': 3}), [1, 2, 3]) == 18\n"
    ),
}


def test_what_ran_below_the_suspected_function_is_tried_before_a_big_call_the_test_made_itself(
    tmp_path: Path,
) -> None:
    """The test builds a `Config` (many lines, one call below the test) and calls `run`, whose bug is
    two calls further down: what ran below the suspect comes before what the test called itself."""
    bug = ("src/eng/engine.py", "x if x > lo", "x if x < lo")
    episode = solve_in_one_attempt(tmp_path, ENGINE, bug, "tests/test_engine.py::test_run")
    assert episode.claim.startswith("Fixed") and "src/eng/engine.py" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    edits = tool_arguments(episode.messages, "edit_file")
    assert len(edits) <= 20, edits  # 13: `run`, `_adjust`, then `_bound`
    assert not any(e["path"] == "src/eng/config.py" for e in edits), edits


STEPS = {
    "assert": (
        "from window import window\n\n\n"
        "def test_window():\n"
        "    assert window([1, 2, 3], 2)[0] == [2, 3]\n"
        "    assert window([5], 3)[1] == 5\n"
    ),
    "unittest": (  # its assertions fail in `unittest`: the test's own line is the last frame in its file
        "import unittest\n\nfrom window import window\n\n\n"
        "class WindowTest(unittest.TestCase):\n"
        "    def test_window(self):\n"
        "        self.assertEqual(window([1, 2, 3], 2)[0], [2, 3])\n"
        "        self.assertEqual(window([5], 3)[1], 5)\n"
    ),
}


@pytest.mark.parametrize("style", sorted(STEPS))
def test_an_edit_that_gets_a_test_further_is_a_step_forward(tmp_path: Path, style: str) -> None:
    """The test runs into two bugs, one assertion after the other, so no one-token edit makes it pass:
    an edit after which it fails at a later line of its own (and nothing else breaks) is kept, and
    the next fixes the second bug."""
    (tmp_path / "window.py").write_text(
        "def window(values, size):\n"
        "    kept = []\n"
        "    for value in values:\n"
        "        kept.append(value * 1)\n"
        "        if len(kept) >= size:\n"
        "            kept.pop(0)\n"
        "    return kept, sum(kept[1:])\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_window.py").write_text(STEPS[style])
    responder = EngineerResponder.from_options({}, seed=1)
    task = "The tests fail (`python -m pytest -q`). Make them pass."
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST))
    assert episode.claim.startswith("Fixed") and episode.claim.count("`window`") == 2, episode.claim
    assert run_tests(tmp_path).returncode == 0


def test_code_after_a_docstring_whose_end_was_not_read_is_not_taken_for_prose() -> None:
    """A function deep in a long module is read a window at a time: the first window ends inside its
    docstring, the next (around a traced line) starts after it. The closing quotes lie in the lines
    not read; read with those as blank lines, the quotes paired up across the gap, the bug's line was
    prose and had no candidate (more-itertools' `sort_together`, seed 18)."""
    source = (
        ["def sort_together(iterables, key_list=(0,)):", '    """Sort them together.', ""]
        + [f"    Line {n} of a long docstring." for n in range(40)]
        + ['    """', "    key_list = list(key_list)", "    offset = key_list[1]", "    return offset", ""]
        + ["", "def other(value):", '    """The next docstring: the second window ends in it,', "    too."]
    )  # counted with the lines not read as blanks, the quotes pair up and tokenize without an error
    read = set(range(0, 30)) | set(range(44, len(source)))  # two windows; 30-43 (with `"""`) not read
    lines = [line if i in read else "" for i, line in enumerate(source)]
    bug = source.index("    offset = key_list[1]")
    assert "offset = key_list[0]" not in {c.line.strip() for c in candidates(lines, [bug])}  # as before
    fixes = {c.line.strip() for c in candidates(lines, [bug], known=read)}
    assert "offset = key_list[0]" in fixes, fixes
    assert not candidates(lines, range(3, 30), known=read)  # the docstring read is still prose


def test_a_failure_moved_within_one_statement_is_not_a_step_forward(tmp_path: Path) -> None:
    """An `assertEqual(` spread over lines fails at its first line; an edit that makes the call on
    its second line raise instead (`* repeat` -> `// repeat`: a TypeError) is no further on, and was
    kept as a step, so that the right fix, tried on top of it, never passed (more-itertools'
    `gray_product`, seed 18)."""
    (tmp_path / "spread.py").write_text(
        "def spread(items, repeat=1):\n"
        "    everything = tuple(items) * repeat\n"
        "    return everything[: len(everything) - 1]\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_spread.py").write_text(
        "from unittest import TestCase\n\nfrom spread import spread\n\n\n"
        "class SpreadTests(TestCase):\n"
        "    def test_basic(self):\n"
        "        self.assertEqual(\n"
        "            spread((1, 2), repeat=2),\n"
        "            (1, 2, 1, 2),\n"
        "        )\n"
    )
    episode = solve(tmp_path, "tests/test_spread.py::SpreadTests::test_basic")
    edits = tool_arguments(episode.messages, "edit_file")
    assert any("// repeat" in e["new"] for e in edits), edits  # the misleading edit was tried
    assert episode.claim.startswith("Fixed") and "// repeat" not in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    assert "// repeat" not in (tmp_path / "spread.py").read_text()


def test_a_try_whose_outcome_a_compaction_hid_is_put_back_before_the_search_starts_over(
    tmp_path: Path,
) -> None:
    """A compaction that lands between a try's edit and its test run leaves the edit in the file and
    drops the turns that said why: the engineer, starting over, read the wrong try as the code and
    shipped it beside the fix (cachetools' LFUCache, seed 18: `-= 0` -> `+= 0` taken for the code)."""
    source = (
        "def total(values, start=0):\n    result = start\n    count = 0\n    for value in values:\n"
        "        count = count + 1\n        result = result - value\n    return result\n"
    )
    task = "Task T1: Fix it\nDone when `python -m pytest -q tests/test_calc.py::test_total` passes."
    runs = {}
    for name in ("whole", "compacted"):
        root = tmp_path / name
        (root / "tests").mkdir(parents=True)
        (root / "calc.py").write_text(source)
        (root / "tests" / "test_calc.py").write_text(
            "from calc import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n"
        )
        responder = EngineerResponder.from_options({}, seed=1)
        whole = runs["whole"].messages if runs else ()
        # compacted once the first try's edit is answered: its test run is the next turn
        at = next((i + 1 for i, m in enumerate(whole) if m.content.startswith("Maybe a ")), 0)
        runs[name] = asyncio.run(
            drive(responder, root, task, system="Agent: Ada\n", env=FAST, compact_over=at, compact_once=True)
        )
    assert not any(m.content == COMPACTED for m in runs["whole"].messages)
    episode = runs["compacted"]
    assert any(m.content == COMPACTED for m in episode.messages), "the run was never compacted"
    assert any(m.content.startswith("Putting back my last try") for m in episode.messages)
    assert episode.claim.startswith("Fixed"), episode.claim
    fixed = source.replace("result - value", "result + value")
    assert (tmp_path / "compacted" / "calc.py").read_text() == fixed  # and nothing else changed


@pytest.mark.parametrize("count", [2, 9, 10, 12, 19, 100, 123])
def test_an_edit_whose_text_is_found_many_times_takes_in_more_lines_and_keeps_the_file(count: int) -> None:
    """ "found 12 times" is the same refusal as "found 2 times": the text is right but not unique, so
    the edit takes in more lines. Read as any other refusal, the file was forgotten and every later
    candidate of the stage skipped (more-itertools' `gray_product`, seed 18: `while True:` is in
    more.py 12 times, and the bug's line after it was never tried)."""
    desk = Desk(Brief.from_task("Fix it."))
    desk.files["m.py"] = ["x = 1", "y = 0", "x = 1"]
    steps = desk.edit("m.py", "x = 1", "x = 2", why="")
    assert isinstance(next(steps), Edit)
    answer = f"ValueError: old text found {count} times in m.py; it must occur exactly once"
    with pytest.raises(StopIteration) as done:
        steps.send(Observation(text=answer, ok=False))
    assert done.value.value is False
    assert desk.files["m.py"] == ["x = 1", "y = 0", "x = 1"]  # known still: the caller takes in more


def test_a_class_no_traceback_blames_is_traced_before_its_lines_are_tried(tmp_path: Path) -> None:
    """A test that calls a class and fails on its own assertion blames all of the class: its many
    methods took an attempt's turns before the trace showed the helper one of them ran (cachetools'
    `TLRUCache`, seed 18, whose bug was in the `_Timer.__exit__` its `with` ran). The trace comes
    first; what it shows ran is tried, from the class's own lines down to what they call."""
    methods = "".join(
        f"    def limit_{n}(self, value):\n        return min(value, {n + 2})\n\n" for n in range(12)
    )
    (tmp_path / "clock.py").write_text(
        "class Ticks:\n    def __init__(self):\n        self.now = 0\n\n"
        "    def tick(self):\n        self.now += 2\n\n\n"
        f"class Counter:\n    START = 0\n\n{methods}"
        "    def __getitem__(self, times):\n        ticks = Ticks()\n        for _ in range(times):\n"
        "            ticks.tick()\n        return ticks.now\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_clock.py").write_text(
        "from clock import Counter\n\n\ndef test_count():\n    assert Counter()[3] == 3\n"
    )
    episode = solve(tmp_path, "tests/test_clock.py::test_count")
    assert episode.claim.startswith("Fixed") and "self.now += 1" in episode.claim, episode.claim
    calls = [c for m in episode.messages for c in m.tool_calls if c.name in ("shell", "edit_file")]
    traced = [i for i, c in enumerate(calls) if "settrace" in str(c.arguments.get("command", ""))]
    tried = [i for i, c in enumerate(calls) if c.name == "edit_file"]
    assert traced and tried[0] > traced[0], "a line was tried before the trace (or none was traced)"
    assert run_tests(tmp_path).returncode == 0


def _busy(name: str, lines: int) -> str:
    """A helper of many one-token-repairable lines."""
    body = "".join(f"    total = total + (x if x > {n} else {n + 1}) * {n % 3 + 1}\n" for n in range(lines))
    loop = textwrap.indent(body, "    ")
    return f"def {name}(items):\n    total = 0\n    for x in items:\n{loop}    return total\n\n\n"


DISPATCH = {
    "pick.py": (
        _busy("_plain", 14) + _busy("_weighted", 14) + "def _counted(items, counts):\n"
        "    out = []\n"
        "    remaining = 0\n\n"
        "    def feed(i):\n"
        "        nonlocal remaining\n"
        "        remaining -= i + 1\n"
        "        return remaining\n\n"
        "    for item, count in zip(items, counts):\n"
        "        remaining = count\n"
        "        out.append((item, -feed(1)))\n"
        "    return out\n\n\n"
        "def pick(items, weights=None, counts=None):\n"
        "    if weights is not None and counts is not None:\n"
        "        raise TypeError('weights or counts, not both')\n"
        "    if weights is not None:\n"
        "        return _weighted(items)\n"
        "    if counts is not None:\n"
        "        return _counted(items, counts)\n"
        "    return _plain(items)\n"
    ),
    "tests/test_pick.py": (
        "from pick import pick\n\n\n"
        "def test_counts():\n    assert pick(['a', 'b'], counts=[3, 5]) == [('a', -1), ('b', -3)]\n"
    ),
}


def test_what_a_suspect_hands_its_work_to_is_the_helper_the_test_ran_not_every_function_it_calls(
    tmp_path: Path,
) -> None:
    """The suspect dispatches to one of three helpers of its file by its arguments, and the bug is in a
    function nested in the one the test ran (more-itertools' `sample` -> `_sample_counted`'s `feed`,
    seeds 17 and 19): the helpers the test did not run are not tried before it (their many lines took
    the attempts' turns), and a `not` before each of the suspect's lines waits for the trace."""
    bug = ("pick.py", "remaining -= i + 1", "remaining -= i - 1")
    episode = solve_in_one_attempt(tmp_path, DISPATCH, bug, "tests/test_pick.py::test_counts")
    assert episode.claim.startswith("Fixed") and "remaining -= i + 1" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    edits = tool_arguments(episode.messages, "edit_file")
    assert not any("total" in e["old"] for e in edits), edits  # `_plain`, `_weighted`: not run, untried


HOOKS = "".join(f"    if hooks.get('h{n}'):\n        hooks['h{n}'](out)\n" for n in range(16))
NOTS_FIRST = {
    "stock.py": (
        "def _counted(items, counts, hooks):\n"
        "    out = []\n"
        "    remaining = 0\n\n"
        "    def feed(i):\n"
        "        nonlocal remaining\n"
        "        remaining -= i + 1\n"
        "        return remaining\n\n"
        f"{HOOKS}"
        "    for item, count in zip(items, counts):\n"
        "        remaining = count\n"
        "        out.append((item, -feed(1)))\n"
        "    return out\n\n\n"
        "def stock(items, counts, **hooks):\n"
        "    return _counted(items, counts, hooks)\n"
    ),
    "tests/test_stock.py": (
        "from stock import stock\n\n\n"
        "def test_stock():\n    assert stock(['a', 'b'], [3, 5]) == [('a', -1), ('b', -3)]\n"
    ),
}


def test_a_not_before_a_line_waits_until_what_ran_below_the_suspect_was_tried(tmp_path: Path) -> None:
    """A `not` fits almost any condition: the helper's sixteen `if hooks.get(...)` lines (one call
    below the suspect) each take one, and tried first they took the attempt's turns before the bug
    two calls down (cachetools' `_cached_wrapper` and `Cache` properties, seed 20: twelve of
    seventeen tries were a `not`)."""
    bug = ("stock.py", "remaining -= i + 1", "remaining -= i - 1")
    episode = solve_in_one_attempt(tmp_path, NOTS_FIRST, bug, "tests/test_stock.py::test_stock")
    assert episode.claim.startswith("Fixed") and "remaining -= i + 1" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    edits = tool_arguments(episode.messages, "edit_file")
    assert not any("if not hooks" in e["new"] for e in edits), edits


def test_a_dropped_not_in_the_suspects_own_lines_is_tried_before_the_helpers_it_calls(tmp_path: Path) -> None:
    """The reviewer's counter-case to deferring every `not`: the suspect's own `if not flag:` lost its
    `not`, and it calls a helper of many lines. Its own `not`s come with its own lines, before the
    trace; only those found after the trace wait."""
    calc = _busy("_sum", 14) + (
        "def check(items, flag):\n    total = _sum(items)\n    if not flag:\n        return total\n"
        "    return total * 2\n"
    )
    scope: dict[str, Any] = {}
    exec(calc, scope)  # the expected values, from the code as it was
    expected = (scope["check"]([1, 2], False), scope["check"]([1, 2], True))
    files = {
        "calc.py": calc,
        "tests/test_calc.py": (
            "from calc import check\n\n\n"
            f"def test_check():\n    assert (check([1, 2], False), check([1, 2], True)) == {expected}\n"
        ),
    }
    bug = ("calc.py", "    if not flag:", "    if flag:")
    episode = solve_in_one_attempt(tmp_path, files, bug, "tests/test_calc.py::test_check")
    assert episode.claim.startswith("Fixed") and "if not flag:" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0
    edits = tool_arguments(episode.messages, "edit_file")
    assert not any("total = total" in e["old"] for e in edits), edits  # `_sum`'s lines: not reached


def test_a_test_inherited_from_a_mixin_in_another_module_is_read_where_its_traceback_runs(
    tmp_path: Path,
) -> None:
    """cachetools, seed 21: `TLRUCacheTest::test_delete` comes from `CacheTestMixin` in
    `tests/__init__.py`; its own file does not define it, and every attempt gave up at once ("I could
    not make the tests pass"). Its traceback runs through the mixin's file: it is read there."""
    (tmp_path / "counter.py").write_text(
        "class Counter:\n    def __init__(self):\n        self.total = 0\n\n"
        "    def add(self, n):\n        self.total -= n\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text(
        "class CounterMixin:\n    def test_count(self):\n        counter = self.Counter()\n"
        "        counter.add(2)\n        counter.add(3)\n        self.assertEqual(5, counter.total)\n"
    )
    (tmp_path / "tests" / "test_counter.py").write_text(
        "import unittest\n\nfrom counter import Counter\n\nfrom . import CounterMixin\n\n\n"
        "class CounterTest(unittest.TestCase, CounterMixin):\n    Counter = Counter\n"
    )
    test_id = "tests/test_counter.py::CounterTest::test_count"
    assert run_tests(tmp_path, test_id).returncode == 1
    episode = solve(tmp_path, test_id)
    assert episode.claim.startswith("Fixed") and "self.total += n" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0


SPAN = {
    "span.py": (
        "class Span:\n"
        "    def __init__(self, start, stop, step=1):\n"
        "        if step == 0:\n"
        '            raise ValueError("step must not be zero")\n'
        "        self.start = start\n"
        "        self.stop = stop\n"
        "        self.step = step\n"
        "        self.growing = step > 0\n"
        "        self.length = max(0, (stop - start + step - (1 if step > 0 else -1)) // step)\n"
        "        self.last = start + (self.length - 1) * step\n\n"
        "    def __len__(self):\n"
        "        return self.length\n\n"
        "    def __contains__(self, value):\n"
        "        try:\n"
        "            self.index(value)\n"
        "        except ValueError:\n"
        "            return False\n"
        "        return True\n\n"
        "    def index(self, value):\n"
        "        if self.growing:\n"
        "            if self.start <= value < self.stop:\n"
        "                q, r = divmod(value - self.start, self.step)\n"
        "                if r == 0:\n"
        "                    return q\n"
        "        else:\n"
        "            if self.start >= value > self.stop:\n"
        "                q, r = divmod(self.start - value, -self.step)\n"
        "                if r == 0:\n"
        "                    return q\n"
        '        raise ValueError(f"{value} is not in the span")\n'
    ),
    "tests/__init__.py": "",
    "tests/test_span.py": (
        "import pytest\n\n"
        "from span import Span\n\n\n"
        "class TestSpan:\n"
        "    def test_len(self):\n"
        "        assert len(Span(0, 10, 3)) == 4\n"
        "        assert len(Span(10, 0, -3)) == 4\n\n"
        "    def test_last(self):\n"
        "        assert Span(10, 0, -3).last == 1\n\n"
        "    def test_growing(self):\n"
        "        assert 6 in Span(0, 10, 3)\n"
        "        assert 7 not in Span(0, 10, 3)\n"
        "        assert Span(0, 10, 3).index(9) == 3\n\n"
        "    def test_zero_step(self):\n"
        "        with pytest.raises(ValueError):\n"
        "            Span(0, 10, 0)\n\n"
        "    def test_shrinking(self):\n"
        "        assert [v for v in range(11) if v in Span(10, 0, -3)] == [1, 4, 7, 10]\n"
    ),
}


def test_the_lines_only_the_failing_test_of_a_class_ran_are_tried_first(tmp_path: Path) -> None:
    """A class's failing test runs many lines its passing tests run too (its `__init__`), and a few
    they do not (a branch of `index`): the bug is likelier there (spectrum-based fault localization).
    The trace runs the class's other tests too, and those lines are tried first (more-itertools'
    `numeric_range.index`, seeds 20 and 22: every attempt spent its replies on `__init__`)."""
    bug = ("span.py", "divmod(self.start - value", "divmod(self.start + value")
    episode = solve_in_one_attempt(tmp_path, SPAN, bug, "tests/test_span.py::TestSpan::test_shrinking")
    assert episode.claim.startswith("Fixed"), episode.claim
    assert run_tests(tmp_path).returncode == 0
    traces = [c for c in tool_arguments(episode.messages, "shell") if "settrace" in c["command"]]
    assert traces and traces[0]["command"].split()[-1] == "tests/test_span.py::TestSpan", traces
    tries = [e["old"] for e in tool_arguments(episode.messages, "edit_file")]
    branch = ("self.start >= value > self.stop", "divmod(self.start + value")
    assert tries and any(line in tries[0] for line in branch), tries[:3]


def test_an_earlier_attempts_try_on_a_line_only_the_failing_test_ran_is_tried_again_first(
    tmp_path: Path,
) -> None:
    """An earlier attempt's try that did not pass its test goes last, but not on a line only the
    failing test of a class ran (there: after the fresh tries on such lines, before all the others): a
    second bug, fixed since by another task's merge, may have made it fail then (cachetools'
    `fifo_cache`, seed 22: the first attempt's right fix was put back while the `misses` bug of
    `_decorators.py` failed the same test; the next three attempts, on a tip with that fixed, tried
    it last and ran out of replies)."""
    bug = ("span.py", "divmod(self.start - value", "divmod(self.start + value")
    for name, text in SPAN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace(*bug[1:]) if name == bug[0] else text)
    line = "q, r = divmod(self.start {} value, -self.step)"
    note = tried_note([TriedEdit("span.py", line.format("+"), line.format("-"))])
    test_id = "tests/test_span.py::TestSpan::test_shrinking"
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes.\n\n{note}"
    responder = EngineerResponder.from_options({}, seed=1)
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    episode = asyncio.run(drive(responder, tmp_path, task, system=prompt, env=FAST, max_replies=60))
    assert episode.claim.startswith("Fixed"), episode.claim
    tries = [m.content for m in episode.messages if m.content.startswith("Maybe a ")]
    fix = "`q, r = divmod(self.start + value, -self.step)` -> `q, r = divmod(self.start - value, -self.step)`"
    at = next((i for i, words in enumerate(tries) if fix in words), len(tries))
    branch = ("self.start >= value > self.stop", "if r == 0", "return q")  # what only the test ran
    assert at < len(tries) and all(any(b in words for b in branch) for words in tries[:at]), tries


def test_this_attempts_own_try_before_a_cut_still_goes_last(tmp_path: Path) -> None:
    """Tried again are an earlier attempt's tries only: this attempt's own, before a compaction cut (as
    the pinned state lists them), stay last, or every cut would repeat them."""
    bug = ("span.py", "divmod(self.start - value", "divmod(self.start + value")
    for name, text in SPAN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace(*bug[1:]) if name == bug[0] else text)
    line = "q, r = divmod(self.start {} value, -self.step)"
    note = tried_note([TriedEdit("span.py", line.format("+"), line.format("-"))], TRIED_HERE)
    test_id = "tests/test_span.py::TestSpan::test_shrinking"
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes.\n\n{note}"
    responder = EngineerResponder.from_options({}, seed=1)
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    episode = asyncio.run(drive(responder, tmp_path, task, system=prompt, env=FAST, max_replies=60))
    tries = [m.content for m in episode.messages if m.content.startswith("Maybe a ")]
    fix = "`q, r = divmod(self.start + value, -self.step)` -> `q, r = divmod(self.start - value, -self.step)`"
    at = next((i for i, words in enumerate(tries) if fix in words), len(tries))
    branch = ("self.start >= value > self.stop", "if r == 0", "return q")  # what only the test ran
    assert any(not any(b in words for b in branch) for words in tries[:at]), tries  # the rest first


def test_a_default_argument_of_the_suspect_is_one_of_its_own_lines(tmp_path: Path) -> None:
    """A default argument's value is part of the function: its `def` line is tried with its body, not
    last, as a line run when the module loaded (cachetools' `ttl_cache(..., typed=False)`, seed 23:
    the attempts ran out of replies before the trace's loaded lines)."""
    files = {
        "scale.py": (
            "def scaled(values, factor=2, offset=0):\n"
            "    out = []\n"
            "    for value in values:\n"
            "        out.append(value * factor + offset)\n"
            "    return out\n"
        ),
        "tests/test_scale.py": (
            "from scale import scaled\n\n\ndef test_scaled():\n    assert scaled([1, 2]) == [2, 4]\n"
        ),
    }
    episode = solve_in_one_attempt(
        tmp_path, files, ("scale.py", "factor=2", "factor=3"), "tests/test_scale.py::test_scaled"
    )
    assert episode.claim.startswith("Fixed") and "factor=2" in episode.claim, episode.claim
    assert not [c for c in tool_arguments(episode.messages, "shell") if "settrace" in c["command"]]
    assert run_tests(tmp_path).returncode == 0


def test_a_test_whose_subtest_failed_or_that_is_expected_to_fail_is_not_a_passing_one(tmp_path: Path) -> None:
    """The spectrum counts as passing only tests that passed whole: a failed subtest (its test's own
    report passes) or an xfail test runs the bug's line too, and would hide it."""
    (tmp_path / "prod.py").write_text("def f(x):\n    if x > 5:\n        return x - 1\n    return x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_prod.py").write_text(
        "import unittest\n\nfrom prod import f\n\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_small(self):\n        self.assertEqual(f(1), 1)\n\n"
        "    def test_sub(self):\n        for x in (1, 9):\n            with self.subTest(x=x):\n"
        "                self.assertEqual(f(x), x)\n\n"
        "    @unittest.expectedFailure\n    def test_xfail(self):\n        self.assertEqual(f(9), 9)\n\n"
        "    def test_big(self):\n        self.assertEqual(f(9), 9)\n"
    )
    command = tracing.trace_command("tests/test_prod.py::T::test_big", ("prod.py", "f"))
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env={**os.environ, **FAST}, capture_output=True, text=True
    )
    assert done.returncode == 1 and "passing tests: 1\n" in done.stdout, done.stdout + done.stderr
    trace = tracing.executed_lines(done.stdout)
    assert trace.passing == {"prod.py": {0, 1}}, trace  # of test_big's, test_small ran `def` and `if x > 5:`
    assert tracing.regions_traced(trace, "prod.py", [])[0] == tracing.Lines("prod.py", [2], True)


def test_after_a_cut_the_first_run_lists_which_tests_fail_not_their_tracebacks(tmp_path: Path) -> None:
    """A cut leaves the context near its budget; the tracebacks of a task's failing tests (thousands of
    tokens) filled what it freed, and the next cut came before a single try (more-itertools seed 23's
    T4: eight cuts in one attempt). After a cut the first run lists the failures (`--tb=no -rf`) and
    the one test it works on is run alone for its traceback (a fresh start still reads them all: the
    other tests here)."""
    bug = ("span.py", "divmod(self.start - value", "divmod(self.start + value")
    for name, text in SPAN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace(*bug[1:]) if name == bug[0] else text)
    task = "Task T1: Fix tests/test_span.py\nThe task is done when `python -m pytest -q` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    prompt = "You are a careful software engineer.\nAgent: Ada\n"
    episode = asyncio.run(
        drive(responder, tmp_path, task, system=prompt, env=FAST, compact_over=8, compact_once=True)
    )
    assert episode.claim.startswith("Fixed"), episode.claim
    cut = next(i for i, m in enumerate(episode.messages) if m.content == COMPACTED)
    runs = [
        (i, call.arguments["command"])
        for i, m in enumerate(episode.messages)
        for call in m.tool_calls
        if m.content.startswith("Running the tests to see what fails")
    ]
    assert [c for i, c in runs if i > cut][:1] == ["python -m pytest -q --tb=no -rf --disable-warnings"], runs
    alone = [
        c["command"] for c in tool_arguments(episode.messages, "shell") if "-x --tb=short" in c["command"]
    ]
    assert alone and alone[0].endswith("tests/test_span.py::TestSpan::test_shrinking"), alone


def test_a_listing_of_which_tests_fail_leaves_out_the_warnings_summary(tmp_path: Path) -> None:
    """more-itertools seed 24: an unhandled exception in a thread, in each of 100 runs of one test,
    made the whole suite's one-line-per-failure run 140,000 characters of warnings (cut to 12,000,
    most of a context's room between cuts). Which tests fail is what such a run is for."""
    files = {
        "scale.py": "def scaled(values, factor=2):\n    return [value * factor for value in values]\n",
        "tests/test_scale.py": (
            "import warnings\n\nimport pytest\n\nfrom scale import scaled\n\n\n"
            "def test_scaled():\n    assert scaled([1, 2]) == [2, 4]\n\n\n"
            "@pytest.mark.parametrize('n', range(30))\ndef test_noisy(n):\n"
            "    warnings.warn(f'noise {n}: ' + 'x' * 200)\n"
        ),
    }
    test_id = "tests/test_scale.py::test_scaled"
    task = f"Task T1: Fix {test_id}\nDone when `python -m pytest -q {test_id}` passes."
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("factor=2", "factor=3") if name == "scale.py" else text)
    responder = EngineerResponder.from_options({}, seed=1)
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST, max_replies=60))
    assert episode.claim.startswith("Fixed"), episode.claim
    calls = {c.id: c for m in episode.messages for c in m.tool_calls}
    listings = [
        m.content
        for m in episode.messages
        if m.role == "tool" and "-rf" in str(calls[m.tool_call_id].arguments)
    ]
    assert listings and not any("warnings summary" in text for text in listings), listings


def test_what_a_module_body_runs_at_import_is_not_only_the_failing_tests(tmp_path: Path) -> None:
    """more-itertools' `recipes.py` computes `_primes_below_211 = tuple(sieve(211))` as it loads: the
    lines of `sieve` ran while the tests were collected, under no test, and read as only the failing
    test's (seeds 23 and 24: every trace's first tries went to `sieve`). They count as every test's."""
    (tmp_path / "prod.py").write_text(
        "def primes(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\n\n\n"
        "SMALL = primes(20)\n\n\n"
        "def f(x):\n    if x > 5:\n        return x - 1\n    return x in SMALL or x\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_prod.py").write_text(
        "from prod import f\n\n\nclass TestF:\n    def test_small(self):\n        assert f(1) == 1\n\n"
        "    def test_big(self):\n        assert f(9) == 9\n"
    )
    command = tracing.trace_command("tests/test_prod.py::TestF::test_big", ("prod.py", "f"))
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env={**os.environ, **FAST}, capture_output=True, text=True
    )
    trace = tracing.executed_lines(done.stdout)
    assert 1 in trace.executed["prod.py"] and 1 in trace.passing["prod.py"], done.stdout  # `primes`' line
    assert tracing.regions_traced(trace, "prod.py", [])[0] == tracing.Lines("prod.py", [9], True)


def test_a_test_elsewhere_that_fails_once_and_passes_again_does_not_undo_a_fix(tmp_path: Path) -> None:
    """The whole-suite check after a fix showed a test failing that did not before; it was flaky
    (cachetools' `RRCache` evicts at random: seed 25's right fix of `lfu_cache` was put back for
    `RRCacheTest::test_update`). What newly fails is run again; passing then, the fix is kept."""
    counter = tmp_path / "runs.txt"
    files = {
        "scale.py": "def scaled(values, factor=2):\n    return [value * factor for value in values]\n",
        "tests/test_scale.py": (
            "from scale import scaled\n\n\ndef test_scaled():\n    assert scaled([1, 2]) == [2, 4]\n"
        ),
        "tests/test_flaky.py": (
            f"from pathlib import Path\n\nCOUNTER = Path({str(counter)!r})\n\n\ndef test_flaky():\n"
            "    runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1\n"
            "    COUNTER.write_text(str(runs))\n    assert runs != 2  # fails on its second run only\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("factor=2", "factor=3") if name == "scale.py" else text)
    test_id = "tests/test_scale.py::test_scaled"
    task = f"Task T1: Fix {test_id}\nDone when `python -m pytest -q {test_id}` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST, max_replies=60))
    assert episode.claim.startswith("Fixed") and "factor=2" in episode.claim, episode.claim
    assert counter.read_text() == "3"  # before the first edit, after the fix, and again alone
    assert "factor=2" in (tmp_path / "scale.py").read_text()


def test_what_a_helper_of_the_test_class_calls_is_what_the_test_exercises(tmp_path: Path) -> None:
    """A test whose body is one call of a helper of its class (more-itertools' `ChunkedEvenTests`: each
    test is `self._test_finite(...)`, which calls `mi.chunked_even`) names nothing under test itself:
    the helper, found with grep in a long test file, is read and what it calls is the suspect (not
    what a helper of the same name in another class calls). Before, no suspect was found, the test
    was traced first and no lines were the suspect's own."""
    filler = "\n    def test_other_{0}(self):\n        self.assertTrue({0} >= 0)\n"
    fillers = "".join(filler.format(n) for n in range(250))
    files = {
        "chunks.py": (
            "def chunked(values, n):\n"
            "    out = []\n"
            "    for start in range(0, len(values), n):\n"
            "        out.append(values[start : start + n])\n"
            "    return out\n\n\n"
            "def first(values):\n"
            "    return values[0]\n"
        ),
        "tests/test_chunks.py": (
            "import unittest\n\nimport chunks as ch\n\n\n"
            "class FirstTests(unittest.TestCase):\n"
            "    def test_one(self):\n"
            "        self._check([5], 5)\n\n"
            "    def _check(self, values, expected):\n"
            "        self.assertEqual(ch.first(values), expected)\n\n\n"
            "class ChunkedTests(unittest.TestCase):\n"
            "    def test_pairs(self):\n"
            "        self._check([1, 2, 3, 4], 2, [[1, 2], [3, 4]])\n\n"
            "    def test_first(self):\n"
            "        self.assertEqual(ch.first([5]), 5)\n"
            f"{fillers}\n"
            "    def _check(self, values, n, expected):\n"
            "        self.assertEqual(ch.chunked(values, n), expected)\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("range(0, len(values), n)", "range(1, len(values), n)"))
    assert len((tmp_path / "tests/test_chunks.py").read_text()) > 12_000
    assert run_tests(tmp_path).returncode == 1
    episode = solve(tmp_path, "tests/test_chunks.py::ChunkedTests::test_pairs")  # read 4,000 chars at a time
    assert episode.claim.startswith("Fixed `chunked`"), episode.claim
    assert run_tests(tmp_path).returncode == 0
    greps = [g["pattern"] for g in tool_arguments(episode.messages, "grep")]
    assert any("_check" in pattern for pattern in greps), greps
    assert not [c for c in tool_arguments(episode.messages, "shell") if "settrace" in c["command"]]


EXACT = (
    "def exactly(values, n):\n"
    '    """The first n values; ValueError when there are fewer."""\n'
    "    out = []\n"
    "    sent = 0\n"
    "    for item in values[:n]:\n"
    "        out.append(item)\n"
    "        sent += 1\n"
    "    if sent < n:\n"
    '        raise ValueError(f"too few values (got {sent})")\n'
    "    return out\n"
)
EXACT_TESTS = (
    "import pytest\n\n"
    "from exact import exactly\n\n\n"
    "class TestExactly:\n"
    "    def test_basic(self):\n"
    "        assert exactly([1, 2, 3], 3) == [1, 2, 3]\n\n"
    "    def test_too_few(self):\n"
    '        with pytest.raises(ValueError, match=r"got 2\\)"):\n'
    "            exactly([1, 2], 3)\n"
)


def test_a_kept_fix_in_the_function_a_test_is_stuck_on_is_taken_back_and_its_test_repaired_again(
    tmp_path: Path,
) -> None:
    """A wrong fix that passes its test and fails none that passed (more-itertools' `strictly_n`, seed
    24: the bug was `sent -= 1` for `+= 1`; `if sent < n:` -> `if not sent < n:` passed `test_basic`)
    leaves the next test of the same function with no repair that passes: with it in, the right one
    does not pass either. Stuck there, the engineer takes its fix in that function back (it goes last
    among that test's repairs) and repairs the first test again. Before, the attempt gave up."""
    files = {
        "exact.py": EXACT,
        "tests/test_exact.py": EXACT_TESTS,
    }
    bug = ("exact.py", "sent += 1", "sent -= 1")
    episode = solve_in_one_attempt(tmp_path, files, bug, "tests/test_exact.py::TestExactly::test_basic")
    assert episode.claim.startswith("Fixed"), episode.claim
    assert run_tests(tmp_path).returncode == 0
    assert (tmp_path / "exact.py").read_text() == EXACT


def test_a_long_test_file_is_read_from_its_imports_not_its_first_page(tmp_path: Path) -> None:
    """The first read of a test file is its first lines (the imports), then windows found with grep:
    read_file's first page of a long test file is 12,000 characters, read again after every cut
    (more-itertools' `test_more.py`: a third of what a cut freed)."""
    root = make_library(tmp_path, ("src/shapes/core.py", "return value * 2", "return value * 3"))
    fillers = "".join(
        f"\n    def test_filler_{n}(self):\n        self.assertTrue({n} >= 0)\n" for n in range(300)
    )
    (root / "tests/test_long.py").write_text(
        "import unittest\n\nimport shapes\n\n\nclass LongTest(unittest.TestCase):\n"
        f"{fillers}\n    def test_doubled(self):\n        self.assertEqual(shapes.doubled(3), 6)\n"
    )
    test_id = "tests/test_long.py::LongTest::test_doubled"
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    episode = asyncio.run(drive(responder, root, task, system="Agent: Ada\n", env=FAST, read_limit=12_000))
    assert episode.claim.startswith("Fixed `doubled`"), episode.claim
    assert _read_chars(episode, "tests/test_long.py") < 4_000


@pytest.mark.parametrize("within", [None, ("pkg/it's.py", "f")])
def test_the_trace_command_is_sent_without_the_tracers_comments(within: tuple[str, str] | None) -> None:
    """The tracer goes out as a command at every trace (and again after each cut): its comments, a
    quarter of its tokens, stay in the source, and the values it is given are quoted without `'`
    (the shell's quoting of one is five characters)."""
    command = tracing.trace_command("tests/test_x.py::T::test_it", within)
    script = shlex.split(command)[2]
    compile(script, "tracer", "exec")
    tokens = tokenize.generate_tokens(io.StringIO(script).readline)
    assert not [t for t in tokens if t.type == tokenize.COMMENT] and len(command) < len(tracing.TRACER)
    lines = [
        line.split(" = ", 1) for line in script.splitlines() if line.startswith(("within =", "target ="))
    ]
    values = {name: ast.literal_eval(value) for name, value in lines}
    assert values == {"within": within, "target": "tests/test_x.py::T::test_it"}


def test_a_fix_is_taken_back_once_an_attempt(tmp_path: Path) -> None:
    """With a test of the function that no repair passes, a second take-back would undo the right fix
    (`sent += 1`, which passes `test_basic` and `test_too_few`) and the wrong one would come back."""
    (tmp_path / "tests").mkdir()
    unfixable = (
        "\n    def test_no_repair_passes(self):\n        assert exactly([1, 2, 3], 3) == [3, 2, 1, 0]\n"
    )
    (tmp_path / "tests/test_exact.py").write_text(EXACT_TESTS + unfixable)
    (tmp_path / "exact.py").write_text(EXACT.replace("sent += 1", "sent -= 1"))
    test_id = "tests/test_exact.py::TestExactly::test_basic"
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST, max_replies=200))
    assert episode.finished, "the attempt did not end"
    assert (tmp_path / "exact.py").read_text() == EXACT
    taken = [m.content for m in episode.messages if m.content.startswith("My fix on line")]
    assert len(taken) == 1, taken


def test_a_fix_that_got_the_same_test_further_is_not_taken_back(tmp_path: Path) -> None:
    """A fix kept because its test got further (one of two bugs it runs into) is not taken back when
    that test is stuck on the other."""
    (tmp_path / "modes.py").write_text(
        "def f(x, mode):\n    if mode == 0:\n        return x - 1\n    return x * 7\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_modes.py").write_text(
        "from modes import f\n\n\ndef test_f():\n    assert f(2, 0) == 3\n    assert f(2, 1) == 100\n"
    )
    test_id = "tests/test_modes.py::test_f"
    task = f"Task T1: Fix {test_id}\nThe task is done when `python -m pytest -q` passes."
    responder = EngineerResponder.from_options({}, seed=1)
    episode = asyncio.run(drive(responder, tmp_path, task, system="Agent: Ada\n", env=FAST, max_replies=120))
    assert episode.finished, "the attempt did not end"
    assert "return x + 1" in (tmp_path / "modes.py").read_text()
    assert not [m.content for m in episode.messages if m.content.startswith("My fix on line")]


def test_a_test_a_mixin_of_its_own_file_defines_past_its_first_lines_is_read_there(tmp_path: Path) -> None:
    """cachetools' `tests/test_func.py`: `test_decorator_user_function` is defined in
    `DecoratorTestMixin` (line 67), the failing test's class comes after it (line 114). Read from its
    first 60 lines, then windows, the test was looked for only after its class: not found, the engineer
    gave up at once (seed 27, both `mru_cache` and `ttl_cache`)."""
    root = make_library(tmp_path, ("src/shapes/core.py", "return value * 2", "return value * 3"))
    padding = "".join(
        f"\n    def test_pad_{n}(self):\n        self.assertTrue({n} >= 0)\n" for n in range(30)
    )
    (root / "tests/test_mixed.py").write_text(
        "import unittest\n\nimport shapes\n\n\nclass Mixin:\n"
        f"{padding}\n    def test_doubled(self):\n        self.assertEqual(self.FUNC(3), 6)\n"
        f"{padding.replace('test_pad', 'test_more')}\n\n"
        "class DoubledTest(unittest.TestCase, Mixin):\n    FUNC = staticmethod(shapes.doubled)\n"
    )
    episode = solve(root, "tests/test_mixed.py::DoubledTest::test_doubled")
    assert episode.claim.startswith("Fixed `doubled`"), episode.claim
    assert run_tests(root).returncode == 0


def test_where_the_traceback_shows_the_exception_rose_in_another_module_is_tried_first(
    tmp_path: Path,
) -> None:
    """The test calls a function whose own lines have many one-token repairs, and the exception rises
    two calls below it in another module, in the `else` of a condition the bug inverted (cachetools'
    `ttl_cache`, seed 28: `_Timer.__enter__`'s `if self.__nesting != 0:`; an attempt's 60 calls went on
    `ttl_cache`'s own lines). The lines the traceback shows and the conditions that led there come
    first."""
    (tmp_path / "clockwork").mkdir()
    (tmp_path / "clockwork" / "__init__.py").write_text("")
    (tmp_path / "clockwork" / "timer.py").write_text(
        "class Timer:\n    def __init__(self, clock):\n        self.clock = clock\n        self.depth = 0\n\n"
        "    def __enter__(self):\n        if self.depth != 0:\n            self.saved = now = self.clock()\n"
        "        else:\n            now = self.saved\n        self.depth += 1\n        return now\n\n"
        "    def __exit__(self, *exc):\n        self.depth -= 1\n"
    )
    (tmp_path / "clockwork" / "api.py").write_text(
        "from clockwork.timer import Timer\n\n\n"
        "def stamp(clock, size=128, ttl=600, retries=3, spread=2):\n"
        "    timer = Timer(clock)\n"
        "    limit = size * 1 + ttl * 0 + retries * 0 + spread * 0\n"
        "    with timer as now:\n"
        "        return now, limit\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_api.py").write_text(
        "from clockwork.api import stamp\n\n\ndef test_stamp():\n    assert stamp(lambda: 5) == (5, 128)\n"
    )
    episode = solve(tmp_path, "tests/test_api.py::test_stamp")
    assert episode.claim.startswith("Fixed") and "self.depth == 0" in episode.claim, episode.claim
    tries = [(e["path"], e["new"]) for e in tool_arguments(episode.messages, "edit_file")]
    assert tries[0] == ("clockwork/timer.py", "        if self.depth == 0:"), tries[:3]
    assert run_tests(tmp_path).returncode == 0


def test_once_an_edit_in_a_file_known_in_part_was_not_unique_its_edits_take_in_lines_around(
    tmp_path: Path,
) -> None:
    """more-itertools seed 29's `windowed`, deep in the 5,900 lines of `more.py`: every try on a line
    such as `if n <= 0:` was refused once (found five times in the file) and made again with lines
    around it, and the attempt ran out one try before the bug."""
    common = "    if n <= 0:\n        return 0\n"
    fillers = "".join(
        f"\n\ndef filler_{k}(n):\n{common}    total = n + {k + 2}\n    return total * {k + 7}\n"
        for k in range(200)
    )
    (tmp_path / "many.py").write_text(
        f'"""Many."""\n{fillers}\n\ndef target(n):\n{common}    total = n + 1\n    return total * 4\n'
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_many.py").write_text(
        "from many import target\n\n\ndef test_target():\n    assert target(2) == 9\n"
    )
    episode = solve(tmp_path, "tests/test_many.py::test_target")
    assert episode.claim.startswith("Fixed") and "total * 3" in episode.claim, episode.claim
    refused = [m for m in episode.messages if m.role == "tool" and re.search(r"found \d+ times", m.content)]
    assert len(refused) == 1, [m.content[:120] for m in refused]
    assert run_tests(tmp_path).returncode == 0


def test_the_default_argument_of_a_function_the_suspect_calls_is_tried_with_what_ran_there(
    tmp_path: Path,
) -> None:
    """more-itertools seed 30: the bug was `windowed`'s default `step=1`, and `adjacent`, `locate`,
    `replace` call it without a step. A `def` line runs when the module loads, so the trace put it
    last, after every line the test ran, and seven tasks ran out of calls. It is tried with the lines
    the call ran."""
    body = "".join(f"    total = total + {n} * 0\n" for n in range(1, 9))
    files = {
        "steps.py": (
            "def stepped(values, step=1):\n    total = 0\n" + body + "    return values[::step]\n\n\n"
            "def evens(values):\n    chosen = stepped(values)\n    count = len(chosen) * 1\n"
            "    return [v for v in chosen if v % 2 == 0][:count]\n"
        ),
        "tests/test_steps.py": (
            "from steps import evens\n\n\ndef test_evens():\n    assert evens([1, 2, 3, 4]) == [2, 4]\n"
        ),
    }
    episode = solve_in_one_attempt(
        tmp_path, files, ("steps.py", "step=1)", "step=2)"), "tests/test_steps.py::test_evens"
    )
    assert episode.claim.startswith("Fixed") and "step=1" in episode.claim, episode.claim
    assert run_tests(tmp_path).returncode == 0


@pytest.mark.parametrize("installed", [False, True])
def test_a_raise_that_refused_its_input_and_frames_outside_the_project_are_not_tried_first(
    tmp_path: Path, installed: bool
) -> None:
    """A check that raises on what its caller computed wrongly is not where the bug is (its guard,
    negated, got the test further and was kept); a frame in an installed package (under `.venv`) or
    the standard library is not the project's to edit. Both were tried first once the traceback's
    frames outside the suspect came first."""
    check = "def check(n):\n    if n < 0:\n        raise ValueError('negative')\n    return n\n"
    (tmp_path / "geo").mkdir()
    (tmp_path / "geo" / "__init__.py").write_text("")
    head = check
    if installed:
        lib = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
        (lib / "vendored").mkdir(parents=True)
        (lib / "vendored" / "__init__.py").write_text(check)
        (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(lib)!r})\n")
        head = "from vendored import check\n"
    (tmp_path / "geo" / "shapes.py").write_text(
        head + "\n\ndef perimeter(w, h):\n    total = w - h\n    return 2 * check(total)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_geo.py").write_text(
        "from geo.shapes import perimeter\n\n\n"
        "def test_perimeter():\n    p = perimeter(3, 4)\n    assert p == 14\n"
    )
    episode = solve(tmp_path, "tests/test_geo.py::test_perimeter")
    assert episode.claim.startswith("Fixed") and "total = w + h" in episode.claim, episode.claim
    edited = {e["path"] for e in tool_arguments(episode.messages, "edit_file")}
    assert edited == {"geo/shapes.py"}, edited
    tries = [e["new"] for e in tool_arguments(episode.messages, "edit_file")]
    assert not any("n < 0" in t or "n >= 0" in t for t in tries), tries  # the check's guard: not a suspect
    assert run_tests(tmp_path).returncode == 0


def test_the_tracer_records_a_called_functions_def_lines_past_decorators_to_its_colon(tmp_path: Path) -> None:
    """A decorator over several lines (its arguments run when the module loads) is not the `def`; a
    signature over several lines holds defaults on each; a lambda has no `def` line."""
    (tmp_path / "prod.py").write_text(
        "def deco(*args):\n    return lambda f: f\n\n\n"
        "@deco(\n    1,\n)\n# a comment\ndef f(\n    values,\n    step=1,\n):  # the colon\n"
        "    twice = lambda v: v * 2\n    return [twice(v) for v in values[::step]]\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_prod.py").write_text(
        "from prod import f\n\n\ndef test_f():\n    assert f([1, 2]) == [2]\n"
    )
    command = tracing.trace_command("tests/test_prod.py::test_f", ("prod.py", "f"))
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env={**os.environ, **FAST}, capture_output=True, text=True
    )
    trace = tracing.executed_lines(done.stdout)
    assert {8, 9, 10, 11} <= set(trace.executed["prod.py"]), done.stdout  # `def f(` to `):` (0-based)
    assert not {4, 5, 6, 7} & set(trace.executed["prod.py"]), done.stdout  # the decorator, the comment
