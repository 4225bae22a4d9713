"""Which lines a failing test runs: the engineer's line trace, as a developer would take one.

A one-bug fix lies on a line the failing test executes. When the test does not lead straight to the
faulty line (it calls a class, a decorator, a helper of its test class, or code in another module),
the engineer runs that one test under a small `sys.settrace` tracer (`trace_command`) that records
the lines executed in files under the project folder, and tries the lines it ran first.

The tracer prints one line per file, in the order the files were first entered, for the lines run
inside functions (`executed PATH: 3-7,12,40-41`: 1-based, relative to the project folder), and one
for those run as a module or class body was loaded (`loaded PATH: ...`: imports, `def` lines and
their defaults, constants). `executed_lines` reads both back, keeping product files only (not
tests, not dot-folders, not installed packages).
"""

from __future__ import annotations

import re
import shlex

from hilbert.sim.engineer.reading import is_test_path

TRACER = """
import os, sys, threading
import pytest
root = os.getcwd() + os.sep
seen = {}
def local(frame, event, arg):
    if event == "line":
        kind = "executed" if frame.f_code.co_flags & 1 else "loaded"
        seen.setdefault((frame.f_code.co_filename, kind), set()).add(frame.f_lineno)
    return local
def call(frame, event, arg):
    return local if frame.f_code.co_filename.startswith(root) else None
sys.settrace(call)
threading.settrace(call)
code = pytest.main(sys.argv[1:])
sys.settrace(None)
for (name, kind), lines in seen.items():
    spans = []
    for n in sorted(lines):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    text = ",".join(f"{a}-{b}" if a < b else str(a) for a, b in spans)
    print(f"{kind} {os.path.relpath(name)}: {text}")
sys.exit(code)
""".strip()

_EXECUTED = re.compile(r"^(executed|loaded) (\S+): ([\d,-]+)$", re.MULTILINE)


def trace_command(test_id: str) -> str:
    """The shell command that runs one test under the tracer."""
    return f"python -c {shlex.quote(TRACER)} -q -p no:cacheprovider {shlex.quote(test_id)}"


def executed_lines(output: str) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """(lines run inside functions, lines run as a module or class body is loaded): product file ->
    0-based lines, files in the order the tracer first entered them."""
    found: dict[str, dict[str, set[int]]] = {"executed": {}, "loaded": {}}
    for kind, path, spans in _EXECUTED.findall(output):
        parts = path.split("/")
        if path.startswith("..") or any(p.startswith(".") for p in parts) or "site-packages" in parts:
            continue
        if is_test_path(path) or parts[-1] == "conftest.py":
            continue
        lines = found[kind].setdefault(path, set())
        for span in spans.split(","):
            first, _, last = span.partition("-")
            lines.update(range(int(first) - 1, int(last or first)))
    return found["executed"], found["loaded"]
