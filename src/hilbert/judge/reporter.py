"""The stop gate's pytest reporter: what ran, and how each test came out, written by the judge's own plugin.

This file is copied next to the tree under test under a name drawn per run (`hilbert_gate_<token>`: a
module committed in the tree cannot take its place, though `python -m pytest` puts the working folder
first on `sys.path`) and loaded by every pytest the verify command starts (`-p` in `PYTEST_ADDOPTS`, the
folder on `PYTHONPATH`; see `hilbert.judge.testruns`). It uses nothing but the standard library and
pytest, because it runs in the project's interpreter.

It writes JSON lines to a file the judge opened outside the tree and handed down as a descriptor
(`HILBERT_GATE_RECORDS=fd:device:inode`, checked with `fstat`, then moved to a descriptor of its own that
no child process inherits). Every record carries its pytest process's `process` (a random token):

- `start`: the rootdir, the ini file, the plugins pytest loaded from entry points (module names), the
  paths it collects from, in a pytest-xdist worker the worker's id, and this module's own file
  (`plugin`: the judge refuses a session that loaded another);
- `collected`: every node id collected, after every other hook changed the list; the ones deselected
  (`pytest_deselected`) and whether the session had selection options (`-k`, `-m`, `--deselect`, `--lf`,
  `--sw`); the ones collected and then dropped without a word;
- `worker`: a pytest-xdist controller started a worker (its id): each worker must report a `start`;
- `report`: per test and phase (setup, call, teardown) the outcome **read from the raw call info** in
  the innermost `pytest_runtest_makereport` wrapper — a conftest's wrapper that rewrites the report
  afterwards does not change what is recorded here; past a session's 100th failure, each further
  traceback is formatted as one line (`FULL_TRACEBACKS`: thousands of failing subtests took minutes);
- `finish`: the session's end, with pytest's exit status. A process that dies before (an `os._exit`
  under test) leaves no `finish` record: the judge counts that as a failure.

Controls, read once at import (`-p` imports this module before any conftest) and then removed
from `os.environ` so the product does not see them: `HILBERT_GATE_COLLECT_ONLY` (collect, record, run
nothing; a session that collects nothing exits 0, so the command's next session is collected too),
`HILBERT_GATE_ORDER` (a seed: the tests run in a shuffled order), `HILBERT_GATE_HIDE` (keep
`PYTEST_CURRENT_TEST` unset for the code under test and give it a neutral `sys.argv`/`sys.orig_argv`,
those of `python -c`), `HILBERT_GATE_SLEEP` (libfaketime moves the clock: if the interpreter's own
`time.sleep` fails under it, one by `select` takes its place, named as the builtin),
`HILBERT_GATE_UNSEEN` (variables the command's shell exported for the judge, libfaketime's, and the
`NAME_*` ones derived from them: taken out of `os.environ` — as Python code sees it — but left in the
process's environment, where libfaketime reads `FAKETIME` again whenever its cache expires and a child
started with the inherited environment finds them), `HILBERT_GATE_RESTORE` (the variables the judge
set, as they were, put back at configure; the judge's own values are put back at unconfigure, so a
later session in the same process is seen too).

pytest-xdist: the controller collects and runs nothing; its workers do, each a pytest of its own
started after the controller's configure, when the judge's variables are already gone. So the
controller hands each worker the judge's environment as it found it (`pytest_xdist_setupnodes`: the
spec's `env`, which execnet sets in the worker before pytest starts there, also for a restarted
worker); the workers load this plugin and record their own raw view. A worker does not inherit the
records descriptor (execnet closes it), so it keeps its records and hands them to the controller with
the worker's output at its end (`workeroutput`), which the controller writes (`pytest_testnodedown`);
a worker that dies first reports nothing, and the judge finds it unseen. With collection only, the
controller turns distribution off: the base collects in one process.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import sys
import time
from typing import Any

import pytest

CONTROLS = (
    "HILBERT_GATE_RESTORE",
    "HILBERT_GATE_RECORDS",
    "HILBERT_GATE_COLLECT_ONLY",
    "HILBERT_GATE_ORDER",
    "HILBERT_GATE_HIDE",
    "HILBERT_GATE_SLEEP",
    "HILBERT_GATE_UNSEEN",
    "HILBERT_GATE_SPILL",
)
_settings = {name: os.environ.pop(name, "") for name in CONTROLS}
PROCESS = os.urandom(8).hex()
_restore: dict[str, str | None] = json.loads(_settings["HILBERT_GATE_RESTORE"] or "{}")
_judge = {name: value for name in _restore if (value := os.environ.get(name)) is not None}
_arm = {**_judge, **{name: value for name, value in _settings.items() if value}}  # what a pytest needs


def _unseen(shown: dict[str, str | None]) -> None:
    """Set `os.environ` (and `os.environb`, which shares its data) to `shown` without touching the
    process's own environment: None removes the name. The names a tool derives from one (libfaketime
    sets `FAKETIME_SHARED`) go too: `NAME_*`."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return
    for name in [n for n in os.environ if any(n == s or n.startswith(f"{s}_") for s in shown)]:
        data.pop(os.environ.encodekey(name), None)
    for name, value in shown.items():
        if value is not None:
            data[os.environ.encodekey(name)] = os.environ.encodevalue(value)


_unseen(json.loads(_settings["HILBERT_GATE_UNSEEN"] or "{}"))


def _records(spec: str) -> int | None:
    """The judge's records file, if the descriptor `spec` names is that file (a number something
    else reuses is never written to), as a descriptor of our own that no child inherits."""
    try:
        number, device, inode = (int(part) for part in spec.split(":"))
        found = os.fstat(number)
    except (ValueError, OSError):
        return None
    if (found.st_dev, found.st_ino) != (device, inode):
        return None
    own = os.dup(number)  # not inheritable
    os.close(number)
    return own


def _spill(folder: str) -> int | None:
    """Where the records go when the descriptor did not reach this process (a process between the
    judge and this pytest closed it: Python's `subprocess` does by default, so tox, nox or a wrapper
    script): a file of this process's own in the folder the judge named, inside the tree."""
    if not folder:
        return None
    try:
        return os.open(
            os.path.join(folder, f"{PROCESS}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
    except OSError:
        return None


_out = _records(_settings["HILBERT_GATE_RECORDS"])
if _out is None:
    _out = _spill(_settings["HILBERT_GATE_SPILL"])


_kept: list[str] | None = None  # a pytest-xdist worker's records, for its controller to write


def _record(kind: str, **fields: Any) -> None:
    line = json.dumps({"kind": kind, "process": PROCESS, **fields}) + "\n"
    if _kept is not None:
        _kept.append(line)
    else:
        _write(line)


def _write(line: str) -> None:
    data = line.encode()
    while _out is not None and data:  # one write per record: several processes append to the file
        data = data[os.write(_out, data) :]


def sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


def _interpreter_sleep_fails() -> bool:
    """Under libfaketime before 0.9.11 with the monotonic clock left alone, the interpreter's own sleep
    (an absolute `clock_nanosleep` on the monotonic clock) fails with EINVAL; later ones leave it be."""
    try:
        time.sleep(1e-6)
    except OSError:
        return True
    return False


if _settings["HILBERT_GATE_SLEEP"] and _interpreter_sleep_fails():
    sleep.__module__, sleep.__doc__ = "time", time.sleep.__doc__  # what code under test may read
    time.sleep = sleep  # type: ignore[assignment]


_seen: dict[str, list[str]] = {"items": [], "deselected": []}  # this session's collection


def pytest_configure(config: pytest.Config) -> None:
    global _kept, _failures
    _failures = 0  # of this session (a process may run several)
    for name in CONTROLS:  # put back by an earlier session's unconfigure in this process
        os.environ.pop(name, None)
    for name, value in _restore.items():
        # PYTEST_ADDOPTS and the like as they were before the judge set them (pytest has read them by
        # now), for the code under test and any pytest a test starts
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _seen["items"], _seen["deselected"] = [], []
    if _settings["HILBERT_GATE_COLLECT_ONLY"] and getattr(config.option, "dist", "no") != "no":
        config.option.dist = "no"  # pytest-xdist (its configure runs last): collect here, start no worker
    if getattr(config, "workerinput", None) is not None:  # a pytest-xdist worker: see the docstring
        _kept = []
    if _settings["HILBERT_GATE_HIDE"]:
        _hide_the_runner()
    plugins = sorted(
        {getattr(plugin, "__name__", "") for plugin, _dist in config.pluginmanager.list_plugin_distinfo()}
        - {""}
    )
    _record(
        "start",
        rootdir=str(config.rootpath),
        inifile=str(config.inipath) if config.inipath else None,
        plugins=plugins,
        invocation=str(config.invocation_params.dir),
        scope=[os.path.join(str(config.invocation_params.dir), arg.split("::")[0]) for arg in config.args],
        worker=_worker(getattr(config, "workerinput", None)),
        plugin=__file__,
    )


def _hide_the_runner() -> None:
    """pytest has read its arguments: the product sees those of `python -c`, and pytest no longer sets
    `PYTEST_CURRENT_TEST` (neither for fixtures nor for unittest-style tests)."""
    sys.argv = ["-c"]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [*sys.orig_argv[:1], "-c", ""]
    import _pytest.runner

    if hasattr(_pytest.runner, "_update_current_test_var"):
        _pytest.runner._update_current_test_var = _unset_current_test


def _unset_current_test(item: pytest.Item, when: str | None) -> None:
    os.environ.pop("PYTEST_CURRENT_TEST", None)


def pytest_unconfigure(config: pytest.Config) -> None:
    os.environ.update(_arm)  # a later pytest (in this process or started by it) reports too


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    for spec in specs:  # set in the worker before its pytest starts; kept for a restarted worker
        spec.env.update(_arm)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    _record("worker", id=_worker(node.workerinput))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    kept = getattr(node, "workeroutput", {}).get(__name__)
    for line in kept if isinstance(kept, list) else ():  # a worker's own records, as it wrote them
        if isinstance(line, str):
            _write(line)


def _worker(workerinput: dict[str, Any] | None) -> str | None:
    """A worker's id within its controller's run (two `pytest -n 2` in one command both have a gw0)."""
    return None if workerinput is None else f"{workerinput['workerid']}@{workerinput['testrunuid']}"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # each test's place depends on the seed and its own node id alone: the tests that base and head
    # share keep their order relative to each other, whatever tests either one adds
    seed = _settings["HILBERT_GATE_ORDER"]
    if seed:
        items.sort(key=lambda item: hashlib.sha256(f"{seed}\0{item.nodeid}".encode()).hexdigest())


def pytest_itemcollected(item: pytest.Item) -> None:
    _seen["items"].append(item.nodeid)


def pytest_deselected(items: list[pytest.Item]) -> None:
    _seen["deselected"] += [item.nodeid for item in items]


def pytest_collection_finish(session: pytest.Session) -> None:
    nodeids = [item.nodeid for item in session.items]
    left = set(nodeids) | set(_seen["deselected"])
    option = session.config.option
    _record(
        "collected",
        nodeids=nodeids,
        deselected=_seen["deselected"],
        selecting=any(
            getattr(option, name, None) for name in ("keyword", "markexpr", "deselect", "lf", "stepwise")
        ),
        dropped=[nodeid for nodeid in _seen["items"] if nodeid not in left],
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    if _settings["HILBERT_GATE_COLLECT_ONLY"]:
        return True  # the loop is "done": nothing runs
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    if _settings["HILBERT_GATE_HIDE"]:  # a pytest without `_update_current_test_var` set it just before
        os.environ.pop("PYTEST_CURRENT_TEST", None)
    return (yield)


FULL_TRACEBACKS = 100  # failures of a session (of an xdist worker) in the style asked for; then one line each
_failures = 0


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Records the raw outcome. Past `FULL_TRACEBACKS` failures, a failure's traceback is formatted as
    one line (`--tb=line`): more-itertools with a bug in `sieve` fails 40,426 subtests, and formatting
    each traceback made one whole-suite merge check take over 8 minutes instead of under one."""
    global _failures
    option = item.config.option
    style = getattr(option, "tbstyle", "auto")
    if _failures >= FULL_TRACEBACKS and style not in ("no", "line", "native"):
        option.tbstyle = "line"  # read as each report is made; the summary at the end sees it as asked
    try:
        report = yield
    finally:
        option.tbstyle = style
    outcome = _raw_outcome(item, call)
    _failures += outcome == "failed"
    _record("report", nodeid=item.nodeid, when=call.when, outcome=outcome)
    return report


def _raw_outcome(item: pytest.Item, call: pytest.CallInfo[None]) -> str:
    """passed, failed, skipped, xfailed or xpassed, from the exception the phase raised (if any)."""
    xfail = item.get_closest_marker("xfail")
    excinfo = call.excinfo
    if excinfo is None:
        if call.when == "call" and xfail is not None and _xfail_applies(item, xfail):
            return "xpassed"
        return "passed"
    if excinfo.errisinstance(pytest.skip.Exception):
        return "skipped"
    if excinfo.errisinstance(pytest.xfail.Exception):
        return "xfailed"
    if call.when == "call" and xfail is not None and _xfail_applies(item, xfail):
        return "xfailed"
    return "failed"


def _xfail_applies(item: pytest.Item, mark: pytest.Mark) -> bool:
    condition = mark.args[0] if mark.args else mark.kwargs.get("condition", True)
    if isinstance(condition, str):
        return True  # evaluated by pytest; an xfail with a condition string counts as expected to fail
    return bool(condition)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _settings["HILBERT_GATE_COLLECT_ONLY"] and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # collecting: `pytest a && pytest b` goes on to b
    _record("finish", exitstatus=int(exitstatus))
    if _kept is not None:  # xdist sends the worker's output after this hook
        session.config.workeroutput[__name__] = list(_kept)  # type: ignore[attr-defined]
        _kept.clear()
