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
top-level `conftest.py`; 1-based lines, relative to the project folder; a called function's `def`
line, where its defaults are, with them: more-itertools seed 30's bug was `windowed`'s `step=1`, which
`adjacent` and `replace` call), and one for those run as a module or class body was loaded (`loaded
PATH: ...`: imports, `def` lines and their defaults, constants). A line run at several depths counts
at the least.

It runs the other tests of the failing test's class first, while `BUDGET_S` lasts, then the failing
test (spectrum-based fault localization, as in Tarantula and Ochiai: a line the failing test runs and
the passing ones do not is the likeliest place of a bug; run last, the failing test does not take on
what the first test of a process runs once, a cache built, a class set up). It prints how many of them
passed (`passing tests: N`; one with a failed subtest, or an xfail one, did not) and, of the lines the
failing test ran inside functions, those the passing ones ran too, or that ran while no test did (a
module body calling a function at import: more-itertools' `_primes_below_211 = tuple(sieve(211))`)
(`passed PATH: ...`), for product files only. `executed_lines` reads all of it back (`Trace`),
keeping product files only (not tests, not dot-folders, not installed packages).
"""

from __future__ import annotations

import io
import json
import re
import shlex
import tokenize
from dataclasses import dataclass, field
from typing import NamedTuple

from hilbert.sim.engineer.reading import is_test_path

TRACER = """
import linecache, os, sys, threading, time
import pytest
root = os.getcwd() + os.sep
within = WITHIN  # (path, qualified name) of the suspect, or None
target = TARGET  # the failing test's node id
targets = set()  # ... as collected (a parametrized test named without its brackets: each of them)
kinds = {}
seen = {}
others = {}  # the other tests': node id -> {file: lines run inside functions}
passed, failed = set(), set()  # a test with a failed subtest, or an xfail one, has failed
outside = {}  # file -> lines run while no test ran (a module body's calls at collection): every test's
now = [None]  # the node id of the test running
def kind_of(name):  # 0: not the project's, 1: product, 2: a test file
    if name not in kinds:
        rel = "/" + name[len(root):]
        base = rel.rsplit("/", 1)[-1]
        ours = name.startswith(root) and "/site-packages/" not in rel and "/." not in rel
        test = base.startswith("test_") or base.endswith("_test.py") or "/tests/" in rel
        kinds[name] = 0 if not ours else 2 if test else 1
    return kinds[name]
signatures = {}
def signature(code):  # the lines of a function's `def` to its colon, past decorators and comments
    key = (code.co_filename, code.co_firstlineno)
    if key not in signatures:
        found, heads = [], ("def " + code.co_name + "(", "async def " + code.co_name + "(")
        for n in range(code.co_firstlineno, code.co_firstlineno + 40):
            text = linecache.getline(code.co_filename, n).split("#", 1)[0].strip()
            if found or text.startswith(heads):
                found.append(n)
                if text.endswith(":") or len(found) > 20:
                    break
        signatures[key] = set(found)
    return signatures[key]
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
    top = signature(frame.f_code) if kind == "executed" else set()  # its `def` lines: its defaults
    if now[0] is not None and now[0] not in targets:  # another test of its class: which lines only
        if kind == "loaded" or found != 1:
            return None
        ran = others.setdefault(now[0], {}).setdefault(frame.f_code.co_filename, set())
        ran.update(top)
        def other(frame, event, arg):
            if event == "line":
                ran.add(frame.f_lineno)
            return other
        return other
    lines = seen.setdefault((frame.f_code.co_filename, kind), {})
    level = depth(frame) if kind == "executed" and found == 1 else ""
    shared = outside.setdefault(frame.f_code.co_filename, set()) if now[0] is None else set()
    for n in top:
        lines.setdefault(n, set()).add(level)
        shared.add(n)
    def local(frame, event, arg):
        if event == "line":
            lines.setdefault(frame.f_lineno, set()).add(level)
            shared.add(frame.f_lineno)
        return local
    return local
class Spectrum:  # the other tests of the class while time is left, then the failing one
    def pytest_sessionstart(self, session):
        self.started = time.monotonic()
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        found = {i.nodeid for i in items if i.nodeid == target or i.nodeid.startswith(target + "[")}
        targets.update(found or {i.nodeid for i in items})  # none found: all are the target, as before
        ordered = sorted(items, key=lambda item: item.nodeid in targets)
        items[:] = list({item.nodeid: item for item in ordered}.values())
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if item.nodeid not in targets and time.monotonic() - self.started > BUDGET:
            return True  # the trace's time is up: not run
        return None
    def pytest_runtest_logstart(self, nodeid, location):
        now[0] = nodeid
    def pytest_runtest_logreport(self, report):
        if report.failed or hasattr(report, "wasxfail"):
            failed.add(report.nodeid)
        elif report.when == "call" and report.passed:
            passed.add(report.nodeid)
    def pytest_runtest_logfinish(self, nodeid, location):
        now[0] = None
def spans_of(numbers):
    spans = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(f"{a}-{b}" if a < b else str(a) for a, b in spans)
sys.settrace(call)
threading.settrace(call)
pytest.main(sys.argv[1:], plugins=[Spectrum()])
sys.settrace(None)
product = [(name, kind, lines) for (name, kind), lines in seen.items() if kind_of(name) == 1]
for name, kind, lines in product:
    for level in sorted({at for ats in lines.values() for at in ats}):
        at = f"@{level}" if level else ""
        text = spans_of(n for n, ats in lines.items() if level in ats)
        print(f"{kind}{at} {os.path.relpath(name)}: {text}")
passing = passed - failed - targets
print(f"passing tests: {len(passing)}")
for name, kind, lines in product if passing else ():
    ran = {n for test in passing for n in others.get(test, {}).get(name, ())} | outside.get(name, set())
    if kind == "executed" and ran & set(lines):
        print(f"passed {os.path.relpath(name)}: {spans_of(ran & set(lines))}")
sys.exit(0 if targets and targets <= passed - failed else 1)
""".strip()

_EXECUTED = re.compile(r"^(executed|loaded|passed)(?:@(in)?(\d+))? (\S+): ([\d,-]+)$", re.MULTILINE)
FROM_TEST = 1_000  # ranks: below the suspect 0, 1, ...; below a test FROM_TEST + its depth
NOTS = "nots"  # in `regions_traced`: here the repairs that put a `not` before a line, held back, come
Traced = dict[str, dict[int, int]]  # product file -> 0-based line -> rank (`executed_lines`)
NO_TEST = 1_000_000  # run with no test on the stack
BUDGET_S = 20  # how long the tracer runs the other tests of the class, once the failing one ran


class Lines(NamedTuple):
    """Lines of a file to try (0-based); `only_failing`: lines the failing test ran and the passing
    tests of its class did not (`regions_traced`)."""

    path: str
    indices: list[int]
    only_failing: bool = False


Region = Lines | str  # or `NOTS`


@dataclass(frozen=True)
class Trace:
    """What a trace shows, product files only (0-based lines, files in the order the tracer first
    entered them): the lines the failing test ran inside functions, each with its rank (the least of
    those it ran at, as in `FROM_TEST`); the lines run as a module or class body was loaded; and of
    the lines the failing test ran, those the other tests of its class that pass ran too."""

    executed: Traced = field(default_factory=dict)
    loaded: dict[str, set[int]] = field(default_factory=dict)
    passing: dict[str, set[int]] = field(default_factory=dict)


def trace_command(test_id: str, within: tuple[str, str] | None = None) -> str:
    """The shell command that runs the other tests of the failing test's class under the tracer, then
    the failing test (its traceback was read already, so none, and no list of failures: the lines the
    trace prints are the output); it exits 0 when the failing test passes. `within`: the suspect, as
    (path, name)."""

    def literal(text: str) -> str:  # a Python string literal without `'` (the shell quotes it long)
        return json.dumps(text, ensure_ascii=False)

    suspect = "None" if within is None else f"({literal(within[0])}, {literal(within[1])})"
    values = {"WITHIN": suspect, "TARGET": literal(test_id), "BUDGET": str(BUDGET_S)}
    script = re.sub("|".join(values), lambda found: values[found.group()], TRACER_SENT)
    scope = [test_id] + ([holder] if (holder := class_node(test_id)) else [])
    options = "-q --tb=no -rN --maxfail=0 -p no:cacheprovider"
    return f"python -c {shlex.quote(script)} {options} {shlex.join(scope)}"


def _without_comments(script: str) -> str:
    """`script` without its comments and blank lines: the command is sent at every trace, and after a
    cut again (a quarter of its tokens were comments, and their quotes made the shell's quoting long)."""
    tokens = tokenize.generate_tokens(io.StringIO(script).readline)
    kept = tokenize.untokenize(token for token in tokens if token.type != tokenize.COMMENT)
    return "\n".join(line.rstrip() for line in kept.splitlines() if line.strip())


TRACER_SENT = _without_comments(TRACER)  # its placeholders filled in one pass (`trace_command`)


def class_node(test_id: str) -> str | None:
    """The node id of the class a test id's test is a method of (`tests/t.py::Box::test_a` ->
    `tests/t.py::Box`); None for a test function of a module."""
    parts = test_id.split("[", 1)[0].split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else None


def is_product_path(path: str) -> bool:
    """Whether a path a trace or a traceback names is the project's own code, not its tests: relative,
    inside the project, in no dot-folder (a virtual environment) and no installed package."""
    parts = path.split("/")
    if path.startswith(("/", "..")) or any(p.startswith(".") for p in parts) or "site-packages" in parts:
        return False
    return not is_test_path(path) and parts[-1] != "conftest.py"


def executed_lines(output: str) -> Trace:
    """What the tracer's output shows (`Trace`)."""
    trace = Trace()
    for kind, below, level, path, spans in _EXECUTED.findall(output):
        if not is_product_path(path):
            continue
        indices = set[int]()
        for span in spans.split(","):
            first, _, last = span.partition("-")
            indices.update(range(int(first) - 1, int(last or first)))
        if kind != "executed":
            (trace.loaded if kind == "loaded" else trace.passing).setdefault(path, set()).update(indices)
            continue
        rank = NO_TEST if not level else int(level) + (0 if below else FROM_TEST)
        ranks = trace.executed.setdefault(path, {})
        for index in indices:
            ranks[index] = min(ranks.get(index, NO_TEST), rank)
    return trace


def regions_traced(trace: Trace, suspect: str | None, callees: list[int]) -> list[Region]:
    """The order a trace gives the lines to try (`suspect`: the suspect's file). First, when the other
    tests of the failing test's class that pass ran some of its lines, the lines only the failing
    test ran (a one-bug fix lies on a line the failing tests run; lines the passing ones run too are
    less likely), in the order below, then `NOTS`. Then all of them: below the suspect, a call deeper
    at a time (its file first at each depth), `NOTS`, then below the test in the same way, `NOTS`;
    then what ran as modules loaded. Without a trace of the suspect's file (the tracer's output not
    read), first `callees`, the lines of the functions the suspect calls in its file."""
    first = sorted(trace.executed, key=lambda path: path != suspect)
    regions: list[Region] = []
    if any(trace.passing.values()):
        shared = trace.passing
        only = {  # run with no test on the stack (an import, a thread): not the failing test's own
            path: {i: at for i, at in lines.items() if at < NO_TEST and i not in shared.get(path, set())}
            for path, lines in trace.executed.items()
        }
        regions += [*_by_rank(only, first, only_failing=True), NOTS]
    regions += [*_by_rank(trace.executed, first), NOTS]
    if suspect and suspect not in trace.executed:
        regions.insert(0, Lines(suspect, callees))
    modules = sorted(trace.loaded, key=lambda path: path != suspect)
    return regions + [Lines(path, sorted(trace.loaded[path])) for path in modules]


def _by_rank(executed: Traced, order: list[str], *, only_failing: bool = False) -> list[Region]:
    """`executed`'s lines a rank at a time, each rank's files in `order`; `NOTS` before the first
    rank below a test."""
    regions: list[Region] = []
    for rank in sorted({rank for lines in executed.values() for rank in lines.values()}):
        if rank >= FROM_TEST and NOTS not in regions:
            regions.append(NOTS)
        regions += [
            Lines(path, sorted(i for i, at in executed[path].items() if at == rank), only_failing)
            for path in order
            if rank in executed[path].values()
        ]
    return regions
