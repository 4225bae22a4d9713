"""Which lines a failing test runs: the engineer's line trace, as a developer would take one.

A one-bug fix lies on a line the failing test executes. When the test does not lead straight to the
faulty line (it calls a class, a decorator, a helper of its test class, or code in another module),
the engineer runs that one test under a small `sys.settrace` tracer (`trace_command`) that records
the lines executed in files under the project folder, and tries the lines it ran first, the way a
developer steps into calls: first what ran below the function it suspects (its callees, then
theirs), then what the test called itself, then what those called, and so on. A line's *depth* is
the number of distinct project functions between it and the suspect's frame or else the nearest
test frame (a test file's code: the test, its fixtures and helpers, the module's own import),
itself included; a recursive function counts once.

The tracer prints, in the order the files were first entered, one line per file and depth for the
lines run inside functions (`executed@in1 PATH: 3-7,12`: one call below the suspect; `executed@2
PATH: 40-41`: two below a test; without `@`: run with no test on the stack, as from a thread or a
top-level `conftest.py`; 1-based lines, relative to the project folder), and one for those run as a
module or class body was loaded (`loaded PATH: ...`: imports, `def` lines and their defaults,
constants). A line run at several depths counts at the least. `executed_lines` reads both back as a
rank per line (`rank`), keeping product files only (not tests, not dot-folders, not installed
packages).
"""

from __future__ import annotations

import re
import shlex

from hilbert.sim.engineer.reading import is_test_path

TRACER = """
import os, sys, threading
import pytest
root = os.getcwd() + os.sep
within = WITHIN  # (path, qualified name) of the suspect, or None
kinds = {}
seen = {}
def kind_of(name):  # 0: not the project's, 1: product, 2: a test file
    if name not in kinds:
        rel = "/" + name[len(root):]
        base = rel.rsplit("/", 1)[-1]
        ours = name.startswith(root) and "/site-packages/" not in rel and "/." not in rel
        test = base.startswith("test_") or base.endswith("_test.py") or "/tests/" in rel
        kinds[name] = 0 if not ours else 2 if test else 1
    return kinds[name]
def is_suspect(code):
    if within is None or code.co_filename != root + within[0]:
        return False
    name = getattr(code, "co_qualname", code.co_name)
    return name == within[1] or name.startswith(within[1] + ".")
def depth(frame):
    codes = set()
    while frame is not None:
        code = frame.f_code
        if is_suspect(code):
            return "in" + str(len(codes))
        found = kind_of(code.co_filename)
        if found == 2:
            return str(len(codes))
        if found == 1:
            codes.add(code)
        frame = frame.f_back
    return ""
def call(frame, event, arg):
    found = kind_of(frame.f_code.co_filename)
    if not found:
        return None
    kind = "executed" if frame.f_code.co_flags & 1 else "loaded"
    lines = seen.setdefault((frame.f_code.co_filename, kind), {})
    level = depth(frame) if kind == "executed" and found == 1 else ""
    def local(frame, event, arg):
        if event == "line":
            lines.setdefault(frame.f_lineno, set()).add(level)
        return local
    return local
sys.settrace(call)
threading.settrace(call)
code = pytest.main(sys.argv[1:])
sys.settrace(None)
for (name, kind), lines in seen.items():
    for level in sorted({at for ats in lines.values() for at in ats}):
        spans = []
        for n in sorted(n for n, ats in lines.items() if level in ats):
            if spans and n == spans[-1][1] + 1:
                spans[-1][1] = n
            else:
                spans.append([n, n])
        text = ",".join(f"{a}-{b}" if a < b else str(a) for a, b in spans)
        at = f"@{level}" if level else ""
        print(f"{kind}{at} {os.path.relpath(name)}: {text}")
sys.exit(code)
""".strip()

_EXECUTED = re.compile(r"^(executed|loaded)(?:@(in)?(\d+))? (\S+): ([\d,-]+)$", re.MULTILINE)
FROM_TEST = 1_000  # ranks: below the suspect 0, 1, ...; below a test FROM_TEST + its depth
NOTS = "nots"  # in `regions_traced`: here the repairs that put a `not` before a line, held back, come
Traced = dict[str, dict[int, int]]  # product file -> 0-based line -> rank (`executed_lines`)
Region = tuple[str, list[int]] | str  # (path, 0-based lines) or `NOTS`
NO_TEST = 1_000_000  # run with no test on the stack


def trace_command(test_id: str, within: tuple[str, str] | None = None) -> str:
    """The shell command that runs one test under the tracer (its traceback was read already, so
    none: the lines the trace prints are the output). `within`: the suspect, as (path, name)."""
    script = TRACER.replace("WITHIN", repr(within))
    return f"python -c {shlex.quote(script)} -q --tb=no -p no:cacheprovider {shlex.quote(test_id)}"


def executed_lines(output: str) -> tuple[dict[str, dict[int, int]], dict[str, set[int]]]:
    """(lines run inside functions, each with its rank: the least of those it ran at, as in
    `FROM_TEST`; lines run as a module or class body was loaded): product file -> 0-based lines,
    files in the order the tracer first entered them."""
    executed: dict[str, dict[int, int]] = {}
    loaded: dict[str, set[int]] = {}
    for kind, below, level, path, spans in _EXECUTED.findall(output):
        parts = path.split("/")
        if path.startswith("..") or any(p.startswith(".") for p in parts) or "site-packages" in parts:
            continue
        if is_test_path(path) or parts[-1] == "conftest.py":
            continue
        indices = set[int]()
        for span in spans.split(","):
            first, _, last = span.partition("-")
            indices.update(range(int(first) - 1, int(last or first)))
        if kind == "loaded":
            loaded.setdefault(path, set()).update(indices)
            continue
        rank = NO_TEST if not level else int(level) + (0 if below else FROM_TEST)
        ranks = executed.setdefault(path, {})
        for index in indices:
            ranks[index] = min(ranks.get(index, NO_TEST), rank)
    return executed, loaded


def regions_traced(
    executed: Traced, loaded: dict[str, set[int]], suspect: str | None, callees: list[int]
) -> list[Region]:
    """The order a trace gives the lines to try (`suspect`: the suspect's file): below the suspect, a
    call deeper at a time (its file first at each depth), `NOTS`, then below the test in the same way,
    `NOTS`; then what ran as modules loaded. Without a trace of the suspect's file (the tracer's output
    not read), first `callees`, the lines of the functions the suspect calls in its file."""
    first = sorted(executed, key=lambda path: path != suspect)
    ranks = sorted({rank for lines in executed.values() for rank in lines.values()})
    regions: list[Region] = []
    for rank in ranks:
        if rank >= FROM_TEST and NOTS not in regions:
            regions.append(NOTS)
        regions += [
            (path, sorted(i for i, at in executed[path].items() if at == rank))
            for path in first
            if rank in executed[path].values()
        ]
    regions.append(NOTS)
    if suspect and suspect not in executed:
        regions.insert(0, (suspect, callees))
    modules = sorted(loaded, key=lambda path: path != suspect)
    return regions + [(path, sorted(loaded[path])) for path in modules]
