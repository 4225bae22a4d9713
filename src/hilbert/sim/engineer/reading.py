"""How the engineer reads what tools show it: pytest output, numbered file listings, grep hits,
and Python source (where a function starts and ends, what a test calls, what a traceback blames).

Pure text functions; nothing here touches a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NODE = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+?)(?: - .*)?$", re.MULTILINE)
_COLLECT_ERROR = re.compile(r"^ERROR (\S+\.py)(?: - .*)?$", re.MULTILINE)
_SUMMARY = re.compile(r"\b(\d+) (passed|failed|errors?)\b")
_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$")
_GREP = re.compile(r"^(.+?):(\d+):(.*)$")
_SECTION = re.compile(r"^_{3,} (\S+) _{3,}$", re.MULTILINE)
_FRAME = re.compile(r"^([\w./-]+\.py):(\d+): ", re.MULTILINE)
_WHERE = re.compile(r"where .*? = ([A-Za-z_]\w*)\(")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
_BUILTINS = frozenset(
    {"len", "sorted", "list", "set", "dict", "tuple", "str", "int", "float", "abs", "round"}
)


@dataclass(frozen=True)
class TestReport:
    """One pytest run as the engineer understands it."""

    passed: bool
    failed: tuple[str, ...]  # node ids, in report order
    output: str

    def section(self, test_name: str) -> str:
        """The failure section of one test (its traceback), or "" when the output has none."""
        marks = list(_SECTION.finditer(self.output))
        for i, mark in enumerate(marks):
            if mark.group(1) == test_name:
                end = marks[i + 1].start() if i + 1 < len(marks) else len(self.output)
                return self.output[mark.end() : end]
        return ""


def read_pytest(output: str, exit_code: int | None) -> TestReport:
    failed = list(dict.fromkeys(_NODE.findall(output)))
    failed += [path for path in _COLLECT_ERROR.findall(output) if path not in failed]
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
    return TestReport(passed=passed, failed=tuple(failed), output=output)


def numbered_lines(text: str) -> list[str] | None:
    """The lines of a `cat -n` style listing, or None when `text` is not one (or has gaps)."""
    lines: list[str] = []
    for raw in text.splitlines():
        match = _NUMBERED.match(raw)
        if match is None:
            continue
        if int(match.group(1)) != len(lines) + 1:
            return None
        lines.append(match.group(2))
    return lines if lines or not text.strip() else None


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
    return [int(line) - 1 for frame, line in _FRAME.findall(section) if clean_path(frame) == path]


def assert_line(test_lines: list[str], span: tuple[int, int]) -> int | None:
    """0-based index of the first `assert` line of a test."""
    for index in range(span[0] + 1, span[1]):
        if test_lines[index].lstrip().startswith("assert "):
            return index
    return None
