"""How the engineer finds what a failing test exercises: it reads the test (whole, or the windows of a
long file around its class and itself; a test a mixin of another test module defines, where its
traceback runs), the names it calls, and where the first of them that the product defines is
(`Suspect`). The repair search (`work.py`) starts from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from hilbert.sim.engineer.actions import Grep
from hilbert.sim.engineer.desk import Desk, Steps
from hilbert.sim.engineer.reading import (
    FRAME,
    TestReport,
    blamed_lines,
    block_span,
    class_of,
    clean_path,
    defining_file,
    definition_span,
    grep_hits,
    imported_names,
    is_test_path,
    self_calls,
    test_span,
    tested_names,
)

_IMPORT = re.compile(r"^(import|from) \w")
MAX_NAMES = 8  # names a failing test calls that are looked for at once
MAX_WINDOWS = 6  # windows of a long file read to see one definition whole (each twice the last)
WINDOW = 40  # lines read around what grep or a trace found in a long file
CLASS_HEADER = 12  # lines read from a test class's header (its bases, the attributes naming what it tests)
FIRST_LINES = 150  # a definition found further down is read in a window, not from the file's top
# a test file's first lines (its imports), not its first page: 12,000 characters of more-itertools'
# `test_more.py` after each cut took a third of what the cut freed
HEAD_LINES = 60
MAX_HELPERS = 2  # helpers of its class a test calls that are looked for


@dataclass(frozen=True)
class Suspect:
    """A failing test and the function it blames, with both files' spans (0-based [start, end))."""

    test_id: str
    test_path: str
    test_span: tuple[int, int]
    section: str
    path: str | None  # where what the test exercises is defined; None: not found
    function: str | None
    span: tuple[int, int] | None
    blamed: tuple[int, ...]


def locate(desk: Desk, report: TestReport, test_id: str) -> Steps[Suspect | None]:
    """Read the failing test, find what it exercises and read where that is defined. None: the test
    cannot be read; a suspect without a `path`: nothing it names was found in the product files."""
    test_path, _, node = test_id.partition("::")
    parts = [part.split("[", 1)[0] for part in node.split("::")]
    section = report.section(".".join(parts[-2:])) or report.section(parts[-1])  # `Class.test`: unittest
    if not section and not report.passed:  # a run that listed failures only: this test's traceback
        alone = yield from desk.run_one(test_id)
        section = alone.section(".".join(parts[-2:])) or alone.section(parts[-1])
    test_lines = yield from read_test(desk, test_path, node, section)
    span = test_span(test_lines, node) if test_lines and node else None
    if test_lines is not None and span is None and node:  # inherited from another module's mixin?
        mixin = yield from inherited(desk, test_id, section)
        if mixin is not None:
            test_path, test_lines, span, section = mixin
    if test_lines is None or span is None:
        return None
    test_lines, helpers = yield from read_helpers(desk, test_path, test_lines, span, node)
    names = tested_names(test_lines, span, section, class_of(test_lines, node), helpers)[:MAX_NAMES]
    suspect = Suspect(test_id, test_path, span, section, None, None, None, ())
    if not names:
        return suspect
    alternatives = "|".join(re.escape(name) for name in names)
    found = yield from desk.ask(
        Grep(rf"^ *(async +)?(def|class) +({alternatives})\b", ".", "*.py", why=f"Looking for `{names[0]}`.")
    )
    hits = [hit for hit in grep_hits(found.text) if not is_test_path(hit.path)]
    imported = imported_names(test_lines)
    for name in names:
        defining = [
            hit for hit in hits if re.match(rf"^ *(async +)?(def|class) +{re.escape(name)}\b", hit.text)
        ]
        path = defining_file([hit.path for hit in defining], imported.get(name))
        if path is None:
            continue
        line = next(hit.line for hit in defining if hit.path == path)
        if line <= FIRST_LINES:  # near the top: the first page (the whole file, when it fits)
            lines = yield from desk.read_from(path, 1)
            lines = (yield from read_block(desk, path, line - 1)) if lines is not None else None
        else:  # deep in a long file: a window around it
            lines = yield from read_block(desk, path, line - 1)
        if lines is None:
            continue
        block = block_span(lines, line - 1)
        blamed = tuple(i for i in blamed_lines(section, path) if block[0] < i < block[1])
        return replace(suspect, path=path, function=name, span=block, blamed=blamed)
    return suspect


def read_helpers(
    desk: Desk, path: str, lines: list[str], span: tuple[int, int], node: str
) -> Steps[tuple[list[str], list[tuple[int, int]]]]:
    """The helpers of its class that a test calls through `self` (more-itertools' `ChunkedEvenTests`:
    each test is one `self._test_finite(...)`, which calls the function under test), read where a long
    file's windows did not show them, with one grep: (the file as known, their spans). At most
    `MAX_HELPERS`; not a class attribute (`self.Cache(...)` with `Cache = LFUCache`), not a helper of
    another class of the file."""
    holder = class_of(lines, node)
    start, end = holder if holder is not None else (0, len(lines))
    attributes = set(re.findall(r"^\s+(\w+)\s*=", "\n".join(lines[start:end]), re.M))
    names = [name for name in self_calls(lines, span) if name not in attributes][:MAX_HELPERS]

    def where(name: str) -> tuple[int, int] | None:
        found = definition_span(lines[start:end], name)
        return (start + found[0], start + found[1]) if found is not None else None

    missing = [name for name in names if where(name) is None]
    if missing and path in desk.unread:
        alternatives = "|".join(re.escape(name) for name in missing)
        why = f"Finding the helper {missing[0]} in {path}."
        grepped = yield from desk.ask(Grep(rf"^ *(async +)?def +({alternatives})\b", path, why=why))
        for name in missing:  # the first definition after the test's class begins
            at = [h.line for h in grep_hits(grepped.text) if re.match(rf"^ *(async +)?def +{name}\b", h.text)]
            for line in [line for line in at if line > start][:1]:
                lines = (yield from read_block(desk, path, line - 1)) or lines
                holder = class_of(lines, node)
                start, end = holder if holder is not None else (0, len(lines))
    spans = [found for name in names if (found := where(name)) is not None and found != span]
    return lines, spans


def inherited(
    desk: Desk, test_id: str, section: str
) -> Steps[tuple[str, list[str], tuple[int, int], str] | None]:
    """Where a test its own file does not define is: the file of another test module (a mixin its
    class inherits from another module: cachetools' `CacheTestMixin` in `tests/__init__.py`) that its
    traceback runs through, read there: (that file, its lines, the test's span, the traceback); None
    when no traceback names one."""
    test_path, _, node = test_id.partition("::")
    name = node.split("::")[-1].split("[", 1)[0]
    if not FRAME.search(section):  # no traceback at hand: run it alone for one
        section = (yield from desk.run_one(test_id)).output
    paths = dict.fromkeys(clean_path(frame) for frame, _line in FRAME.findall(section))
    for path in paths:
        if path == test_path or not is_test_path(path):
            continue
        lines = yield from read_test(desk, path, name, section)
        span = test_span(lines, name) if lines else None
        if lines is not None and span is not None:
            return path, lines, span, section
    return None


def read_test(desk: Desk, path: str, node: str, section: str) -> Steps[list[str] | None]:
    """A test file: whole when its first `HEAD_LINES` are all of it, else those (the imports) and, found
    with grep, windows around the test's class header and the test itself (the definition its
    traceback runs through, else the first after its class, else one before it: a mixin of the same
    file, cachetools' `DecoratorTestMixin` in `tests/test_func.py`); the whole class when that does
    not show where the test is."""
    lines = yield from desk.read_window(path, 1, HEAD_LINES)
    if lines is not None and path in desk.unread and not any(_IMPORT.match(line) for line in lines):
        lines = yield from desk.read_from(path, 1)  # a long header: its first page, as before
    parts = [part.split("[", 1)[0] for part in node.split("::") if part]
    names = parts[-2:]  # the test's class, if any, and the test
    if lines is None or path not in desk.unread or not names:
        return lines
    alternatives = "|".join(re.escape(name) for name in names)
    found = yield from desk.ask(
        Grep(rf"^ *(async +)?(def|class) +({alternatives})\b", path, why=f"Finding {names[-1]} in {path}.")
    )
    hits = grep_hits(found.text)
    is_class = re.compile(rf"^class +{re.escape(names[0])}\b" if len(names) > 1 else "(?!)")
    is_test = re.compile(rf"^ *(async +)?def +{re.escape(names[-1])}\b")
    classes = [hit.line for hit in hits if is_class.match(hit.text)]
    tests = [hit.line for hit in hits if is_test.match(hit.text)]
    after = classes[0] if classes else 0
    frames = [line + 1 for line in blamed_lines(section, path)]
    ran = [test for test in tests if test > after and any(test <= frame for frame in frames)]
    test = max(ran) if ran else next((test for test in tests if test > after), None)
    if test is None and tests:  # none after its class: a base class of this file defines it (a mixin)
        before = [test for test in tests if any(test <= frame for frame in frames)]
        test = max(before) if before else tests[-1]
    if classes:
        lines = (yield from desk.read_window(path, after, after + CLASS_HEADER - 1)) or lines
    if test is not None:
        lines = (yield from read_block(desk, path, test - 1)) or lines
        span = test_span(lines, node)
        if span is not None and span[0] == test - 1:
            return lines
    for line in classes[:1]:  # the test is not where it was looked for: read its class whole
        lines = (yield from read_block(desk, path, line - 1)) or lines
    return lines


def read_block(desk: Desk, path: str, start: int) -> Steps[list[str] | None]:
    """The file as known once the definition at 0-based line `start` is read to its end: a window
    from its first line, then windows twice as long while the block goes on past what was read."""
    size = WINDOW
    lines = yield from desk.read_window(path, start + 1, start + size)
    for _window in range(MAX_WINDOWS):
        if lines is None or path not in desk.unread:
            return lines
        end = block_span(lines, start)[1]
        seen = desk.seen[path]
        gap = next((i for i in range(start, min(end + 1, len(lines))) if i not in seen), None)
        if gap is None and end >= len(lines) and path in desk.open_ended:
            gap = len(lines)
        if gap is None:
            return lines
        size *= 2
        lines = yield from desk.read_window(path, gap + 1, gap + size)
    return lines
