"""How the engineer reads what tools show it: pytest output, numbered file listings, grep hits,
and Python source (where a function starts and ends, what a test calls, what a traceback blames).

Pure text functions; nothing here touches a file.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
import unittest
from collections.abc import Sequence
from dataclasses import dataclass

# a failure's line in pytest's summary; SUBFAILED[msg] (params): a failed subtest, counted in "N failed"
_NODE = re.compile(r"^(?:FAILED|ERROR|SUBFAILED(?:\[.*?\])?(?: ?\(.*\))?) (\S+::\S+?)(?: - .*)?$", re.M)
_COLLECT_ERROR = re.compile(r"^ERROR (\S+\.py)(?: - .*)?$", re.MULTILINE)
_SUMMARY = re.compile(r"\b(\d+) (passed|failed|errors?)\b")
_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$")
_FOOTER = re.compile(
    r"^\[lines? [\d,]+(?:–[\d,]+)? of ([\d,]+) shown; call read_file with start_line=\d+\]$", re.M
)
_GREP = re.compile(r"^(.+?):(\d+):(.*)$")
_SECTION = re.compile(r"^_{3,} (\S+) _{3,}$", re.MULTILINE)
FRAME = re.compile(r"^([\w./-]+\.py):(\d+): ", re.MULTILINE)
_WHERE = re.compile(r"where .*? = ([A-Za-z_]\w*)\(")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
_QUALIFIED_CALL = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*)([A-Za-z_]\w*)\(")
_LAST_NAME = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)")
_ALL_BUILTINS = frozenset(dir(builtins))
_TESTCASE_METHODS = frozenset(dir(unittest.TestCase))
_BUILTINS = frozenset(
    {"len", "sorted", "list", "set", "dict", "tuple", "str", "int", "float", "abs", "round"}
)


@dataclass(frozen=True)
class TestReport:
    """One pytest run as the engineer understands it."""

    passed: bool
    failed: tuple[str, ...]  # node ids, in report order
    output: str
    failed_count: int = 0  # as pytest's last line counts them (a cut output may not list them all)
    listed_count: int = 0  # the failure lines of its summary (a test's failed subtests: one each)

    def breaks_more_than(self, before: TestReport) -> bool:
        """Whether this run fails more tests than `before`, or a test `before` did not. Names are
        compared only when both runs list every failure their last line counts: a long output is cut
        in the middle, and which names a cut leaves shifts as the failures above it come and go."""
        if self.failed_count > before.failed_count:
            return True
        listed = self.listed_count >= self.failed_count and before.listed_count >= before.failed_count
        return listed and bool(set(self.failed) - set(before.failed))

    def section(self, test_name: str) -> str:
        """The failure section of one test (its traceback), or "" when the output has none."""
        marks = list(_SECTION.finditer(self.output))
        for i, mark in enumerate(marks):
            if mark.group(1) == test_name:
                end = marks[i + 1].start() if i + 1 < len(marks) else len(self.output)
                return self.output[mark.end() : end]
        return ""


def read_pytest(output: str, exit_code: int | None) -> TestReport:
    nodes = _NODE.findall(output)
    failed = list(dict.fromkeys(nodes))
    collect_errors = [path for path in _COLLECT_ERROR.findall(output) if path not in failed]
    failed += collect_errors
    counts = {kind.rstrip("s"): int(n) for n, kind in _SUMMARY.findall(output)}
    if exit_code is not None:
        passed = exit_code == 0
    else:
        passed = (
            not failed
            and counts.get("passed", 0) > 0
            and not counts.get("failed")
            and not counts.get("error")
        )
    failed_count = counts.get("failed", 0) + counts.get("error", 0)
    listed_count = len(nodes) + len(collect_errors)
    return TestReport(passed, tuple(failed), output, failed_count, listed_count)


def numbered_page(text: str) -> tuple[int, list[str], int | None] | None:
    """A `cat -n` style listing of consecutive lines: (the first one's number, the lines, the file's
    line count when a last line says that the listing stops short of the end, as read_file's does),
    or None when `text` is not such a listing."""
    first, lines = 0, list[str]()
    for raw in text.splitlines():
        match = _NUMBERED.match(raw)
        if match is None:
            continue
        number = int(match.group(1))
        first = first or number
        if number != first + len(lines):
            return None
        lines.append(match.group(2))
    if not lines:
        return (1, [], None) if not text.strip() else None
    footer = _FOOTER.search(text)
    return first, lines, int(footer.group(1).replace(",", "")) if footer else None


@dataclass(frozen=True)
class GrepHit:
    path: str
    line: int
    text: str


def grep_hits(text: str) -> list[GrepHit]:
    hits = []
    for raw in text.splitlines():
        if match := _GREP.match(raw):
            hits.append(GrepHit(clean_path(match.group(1)), int(match.group(2)), match.group(3)))
    return hits


def clean_path(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def is_test_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}"


def function_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """0-based [start, end) of `def name(...)` and its body, trailing blank lines excluded."""
    pattern = re.compile(rf"^(\s*)(?:async\s+)?def {re.escape(name)}\(")
    for start, line in enumerate(lines):
        if match := pattern.match(line):
            indent = len(match.group(1))
            end = start + 1
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
                end += 1
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            return start, end
    return None


def definition_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """0-based [start, end) of `def name(` or `class name` and its body (the first in the file)."""
    pattern = re.compile(rf"^(\s*)(?:(?:async\s+)?def {re.escape(name)}\(|class {re.escape(name)}\b)")
    for start, line in enumerate(lines):
        if match := pattern.match(line):
            return start, _block_end(lines, start, len(match.group(1)))
    return None


def block_span(lines: list[str], start: int) -> tuple[int, int]:
    """0-based [start, end) of the block (a def, a class) whose header is line `start`."""
    return start, _block_end(lines, start, _indent(lines[start]))


def _block_end(lines: list[str], start: int, indent: int) -> int:
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def test_span(lines: list[str], node: str) -> tuple[int, int] | None:
    """0-based span of the test a node id names (`Class::test_x[param]`, `test_x`): the method in
    its class, or in a base class of the same file (a mixin) when the class does not define it."""
    parts = [part.split("[", 1)[0] for part in node.split("::") if part]
    if not parts:
        return None
    name, classes = parts[-1], parts[-2:-1]
    visited: set[str] = set()
    while classes:
        cls = classes.pop(0)
        span = definition_span(lines, cls) if cls not in visited else None
        visited.add(cls)
        if span is None:
            continue
        inner = function_span(lines[span[0] : span[1]], name)
        if inner is not None:
            return span[0] + inner[0], span[0] + inner[1]
        if bases := re.match(rf"^\s*class {re.escape(cls)}\((.*)\)\s*:", lines[span[0]]):
            classes += [b.strip().rsplit(".", 1)[-1] for b in bases.group(1).split(",") if b.strip()]
    return function_span(lines, name)


def class_of(lines: list[str], node: str) -> tuple[int, int] | None:
    """The span of the test class a node id names (the concrete class, not the mixin)."""
    parts = [part for part in node.split("::") if part]
    return definition_span(lines, parts[-2]) if len(parts) > 1 else None


def tested_names(
    test_lines: list[str],
    span: tuple[int, int],
    section: str,
    class_span: tuple[int, int] | None = None,
    helpers: Sequence[tuple[int, int]] = (),
) -> list[str]:
    """The names a test may exercise, most likely first: the one pytest names in `where ... =
    f(...)`, the calls in its body to names the file imports (or through a module it imports, as in
    `mod.f(...)`), its other plain calls, then the same in the bodies of the `helpers` it calls
    (`read_helpers`: spans of its file), then what its test class's attributes name (a class
    under test, or a function as in `FUNC = staticmethod(pkg.mod.f)`). Not builtins, not the
    test's own locals, not calls through `self`, not what the test file itself defines."""
    imported = imported_names(test_lines)
    modules = imported_modules(test_lines)
    defined = set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", "\n".join(test_lines), re.M))
    first: list[str] = [m.group(1)] if (m := _WHERE.search(section)) else []
    called: list[str] = []
    for start, end in (span, *helpers):
        body = test_lines[start + 1 : end]
        local = set(re.findall(r"^\s*(\w+)\s*(?::[^=]*)?=[^=]", "\n".join(body), re.M))
        local |= set(re.findall(r"\b(?:for|as)\s+(\w+)", "\n".join(body)))
        skipped = defined | local | _ALL_BUILTINS | {"assert", "self", "cls"}
        direct: list[str] = []
        other: list[str] = []
        for line in body:
            for qualifier, name in _QUALIFIED_CALL.findall(line):
                owner = qualifier.split(".", 1)[0]
                if name in skipped or (owner and owner not in modules and owner not in imported):
                    continue
                (direct if name in imported or owner else other).append(name)
        called += direct + other
    skipped = defined | _ALL_BUILTINS | {"assert", "self", "cls"}
    attributes = []
    if class_span is not None:
        for line in test_lines[class_span[0] + 1 : class_span[1]]:
            if match := re.match(r"^\s+\w+\s*=\s*(.+)$", line):
                attributes += [n for n in _LAST_NAME.findall(match.group(1)) if n not in skipped]
    return list(dict.fromkeys(first + called + attributes))


def self_calls(lines: list[str], span: tuple[int, int]) -> list[str]:
    """The methods a test's body calls through `self`, each once, but unittest's own (`assertEqual`,
    `subTest`, `fail`, ...; a project's own `assertChunked` counts)."""
    body = "\n".join(lines[span[0] + 1 : span[1]])
    names = dict.fromkeys(re.findall(r"\bself\.(\w+)\(", body))
    return [name for name in names if name not in _TESTCASE_METHODS]


def imported_modules(lines: list[str]) -> set[str]:
    """The names modules are bound to by `import a.b`, `import a as m` (and `from a import b`, which
    may bind a module)."""
    names: set[str] = set()
    for line in lines:
        if match := re.match(r"^import\s+([\w., ]+?)\s*$", line):
            for part in match.group(1).split(","):
                words = part.split()
                names.add(words[-1] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0])
    return names | set(imported_names(lines))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def called_function(test_lines: list[str], span: tuple[int, int], section: str) -> str | None:
    """The function a test exercises: the one pytest names in `where ... = f(...)`, else the first
    call in the test body to a name the test file imports, else the first non-builtin call."""
    if match := _WHERE.search(section):
        return match.group(1)
    imported = imported_names(test_lines)
    calls = called_names(test_lines, span)
    for call in calls:
        if call in imported:
            return call
    return next((c for c in calls if c not in _BUILTINS and c != "assert"), None)


def called_names(lines: list[str], span: tuple[int, int]) -> list[str]:
    """The names a function's body calls (`name(`), in reading order, each once."""
    return list(dict.fromkeys(c for line in lines[span[0] + 1 : span[1]] for c in _CALL.findall(line)))


def imported_names(lines: list[str]) -> dict[str, str]:
    """name -> module for every `from MODULE import a, b` line."""
    names = {}
    for line in lines:
        if match := re.match(r"^from ([\w.]+) import \(?([\w, ]+)\)?\s*$", line):
            for name in match.group(2).split(","):
                if name.strip():
                    names[name.strip().split(" as ")[0]] = match.group(1)
    return names


def defining_file(paths: list[str], module: str | None) -> str | None:
    """Of the files that define a function, the one of `module` (the dotted name a test imports the
    function from; a `src/` layout is understood), else the first; None when there are none."""
    if module:
        base = module.replace(".", "/")
        for path in paths:
            if any(f"/{path}".endswith(f"/{base}{tail}") for tail in (".py", "/__init__.py")):
                return path
    return paths[0] if paths else None


def blamed_lines(section: str, path: str) -> list[int]:
    """0-based lines of `path` that a traceback section shows frames at (where an exception rose)."""
    return [int(line) - 1 for frame, line in FRAME.findall(section) if clean_path(frame) == path]


def failed_at(output: str, path: str) -> int | None:
    """The 0-based line of `path` where a test failed, as its traceback names the frames: the last
    one in `path` (the test's own line, or a helper's in its file)."""
    found = re.findall(rf"(?:^|/){re.escape(path)}:(\d+): ", output, re.MULTILINE)
    return int(found[-1]) - 1 if found else None


def statement_end(lines: list[str], span: tuple[int, int], index: int) -> int:
    """The last 0-based line of the innermost statement that holds line `index` in the function at
    `span` (0-based [start, end)): a failure reported at another line of the same statement (a call
    on the second line of an `assertEqual(` spread over three) is no further on. Of a compound
    statement (`for`, `with`, `if`), the header's last line: its body is further on. `index` itself
    when it is outside the span, on the `def` line, or the function does not parse (read in part)."""
    if not span[0] <= index < span[1]:
        return index
    try:
        tree = ast.parse(textwrap.dedent("\n".join(lines[span[0] : span[1]])))
    except SyntaxError:
        return index
    line = index - span[0] + 1
    holding = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and line < body[0].lineno:  # its header: `for x in f(`
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # the test's own `def` line (or a decorator): no statement of it
            holding.append((node.lineno, body[0].lineno - 1))
        else:
            holding.append((node.lineno, node.end_lineno or node.lineno))
    if not holding:
        return index
    _first, last = min(holding, key=lambda found: found[1] - found[0])
    return span[0] + last - 1


def assert_line(test_lines: list[str], span: tuple[int, int]) -> int | None:
    """0-based index of the first `assert` line of a test."""
    for index in range(span[0] + 1, span[1]):
        if test_lines[index].lstrip().startswith("assert "):
            return index
    return None
