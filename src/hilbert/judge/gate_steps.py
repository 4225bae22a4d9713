"""The stop gate's test-running steps, with the base commit as the reference for how tests run.

`Steps` runs each command of the gate (`hilbert.judge.gate`) through the one command runner, on clean
exports, with the judge's reporter gathering the outcomes itself (`hilbert.judge.testruns`):

- the **reference** is the task's verify command at base, collection only: which node ids it collects
  there, the rootdir, the ini file and the entry-point plugins. Every run at head then uses the base's
  configuration (`hilbert.judge.pytest_config`, only markers taken from the candidate), plugin autoload
  off with the base's plugins loaded by name, and is judged by `assess`: each test collected at base must
  pass at head, unless it did not run at base either (the base is run in full only to settle that); a
  session that ends without its end-of-session record fails; a new test that skips or xfails is noted,
  not rejected; a verify that starts no pytest is judged on its exit status alone, and says so.
- **perturbed** runs verify and the held-out tests again under a `Perturbation`, and counts only the
  outcomes that changed at head but not at base under the same perturbation.

Runs at base are cached in `cache` (a folder) per base tree, command and perturbation, so many gate
calls on one base (a fleet) pay for them once. Nothing here writes outside `scratch` and `cache`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hilbert.commands import Output, Runner, verify_timeout
from hilbert.judge.change import Allowances, FileChange, is_test_path
from hilbert.judge.evidence import Step
from hilbert.judge.export import export_commit
from hilbert.judge.perturb import Perturbation
from hilbert.judge.pytest_config import CANDIDATES, base_options, compose_ini
from hilbert.judge.testruns import Controls, Outcomes, TestRun, run_tests
from hilbert.workspaces.git import Git

EXIT = "(exit status)"  # the one "test" of a command that starts no pytest
EXIT_ONLY = (
    "exit status only: the command started no pytest, so the judge could not see which tests ran "
    "or how each came out"
)
RAN = frozenset({"passed", "failed", "xpassed", "incomplete"})


@dataclass(frozen=True)
class Result:
    """What a run left for comparison: its exit status was 0, and the outcomes (None: no pytest)."""

    ok: bool
    outcomes: Outcomes | None

    def table(self) -> dict[str, str]:
        """Outcome per node id; a command without pytest has one entry, its exit status."""
        if self.outcomes is None:
            return {EXIT: "passed" if self.ok else "failed"}
        return dict(self.outcomes.outcomes)

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "outcomes": None if self.outcomes is None else self.outcomes.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Result:
        outcomes = data.get("outcomes")
        return cls(bool(data["ok"]), Outcomes.from_json(outcomes) if isinstance(outcomes, dict) else None)


@dataclass(frozen=True)
class Reference:
    """The base's reference for one command: its collection there and its pytest options."""

    outcomes: Outcomes | None
    options: dict[str, str | list[str]]
    where: str  # the ini file's folder, relative to the tree

    @property
    def imposed(self) -> bool:
        """Whether runs at head get the base's configuration: not when the base's sessions ran under
        different rootdirs or ini files (`pytest a && cd sub && pytest`), one ini cannot stand for all."""
        return self.outcomes is not None and self.outcomes.one_config

    def controls(self, head_tree: Path) -> Controls:
        if self.outcomes is None:
            return Controls()
        if not self.imposed:  # each session keeps its own configuration; the plugins are still the base's
            return Controls(plugins=self.outcomes.plugins)
        ini = compose_ini(self.options, self.where, head_tree)
        return Controls(ini=ini, rootdir=self.outcomes.rootdir or ".", plugins=self.outcomes.plugins)


class Steps:
    def __init__(
        self,
        repo: Path,
        scratch: Path,
        git: Git,
        runner: Runner,
        on_wait: Callable[[str, float], None] | None,
        *,
        base: str,
        head: str,
        cache: Path | None = None,
        perturbation: Perturbation | None = None,
    ) -> None:
        self.repo, self.scratch, self.git, self.runner, self.on_wait = repo, scratch, git, runner, on_wait
        self.base, self.head, self.cache = base, head, cache
        self.perturbation = perturbation or Perturbation.draw()
        self.exports = 0
        self.normal: dict[str, Result] = {}  # command -> its run at head, for the perturbed step
        self._tree: str | None = None
        self.memo: dict[str, dict[str, object]] = {}
        self.references: dict[str, Reference] = {}

    # -- exports and runs -------------------------------------------------------------------------

    async def export(self, commit: str, where: Path | None = None) -> Path:
        """`commit`'s tree from its raw blobs (`export_commit`: no attribute, filter or replace ref
        of the commit's steers it) in a new folder."""
        self.exports += 1
        tree = where or self.scratch / f"export-{self.exports}"
        tree.parent.mkdir(parents=True, exist_ok=True)
        return await export_commit(self.git, self.repo, commit, tree)

    async def run(self, name: str, command: str, tree: Path, controls: Controls) -> TestRun:
        on_wait = self.on_wait
        return await run_tests(
            self.runner,
            command,
            tree,
            controls,
            timeout=verify_timeout(self.runner.timeouts),
            output=Output(3000, lambda: None),
            on_wait=(lambda elapsed: on_wait(name, elapsed)) if on_wait else None,
        )

    async def base_tree_id(self) -> str:
        if self._tree is None:
            self._tree = (
                await self.git.run("rev-parse", f"{self.base}^{{tree}}", cwd=self.repo)
            ).stdout.strip()
        return self._tree

    async def cached(
        self, key: Sequence[str], make: Callable[[], Awaitable[dict[str, object]]]
    ) -> dict[str, object]:
        """`make()`'s JSON, kept in the cache folder under `key` (with the base tree)."""
        digest = hashlib.sha256(json.dumps([await self.base_tree_id(), *key]).encode()).hexdigest()[:32]
        if digest in self.memo:
            return self.memo[digest]
        path = self.cache / f"{digest}.json" if self.cache else None
        if path is not None and path.is_file():
            try:
                found = json.loads(path.read_text())
                if isinstance(found, dict):
                    self.memo[digest] = found
                    return found
            except (OSError, ValueError):
                pass
        value = self.memo[digest] = await make()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(f".{id(value)}.part")
            part.write_text(json.dumps(value))
            part.replace(path)
        return value

    # -- the base as reference --------------------------------------------------------------------

    async def reference(self, command: str) -> Reference:
        if command in self.references:
            return self.references[command]

        async def collect() -> dict[str, object]:
            tree = await self.export(self.base)
            run = await self.run("reference", command, tree, Controls(collect_only=True))
            options: dict[str, str | list[str]] = {}
            where = "."
            if run.outcomes is not None:
                options, where = base_options(tree, run.outcomes.inifile)
            await asyncio.to_thread(shutil.rmtree, tree, True)
            outcomes = None if run.outcomes is None else run.outcomes.to_json()
            return {"outcomes": outcomes, "options": options, "where": where}

        data = await self.cached(("reference", command), collect)
        outcomes = data.get("outcomes")
        self.references[command] = Reference(
            Outcomes.from_json(outcomes) if isinstance(outcomes, dict) else None,
            dict(data.get("options") or {}),  # type: ignore[call-overload]
            str(data.get("where") or "."),
        )
        return self.references[command]

    async def at_base(
        self, command: str, heldout: Path | None, reference: Reference, perturbed: bool
    ) -> Result:
        """The whole run of `command` at base (with the held-out tests copied in, if any), plainly
        or under this gate's perturbation; cached."""
        key = ("base", command, str(heldout or ""), self.perturbation.seed if perturbed else "")

        async def make() -> dict[str, object]:
            tree = await self.export(self.base, self._perturbed_folder() if perturbed else None)
            if heldout is not None:
                await asyncio.to_thread(_copy_heldout, heldout, tree)
            controls = reference.controls(tree)
            if perturbed:
                controls = self._perturb(controls, tree)
            run = await self.run("base", command, tree, controls)
            await asyncio.to_thread(shutil.rmtree, tree.parent if perturbed else tree, True)
            return Result(run.ran.ok, run.outcomes).to_json()

        return Result.from_json(await self.cached(key, make))

    def _perturbed_folder(self) -> Path:
        self.exports += 1
        return self.scratch / f"p{self.exports}-{self.perturbation.folder}" / self.perturbation.folder[::-1]

    def _perturb(self, controls: Controls, tree: Path) -> Controls:
        env = self.perturbation.env(tree)
        for folder in ("TMPDIR", "HOME"):
            Path(env[folder]).mkdir(parents=True, exist_ok=True)
        if self.perturbation.faketime:
            env["HILBERT_GATE_SLEEP"] = "1"
        return Controls(
            exported=self.perturbation.clock(),
            order=self.perturbation.order,
            hide=True,
            ini=controls.ini,
            rootdir=controls.rootdir,
            plugins=controls.plugins,
            env=env,
        )

    def gathered(self, command: str) -> bool:
        """Whether the run of `command` at head reported pytest's outcomes: some test's, all of them
        (no xdist worker unseen), under the base's configuration."""
        found = self.normal.get(command)
        reference = self.references.get(command)
        return (
            found is not None
            and found.outcomes is not None
            and bool(found.outcomes.outcomes)
            and not found.outcomes.unseen
            and (reference is None or reference.outcomes is None or reference.imposed)
        )

    # -- the steps --------------------------------------------------------------------------------

    async def verify(self, command: str, allow: Allowances, new_tests: Sequence[str] = ()) -> Step:
        """The verify command at head. A command that names pytest gets the base's reference first;
        any other runs once as it is, and only if it turns out to start pytest (`make test`) is it
        run again under the reference: a command without pytest costs no run at base. `new_tests`:
        the test files the change added (their tests, where collected, must run)."""
        tree = await self.export(self.head)
        if not names_pytest(command):
            run = await self.run("verify", command, tree, Controls())
            if run.outcomes is None:
                self.references[command] = Reference(None, {}, ".")
                self.normal[command] = Result(run.ran.ok, None)
                return await self.assess("verify", command, run, self.references[command], allow, tree)
            tree = await self.export(self.head)
        reference = await self.reference(command)
        run = await self.run("verify", command, tree, reference.controls(tree))
        self.normal[command] = Result(run.ran.ok, run.outcomes)
        return await self.assess("verify", command, run, reference, allow, tree, new_tests=new_tests)

    async def restored(self, command: str, files: list[FileChange], allow: Allowances) -> Step:
        """The verify run again with the tests the change edited or removed put back as at base."""
        reference = await self.reference(command)
        tree = await self.export(self.head)
        for changed in files:
            old = changed.old_path or changed.path
            if changed.old_text is None:
                continue  # binary: cannot be put back as text
            if changed.status == "renamed":
                (tree / changed.path).unlink(missing_ok=True)
            (tree / old).parent.mkdir(parents=True, exist_ok=True)
            (tree / old).write_text(changed.old_text)
        run = await self.run("tests_restored", command, tree, reference.controls(tree))
        step = await self.assess("tests_restored", command, run, reference, allow, tree)
        names = ", ".join(f.old_path or f.path for f in files)
        return Step(
            step.name, step.passed, f"{step.summary} with the original {names}", step.findings, step.output
        )

    async def without_infrastructure(
        self, command: str, files: list[FileChange], new_tests: list[FileChange], allow: Allowances
    ) -> Step:
        """The existing tests again, with the candidate's new or changed conftests and pytest
        configuration removed (put back as at base) and its new test files left out."""
        reference = await self.reference(command)
        tree = await self.export(self.head)
        _as_at_base(tree, files)
        for new in new_tests:
            (tree / new.path).unlink(missing_ok=True)
        run = await self.run("infra_removed", command, tree, reference.controls(tree))
        step = await self.assess("infra_removed", command, run, reference, allow, tree, only_base=True)
        names = ", ".join(f.path for f in files)
        return Step(
            step.name, step.passed, f"{step.summary} without the change's {names}", step.findings, step.output
        )

    async def heldout(self, folder: Path, command: str, infra: Sequence[FileChange] = ()) -> Step:
        """The held-out tests, copied into a fresh export without the candidate's conftests and pytest
        configuration (`infra`, put back as at base: a conftest hook could clear a failure before the
        reporter reads it); each one collected must report a pass. The summary names no file and
        quotes nothing: the worker is told only that held-out tests failed."""
        tree = await self.export(self.head)
        _as_at_base(tree, infra)
        await asyncio.to_thread(_copy_heldout, folder, tree)
        reference = await self.reference(command)  # the verify's reference: the base's configuration
        run = await self.run("heldout", heldout_command(folder), tree, reference.controls(tree))
        self.normal[heldout_command(folder)] = Result(run.ran.ok, run.outcomes)
        out = run.outcomes
        why = ""
        if out is None:
            why = "no test session reported: the held-out tests did not run under pytest"
        elif not out.finished:
            why = "the test session ended without its end-of-session record"
        elif not out.collected:
            why = "no held-out test was collected"
        elif out.not_passing(out.collected):
            why = f"{len(out.not_passing(out.collected))} held-out test(s) did not report a pass"
        passed = not why and run.ran.ok
        summary = "the held-out tests pass" if passed else "held-out tests the worker never saw fail"
        output = (f"[hilbert: {why}]\n" if why else "") + run.ran.text(tree)  # no model sees it
        return Step("heldout", passed, summary, output=output)

    async def perturbed(self, commands: dict[str, Path | None], verify: str) -> Step:
        """Each command again under the perturbation; a test whose outcome changes at head but not
        at base under the same perturbation is a finding."""
        reference = await self.reference(verify)

        async def one(command: str, heldout: Path | None) -> list[str]:
            tree = await self.export(self.head, self._perturbed_folder())
            if heldout is not None:
                await asyncio.to_thread(_copy_heldout, heldout, tree)
            run = await self.run("perturbed", command, tree, self._perturb(reference.controls(tree), tree))
            changed = _changed(self.normal[command], Result(run.ran.ok, run.outcomes))
            if not changed:
                return []
            plain, moved = await asyncio.gather(
                self.at_base(command, heldout, reference, perturbed=False),
                self.at_base(command, heldout, reference, perturbed=True),
            )
            at_base = _changed(plain, moved)
            return [
                f"{'a held-out test' if heldout is not None else nodeid} passes as usual but is {now} "
                "in perturbed conditions (it is not at base)"
                for nodeid, now in changed.items()
                if nodeid not in at_base
            ]

        found = await asyncio.gather(*(one(command, heldout) for command, heldout in commands.items()))
        findings = tuple(f for part in found for f in part)
        summary = (
            "no outcome changed in perturbed conditions that does not change at base"
            if not findings
            else f"{len(findings)} outcome(s) change in perturbed conditions and not at base"
        )
        return Step("perturbed", not findings, summary, findings, output=self.perturbation.describe())

    # -- judging one run --------------------------------------------------------------------------

    async def assess(
        self,
        name: str,
        command: str,
        run: TestRun,
        reference: Reference,
        allow: Allowances,
        tree: Path,
        *,
        only_base: bool = False,
        new_tests: Sequence[str] = (),
    ) -> Step:
        """The step for one run at head: exit status and, when pytest ran, the outcomes it gathered.
        The tests of `new_tests` (files the change added) that the run collected must run."""
        status = f"`{command}` → {run.ran.status()}"
        output = run.ran.text(tree)
        out, base = run.outcomes, reference.outcomes
        if out is None:
            if base is not None:
                why = "the verify command ran pytest at base, but no pytest reported at head"
                return Step(name, False, status, (why,), output)
            if not run.ran.ok:  # a failure needs no caveat
                return Step(name, False, status, output=output)
            return Step(name, True, f"{status} ({EXIT_ONLY})", (EXIT_ONLY,), output)
        findings: list[str] = []
        notes: list[str] = []
        caveats = [unseen(out.unseen)] if out.unseen else []  # shown, but not failing by themselves
        if not out.finished:
            findings.append(
                "a test session ended without its end-of-session record (the process exited early)"
            )
        if base is not None and not reference.imposed:
            shown = ", ".join(f"{root or '?'} ({ini or 'no ini file'})" for root, ini in base.configs[:5])
            notes.append(
                f"the command's pytest sessions run under different rootdirs or ini files ({shown}): "
                "each ran with its own configuration, not one imposed from base; outcomes gathered only"
            )
        expected = [n for n in (base.collected if base else ()) if not _allowed(n, reference, allow)]
        failing = [n for n, o in out.outcomes.items() if o in ("failed", "incomplete")]
        if only_base:
            failing = [n for n in failing if n in set(expected)]
        if failing:
            findings.append(f"{len(failing)} test(s) failed: {', '.join(failing[:5])}")
        missing = {
            n: out.outcome(n) for n in expected if out.outcome(n) not in ("passed", "failed", "incomplete")
        }
        if missing:
            plain = await self.at_base(command, None, reference, perturbed=False)
            at_base = plain.table()
            stopped = {n: now for n, now in missing.items() if at_base.get(n) in RAN}
            if stopped:
                shown = ", ".join(f"{n} ({now})" for n, now in list(stopped.items())[:5])
                findings.append(
                    f"{len(stopped)} test(s) that ran at base do not run now or are skipped: {shown}"
                )
        if not only_base:
            new = {
                n: o
                for n, o in out.outcomes.items()
                if n not in set(expected) and o in ("skipped", "xfailed")
            }
            if new:
                notes.append(f"new test(s) {'/'.join(sorted(set(new.values())))}: {', '.join(list(new)[:5])}")
            more, more_notes = _new_tests(out, new_tests)
            findings += more
            notes += more_notes
        passed = run.ran.ok and not findings
        counts = _counts(out.outcomes.values())
        summary = f"{status}; outcomes gathered by the judge: {counts or 'no test ran'}"
        if caveats:
            summary += f" ({caveats[0]})"
        if not passed and not findings:  # exit status non-zero, every outcome fine: the status says why
            findings.append("every test it ran passed, but the command did not succeed")
        findings = [f"{finding} ({status})" for finding in findings]  # the worker sees the command too
        return Step(name, passed, summary, tuple(findings + caveats + [f"noted: {n}" for n in notes]), output)


def names_pytest(command: str) -> bool:
    """Whether the command names pytest itself (`python -m pytest`, `pytest`, `py.test`)."""
    return any(word in command for word in ("pytest", "py.test"))


def heldout_command(folder: Path) -> str:
    tests = sorted(
        p for p in Path(folder).rglob("*.py") if p.is_file() and p.name not in ("conftest.py", "__init__.py")
    )
    names = " ".join(
        shlex.quote(str(PurePosixPath(".hilbert-heldout") / p.relative_to(folder))) for p in tests
    )
    return f"python -m pytest -q -p no:cacheprovider {names}"


def _as_at_base(tree: Path, files: Sequence[FileChange]) -> None:
    """Put `files` back in `tree` as they were at base (remove those the change added)."""
    for changed in files:
        target = tree / changed.path
        if changed.status == "added" or changed.old_text is None:
            target.unlink(missing_ok=True)
        else:
            target.write_text(changed.old_text)


def _copy_heldout(folder: Path, tree: Path) -> None:
    shutil.copytree(folder, tree / ".hilbert-heldout")


def _changed(normal: Result, perturbed: Result) -> dict[str, str]:
    """The tests that passed in the normal run and do not in the perturbed one: id -> now."""
    now = perturbed.table()
    return {
        n: now.get(n, "not run")
        for n, o in normal.table().items()
        if o == "passed" and now.get(n) != "passed"
    }


def _allowed(nodeid: str, reference: Reference, allow: Allowances) -> bool:
    return allow.allows(_file(nodeid))  # node ids are keyed by their rootdir: a path in the tree


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def unseen(workers: Sequence[str]) -> str:
    return (
        f"exit status only for {len(workers)} pytest-xdist worker(s) that reported nothing to the judge "
        f"({', '.join(w.split('@')[0] for w in workers[:5])}): the outcomes of the tests they ran could "
        "not be gathered"
    )


def _new_tests(out: Outcomes, new_tests: Sequence[str]) -> tuple[list[str], list[str]]:
    """Findings and notes on the tests of the change's new test files: those collected must run
    (a hook that drops them, or stops them running, is a finding); those the command's own selection
    options deselect are noted, as is a new test module in the command's scope that collects nothing.
    A new file the command does not collect from is nobody's concern."""
    files = set(new_tests)
    never = [n for n in out.collected if _file(n) in files and out.outcome(n) == "not run"]
    dropped = [n for n in out.dropped if _file(n) in files]
    deselected = [n for n in out.deselected if _file(n) in files]
    findings: list[str] = []
    notes: list[str] = []
    if never:
        findings.append(f"{len(never)} new test(s) collected but never run: {', '.join(never[:5])}")
    if dropped:
        findings.append(
            f"{len(dropped)} new test(s) collected and then left out of the run by a hook (not by the "
            f"command's -k, -m or --deselect): {', '.join(dropped[:5])}"
        )
    if deselected:
        notes.append(
            f"new test(s) deselected by the command's selection options: {', '.join(deselected[:5])}"
        )
    seen = {_file(n) for n in (*out.collected, *out.dropped, *out.deselected)}
    empty = [
        f
        for f in new_tests
        if f not in seen and _test_module(f) and any(_under(f, where) for where in out.scope)
    ]
    if empty:
        notes.append(
            f"new test file(s) in the command's collection scope collect no test: {', '.join(empty[:5])}"
        )
    return findings, notes


def _test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") or name.endswith("_test.py")


def _under(path: str, where: str) -> bool:
    return where == "." or path == where or path.startswith(where.rstrip("/") + "/")


def _counts(outcomes: object) -> str:
    tally: dict[str, int] = {}
    for outcome in outcomes:  # type: ignore[attr-defined]
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(tally.items()))


def infrastructure(files: Sequence[FileChange]) -> list[FileChange]:
    """The conftests and pytest configuration files the change added or changed."""
    return [
        f
        for f in files
        if f.status in ("added", "modified", "renamed")
        and (PurePosixPath(f.path).name == "conftest.py" or f.path in CANDIDATES)
    ]


def new_test_files(files: Sequence[FileChange]) -> list[FileChange]:
    return [f for f in files if f.status == "added" and is_test_path(f.path) and f.path.endswith(".py")]


__all__ = ["EXIT_ONLY", "Reference", "Result", "Steps", "heldout_command", "infrastructure"]
