"""Test runs whose outcomes the judge gathers itself, not from the runner's exit status.

`run_tests(runner, command, tree, controls)` runs a command (the task's verify, the held-out tests, a
merge check) through the one command runner, with the judge's pytest reporter
(`hilbert.judge.reporter`) reaching every pytest it starts: the reporter, copied under a name drawn per
run (`hilbert_gate_<token>`: nothing committed can shadow it), in a folder that goes first on
`PYTHONPATH`, `-p <name>` into `PYTEST_ADDOPTS`. Its records go to a file opened here, outside the
tree and unlinked at once, handed down as an inherited descriptor: the code under test finds no records
in the tree to rewrite. Under bubblewrap the reporter's folder is read-only to the command. It returns
the `Ran` and the `Outcomes` (None when no pytest started: the command is judged on its exit status
only, and the evidence says so).

What the judge cannot trust makes the outcomes `untrusted` (and so not `finished`, which every caller
reads as a failure): a session whose `start` names another file than the reporter copied for this run
(a module that shadowed it), records of no started session, or the reporter's files changed while
the command ran (a later session would load what the code under test wrote). Code running inside a
pytest process can still reach the reporter and its descriptor; that is for the static checks
(`hilbert.judge.integrity`: product code probing its process or naming the test runner).

`Controls` are how the judge makes the base commit the reference for how tests run: the base's pytest
configuration written as one ini file (`-c`, with `--rootdir` as the base had it), plugin autoload off
with the base's entry-point plugins loaded by name, a shuffled order, the runner's variables hidden,
collection only, and any extra environment (the perturbations of `hilbert.judge.perturb`).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbert.commands import Output, Ran, Runner, Timeout

REPORTER = Path(__file__).with_name("reporter.py")
PASSING = frozenset({"passed"})


@dataclass(frozen=True)
class Controls:
    """How one test run is steered. `ini`: the text of the pytest configuration to impose (None: the
    tree's own); `rootdir`: relative to the tree; `plugins`: None lets pytest autoload entry-point
    plugins, a tuple turns autoload off and loads these modules by name."""

    collect_only: bool = False
    order: str = ""
    hide: bool = False
    ini: str | None = None
    rootdir: str | None = None
    plugins: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    exported: Mapping[str, str] = field(default_factory=dict)  # set by the command's shell, for its children


@dataclass(frozen=True)
class Outcomes:
    """What the reporter saw: every node id collected (in every session the command started), each
    test's outcome (passed, failed, skipped, xfailed, xpassed, or incomplete: it started and never
    ended), whether every session that started also finished, and the base-reference facts (rootdir
    and ini file relative to the tree, entry-point plugins).

    Node ids are keyed by their session's rootdir (relative to the tree: `sub/tests/test_x.py::t` for
    a session rooted in `sub`), so two projects' `tests/test_x.py::t` stay apart; a test that ran in
    several sessions keeps its worst outcome. `configs`: each distinct (rootdir, ini file) of the
    command's sessions (pytest-xdist workers not counted); `unseen`: xdist workers that never
    reported (their tests ran where the judge could not look); `deselected`: tests a session's own
    selection options (`-k`, `-m`, `--deselect`) left out; `dropped`: tests collected and then left out
    otherwise (a hook); `scope`: the paths the sessions collected from, relative to the tree;
    `untrusted`: why the records cannot be trusted (then `finished` is False)."""

    collected: tuple[str, ...]
    outcomes: Mapping[str, str]
    finished: bool
    sessions: int
    rootdir: str | None = None
    inifile: str | None = None
    plugins: tuple[str, ...] = ()
    configs: tuple[tuple[str | None, str | None], ...] = ()
    unseen: tuple[str, ...] = ()
    deselected: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    untrusted: str = ""  # why the judge cannot trust these records ("": it can; else not `finished`)

    @property
    def one_config(self) -> bool:
        """Whether every session ran under the same rootdir and ini file (so one can be imposed)."""
        return len(set(self.configs)) <= 1

    def outcome(self, nodeid: str) -> str:
        return self.outcomes.get(nodeid, "not run")

    def not_passing(self, nodeids: Iterable[str]) -> dict[str, str]:
        return {n: self.outcome(n) for n in nodeids if self.outcome(n) not in PASSING}

    def to_json(self) -> dict[str, object]:
        return {
            "collected": list(self.collected),
            "outcomes": dict(self.outcomes),
            "finished": self.finished,
            "sessions": self.sessions,
            "rootdir": self.rootdir,
            "inifile": self.inifile,
            "plugins": list(self.plugins),
            "configs": [list(config) for config in self.configs],
            "unseen": list(self.unseen),
            "deselected": list(self.deselected),
            "dropped": list(self.dropped),
            "scope": list(self.scope),
            "untrusted": self.untrusted,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Outcomes:
        return cls(
            tuple(data["collected"]),  # type: ignore[arg-type]
            dict(data["outcomes"]),  # type: ignore[call-overload]
            bool(data["finished"]),
            int(data["sessions"]),  # type: ignore[call-overload]
            data.get("rootdir"),  # type: ignore[arg-type]
            data.get("inifile"),  # type: ignore[arg-type]
            tuple(data.get("plugins") or ()),  # type: ignore[arg-type]
            tuple((c[0], c[1]) for c in data.get("configs") or ()),  # type: ignore[attr-defined]
            tuple(data.get("unseen") or ()),  # type: ignore[arg-type]
            tuple(data.get("deselected") or ()),  # type: ignore[arg-type]
            tuple(data.get("dropped") or ()),  # type: ignore[arg-type]
            tuple(data.get("scope") or ()),  # type: ignore[arg-type]
            str(data.get("untrusted") or ""),
        )


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a test class, whatever its name

    ran: Ran
    outcomes: Outcomes | None  # None: no pytest started — exit status only

    @property
    def exit_status_only(self) -> bool:
        return self.outcomes is None


async def run_tests(
    runner: Runner,
    command: str,
    tree: Path,
    controls: Controls,
    *,
    timeout: Timeout,
    output: Output | None = None,
    on_wait: Callable[[float], None] | None = None,
) -> TestRun:
    """Run `command` in `tree` with the reporter and `controls`; the reporter's files are removed
    after, so the tree is left as the command left it."""
    folder = tree.resolve() / f".hilbert-gate-{secrets.token_hex(6)}"
    module = f"hilbert_gate_{secrets.token_hex(8)}"
    folder.mkdir()
    spill = tree.resolve() / f".hilbert-gate-{secrets.token_hex(6)}"  # records whose descriptor was closed
    spill.mkdir()
    reading, writing = _records_file()
    try:
        shutil.copyfile(REPORTER, folder / f"{module}.py")
        env = _environment(runner.env, controls, folder, module, writing, tree)
        env["HILBERT_GATE_SPILL"] = str(spill)
        placed = _contents(folder)
        if controls.exported:
            command = (
                "".join(f"export {k}={shlex.quote(v)}; " for k, v in controls.exported.items()) + command
            )
        ran = await runner.with_env(env, drop=controls.drop).run(
            command,
            root=tree,
            timeout=timeout,
            output=output or Output(3000, lambda: None),
            on_wait=on_wait,
            pass_fds=(writing,),
            readonly=(folder,),
        )
        changed = await asyncio.to_thread(_contents, folder) != placed
        os.close(writing)
        writing = -1
        with os.fdopen(os.dup(reading), "rb") as records:
            text = await asyncio.to_thread(records.read)
        text += b"".join(await asyncio.to_thread(_spilled, spill))
        untrusted = (
            "the judge's reporter files in the tree were changed while the command ran" if changed else ""
        )
        outcomes = read_records(
            text.decode(errors="replace").splitlines(), tree, str(folder / f"{module}.py"), untrusted
        )
    finally:
        for fd in (reading, writing):
            if fd >= 0:
                os.close(fd)
        await asyncio.to_thread(shutil.rmtree, folder, True)
        await asyncio.to_thread(shutil.rmtree, spill, True)
    return TestRun(ran, outcomes)


def _spilled(spill: Path) -> list[bytes]:
    """The records pytest processes wrote into the spill folder (their descriptor had been closed),
    each file ending in a whole line."""
    found = []
    for path in sorted(spill.glob("*.jsonl")) if spill.is_dir() else ():
        try:
            data = path.read_bytes()
        except OSError:
            continue
        found.append(data if data.endswith(b"\n") or not data else data + b"\n")
    return found


def _records_file() -> tuple[int, int]:
    """A file for the records outside the tree, unlinked at once (nothing can find it by name): a
    descriptor to read it, and one that appends, for the command to inherit."""
    reading, path = tempfile.mkstemp(prefix="hilbert-gate-records-")
    try:
        writing = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        os.close(reading)
        raise
    finally:
        os.unlink(path)
    return reading, writing


def _contents(folder: Path) -> dict[str, bytes]:
    """Every file in `folder`, by name, with its bytes (none when it cannot be read)."""
    try:
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()}
    except OSError:
        return {}


def _environment(
    base: Mapping[str, str], controls: Controls, folder: Path, module: str, records: int, tree: Path
) -> dict[str, str]:
    options = ["-p", module]
    restore: dict[str, str | None] = {"PYTEST_ADDOPTS": base.get("PYTEST_ADDOPTS")}
    env = {**controls.env}
    if controls.ini is not None:
        ini = folder / "pytest.ini"
        ini.write_text(controls.ini)
        rootdir = (tree / (controls.rootdir or ".")).resolve()
        options += ["-c", str(ini), f"--rootdir={rootdir}", f"--confcutdir={rootdir}"]
    if controls.plugins is not None:
        restore["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = base.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for plugin in controls.plugins:
            options += ["-p", plugin]
        if controls.plugins:  # pytest imported them to find their entry points: do not warn about it
            options += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    restore["PYTHONPATH"] = base.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), base.get("PYTHONPATH", "")) if p)
    env["PYTEST_ADDOPTS"] = " ".join([*map(shlex.quote, options), base.get("PYTEST_ADDOPTS", "")]).strip()
    found = os.fstat(records)
    env["HILBERT_GATE_RECORDS"] = f"{records}:{found.st_dev}:{found.st_ino}"
    env["HILBERT_GATE_RESTORE"] = json.dumps(restore)
    if controls.exported:  # out of the code under test's sight, as they were before the judge set them
        env["HILBERT_GATE_UNSEEN"] = json.dumps({name: base.get(name) for name in controls.exported})
    if controls.collect_only:
        env["HILBERT_GATE_COLLECT_ONLY"] = "1"
    if controls.order:
        env["HILBERT_GATE_ORDER"] = controls.order
    if controls.hide:
        env["HILBERT_GATE_HIDE"] = "1"
    return env


@dataclass
class _Session:
    """One pytest session's records: from its `start` to the next (a process may run several)."""

    rootdir: str | None
    inifile: str | None
    worker: str | None
    collected: list[str] = field(default_factory=list)
    deselected: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    phases: dict[str, dict[str, str]] = field(default_factory=dict)
    ended: bool = False

    def key(self, nodeid: object) -> str | None:
        """The node id keyed by this session's rootdir, relative to the tree."""
        if not isinstance(nodeid, str):
            return None
        return nodeid if self.rootdir in (None, ".") else f"{self.rootdir}/{nodeid}"

    def keys(self, nodeids: object) -> list[str]:
        found = (self.key(n) for n in nodeids) if isinstance(nodeids, list) else ()
        return [k for k in found if k is not None]


def read_records(
    lines: Iterable[str], tree: Path, plugin: str | None = None, untrusted: str = ""
) -> Outcomes | None:
    """The reporter's records merged, per pytest process: None when no session started and nothing
    was amiss. `plugin`: the reporter's file for this run (a session that names another is refused)."""
    by_process: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed process
        if isinstance(record, dict):
            by_process.setdefault(str(record.get("process")), []).append(record)
    why = [untrusted] if untrusted else []
    sessions: list[_Session] = []
    plugins: set[str] = set()
    workers: list[str] = []
    scope: list[str] = []
    for records in by_process.values():
        session: _Session | None = None
        for record in records:
            kind = record.get("kind")
            if kind == "start":
                if plugin is not None and record.get("plugin") != plugin:
                    why.append(
                        f"a pytest session loaded {record.get('plugin')!r} in place of the judge's reporter"
                    )
                worker = record.get("worker")
                rootdir = _relative(record.get("rootdir"), tree)
                session = _Session(
                    rootdir, _relative(record.get("inifile"), tree), str(worker) if worker else None
                )
                sessions.append(session)
                plugins.update(_strings(record.get("plugins")))
                scope += [s for p in _strings(record.get("scope")) if (s := _relative(p, tree)) is not None]
            elif session is None:
                why.append("the records hold lines of no session the judge's reporter started")
                break
            elif kind == "worker" and isinstance(record.get("id"), str):
                workers.append(record["id"])
            elif kind == "collected":
                session.collected += session.keys(record.get("nodeids"))
                into = session.deselected if record.get("selecting") else session.dropped
                into += session.keys(record.get("deselected"))
                session.dropped += session.keys(record.get("dropped"))
            elif kind == "report" and (key := session.key(record.get("nodeid"))) is not None:
                session.phases.setdefault(key, {})[str(record.get("when"))] = str(record.get("outcome"))
            elif kind == "finish":
                session.ended = True
    if not sessions and not why:
        return None
    outcomes: dict[str, str] = {}
    for session in sessions:
        for key, seen in session.phases.items():
            outcomes[key] = _worst(outcomes.get(key), _overall(seen))
    own = [s for s in sessions if s.worker is None]  # the command's sessions, not xdist workers
    first = own[0] if own else sessions[0] if sessions else _Session(None, None, None)
    reported = {s.worker for s in sessions}
    return Outcomes(
        tuple(dict.fromkeys(k for s in sessions for k in s.collected)),
        outcomes,
        all(s.ended for s in sessions) and not why,
        len(sessions),
        first.rootdir,
        first.inifile,
        tuple(sorted(plugins)),
        tuple(dict.fromkeys((s.rootdir, s.inifile) for s in own)),
        tuple(w for w in dict.fromkeys(workers) if w not in reported),
        tuple(dict.fromkeys(k for s in sessions for k in s.deselected)),
        tuple(dict.fromkeys(k for s in sessions for k in s.dropped)),
        tuple(dict.fromkeys(scope)),
        "; ".join(dict.fromkeys(why)),
    )


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


SEVERITY = ("failed", "incomplete", "passed", "xpassed", "xfailed", "skipped")


def _worst(before: str | None, now: str) -> str:
    """Of one test's outcomes in two sessions, the one that counts: a failure anywhere is a failure,
    a pass anywhere beats a skip."""
    if before is None:
        return now
    rank = {outcome: i for i, outcome in enumerate(SEVERITY)}
    return min(before, now, key=lambda o: rank.get(o, 0))


def _overall(phases: Mapping[str, str]) -> str:
    values = phases.values()
    if "failed" in values:
        return "failed"
    if "skipped" in values:
        return "skipped"
    if phases.get("setup") == "xfailed":  # `pytest.xfail()` in a fixture: no call phase, as pytest has it
        return "xfailed"
    if "call" not in phases or "teardown" not in phases:
        return "incomplete"
    return phases["call"]


def _relative(path: object, tree: Path) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    try:
        return str(Path(path).resolve().relative_to(tree.resolve()))
    except ValueError:
        return None  # outside the tree: not something the base can impose


__all__ = ["Controls", "Outcomes", "TestRun", "read_records", "run_tests"]
