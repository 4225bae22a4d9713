"""The stop gate's pytest reporter: what ran, and how each test came out, written by the judge's own plugin.

This file is copied next to the tree under test and loaded by every pytest the verify command starts
(`PYTEST_ADDOPTS=-p hilbert_gate_reporter`, the folder on `PYTHONPATH`; see `hilbert.judge.testruns`).
It uses nothing but the standard library and pytest, because it runs in the project's interpreter.

It appends JSON lines to `$HILBERT_GATE_RECORDS/<pid>.jsonl`:

- `start`: the rootdir, the ini file, the plugins pytest loaded from entry points (module names), the
  paths it collects from, and in a pytest-xdist worker the worker's id;
- `collected`: every node id collected, after every other hook changed the list; the ones deselected
  (`pytest_deselected`) and whether the session had selection options (`-k`, `-m`, `--deselect`, `--lf`,
  `--sw`); the ones collected and then dropped without a word;
- `worker`: a pytest-xdist controller started a worker (its id): each worker must report a `start`;
- `report`: per test and phase (setup, call, teardown) the outcome **read from the raw call info** in
  the innermost `pytest_runtest_makereport` wrapper — a conftest's wrapper that rewrites the report
  afterwards does not change what is recorded here;
- `finish`: the session's end, with pytest's exit status. A process that dies before (an `os._exit`
  under test) leaves no `finish` record: the judge counts that as a failure.

Controls, read once at import (`-p` imports this module before any conftest) and then removed
from `os.environ` so the product does not see them: `HILBERT_GATE_COLLECT_ONLY` (collect, record, run
nothing; a session that collects nothing exits 0, so the command's next session is collected too),
`HILBERT_GATE_ORDER` (a seed: the tests run in a shuffled order), `HILBERT_GATE_HIDE` (hide
`PYTEST_CURRENT_TEST` from the code under test and give it a neutral `sys.argv`), `HILBERT_GATE_SLEEP`
(libfaketime moves the clock: `time.sleep` by `select`), `HILBERT_GATE_RESTORE` (the variables the
judge set, as they were, put back at configure; the judge's own values are put back at unconfigure,
so a later session in the same process, or a later pytest process, is seen too).

pytest-xdist: the controller collects and runs nothing; its workers do, each a pytest of its own
started after the controller's configure, when the judge's variables are already gone. So the
controller hands each worker the judge's environment as it found it (`pytest_xdist_setupnodes`: the
spec's `env`, which execnet sets in the worker before pytest starts there, also for a restarted
worker); the workers load this plugin and record their own raw view (`<pid>.jsonl` per worker). With
collection only, the controller turns distribution off: the base collects in one process.
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
)
_settings = {name: os.environ.pop(name, "") for name in CONTROLS}
_restore: dict[str, str | None] = json.loads(_settings["HILBERT_GATE_RESTORE"] or "{}")
_judge = {name: value for name in _restore if (value := os.environ.get(name)) is not None}
_arm = {**_judge, **{name: value for name, value in _settings.items() if value}}  # what a pytest needs


def _sleep(seconds: float) -> None:
    """time.sleep by select(): under libfaketime with the monotonic clock left alone, the
    interpreter's own sleep (an absolute clock_nanosleep) fails with EINVAL."""
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


if _settings["HILBERT_GATE_SLEEP"]:
    time.sleep = _sleep  # type: ignore[assignment]
_out: Any = None


def _record(kind: str, **fields: Any) -> None:
    global _out
    if not _settings["HILBERT_GATE_RECORDS"]:
        return
    if _out is None:
        path = os.path.join(_settings["HILBERT_GATE_RECORDS"], f"{os.getpid()}.jsonl")
        _out = open(path, "a", buffering=1)  # noqa: SIM115 - one line per record, kept open for the session
    _out.write(json.dumps({"kind": kind, **fields}) + "\n")
    _out.flush()


_seen: dict[str, list[str]] = {"items": [], "deselected": []}  # this session's collection


def pytest_configure(config: pytest.Config) -> None:
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
    if _settings["HILBERT_GATE_HIDE"]:  # pytest has read its arguments: the product sees a neutral argv
        sys.argv = ["python"]
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
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    os.environ.update(_arm)  # a later pytest (in this process or started by it) reports too


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    for spec in specs:  # set in the worker before its pytest starts; kept for a restarted worker
        spec.env.update(_arm)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    _record("worker", id=_worker(node.workerinput))


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
    if _settings["HILBERT_GATE_HIDE"]:  # pytest set it just before: the test function does not see it
        os.environ.pop("PYTEST_CURRENT_TEST", None)
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    _record("report", nodeid=item.nodeid, when=call.when, outcome=_raw_outcome(item, call))
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
