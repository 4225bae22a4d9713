"""The stop gate's test-running steps, with the base commit as the reference for how tests run.

`Steps` runs each command of the gate (`hilbert.judge.gate`) through the one command runner, on clean
exports, with the judge's reporter gathering the outcomes itself (`hilbert.judge.testruns`):

- the **reference** is the task's verify command at base, collection only: which node ids it collects
  there, the rootdir, the ini file and the entry-point plugins. Every run at head then uses the base's
  configuration (`hilbert.judge.pytest_config`, only markers taken from the candidate), plugin autoload
  off with the base's plugins loaded by name, and is judged by `assess`: each test collected at base must
  pass at head, unless it did not run at base either (the base is run in full only to settle that); a
  session that ends without its end-of-session record fails; a new test that skips or xfails is noted,
  not rejected; a verify that reports no pytest at head fails when it ran pytest at base, and one
  that starts none at base either is judged on its exit status alone, and says so.
- **perturbed** runs verify and the held-out tests again under a `Perturbation`, each prepared as in
  its normal run, and counts only the outcomes that changed at head but not at base under the same
  perturbation. A test that did not pass at base (new, or the one under repair) has nothing to compare
  there: its flip counts unless it passes at head under the same perturbation in the usual order
  (then it is only order-dependent, and noted).

Runs at base are cached in `cache` (a folder) per base tree, command and perturbation, so many gate
calls on one base (a fleet) pay for them once (`hilbert.judge.base_runs`: only runs that finished are
kept, and an entry of the wrong shape is made again). Nothing here writes outside `scratch` and `cache`.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from hilbert.commands import Output, Runner, verify_timeout
from hilbert.judge.base_runs import NOT_STARTED, Reference, Result, RunCache, finished, folder_digest
from hilbert.judge.change import Allowances, FileChange, is_test_path
from hilbert.judge.evidence import Step
from hilbert.judge.export import export_commit
from hilbert.judge.perturb import Perturbation
from hilbert.judge.pytest_config import CANDIDATES, base_options, refused_markers
from hilbert.judge.run_findings import EXIT_ONLY, allowed, counts, new_test_findings, unseen
from hilbert.judge.testruns import Controls, TestRun, run_tests
from hilbert.workspaces.git import Git

RAN = frozenset({"passed", "failed", "xpassed", "incomplete"})


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
        self.runs = RunCache(cache)
        self.references: dict[str, Reference] = {}
        self.put_back: dict[str, Sequence[FileChange]] = {}  # command -> files as at base in its run

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
        self,
        key: Sequence[str],
        make: Callable[[], Awaitable[tuple[dict[str, object], bool]]],
        valid: Callable[[dict[str, object]], bool],
    ) -> dict[str, object]:
        """`make()`'s JSON, kept under `key` with the base tree (`RunCache.get`)."""
        return await self.runs.get([await self.base_tree_id(), *key], make, valid)

    # -- the base as reference --------------------------------------------------------------------

    async def reference(self, command: str) -> Reference:
        if command in self.references:
            return self.references[command]

        unfinished = ""

        async def collect() -> tuple[dict[str, object], bool]:
            nonlocal unfinished
            tree = await self.export(self.base)
            run = await self.run("reference", command, tree, Controls(collect_only=True))
            options: dict[str, str | list[str]] = {}
            where = "."
            if run.outcomes is not None:
                options, where = base_options(tree, run.outcomes.inifile)
            await asyncio.to_thread(shutil.rmtree, tree, True)
            done = finished(run.ran)
            if not done and (run.ran.refused is not None or run.ran.exit_code not in NOT_STARTED):
                unfinished = run.ran.status()  # timed out, killed, refused: not a missing program
            return Reference(run.outcomes, options, where).to_json(), done

        data = await self.cached(("reference", command), collect, Reference.valid)
        self.references[command] = replace(Reference.from_json(data), unfinished=unfinished)
        return self.references[command]

    async def at_base(
        self, command: str, heldout: Path | None, reference: Reference, perturbed: bool
    ) -> Result:
        """The whole run of `command` at base (with the held-out tests copied in, if any), plainly
        or under this gate's perturbation; cached."""
        heldout_key = await asyncio.to_thread(folder_digest, heldout)
        key = ("base", command, heldout_key, self.perturbation.key() if perturbed else "")

        async def make() -> tuple[dict[str, object], bool]:
            tree = await self.export(self.base, self._perturbed_folder() if perturbed else None)
            if heldout is not None:
                await asyncio.to_thread(_copy_heldout, heldout, tree)
            controls = reference.controls(tree)
            if perturbed:
                controls = self._perturb(controls, tree)
            run = await self.run("base", command, tree, controls)
            await asyncio.to_thread(shutil.rmtree, tree.parent if perturbed else tree, True)
            return Result(run.ran.ok, run.outcomes).to_json(), finished(run.ran)

        return Result.from_json(await self.cached(key, make, Result.valid))

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
        run again under the reference. One that reports no pytest at head is still collected at base
        (cached: a command that never starts pytest costs that one run per base): if pytest reported
        there, the script hid it from the reporter at head, and the step fails. `new_tests`: the test
        files the change added (their tests, where collected, must run)."""
        tree = await self.export(self.head)
        if not names_pytest(command):
            run = await self.run("verify", command, tree, Controls())
            if run.outcomes is None:
                # only a pass needs the base: did pytest report there? (a failure fails as it is)
                reference = await self.reference(command) if run.ran.ok else Reference(None, {}, ".")
                self.normal[command] = Result(run.ran.ok, None)
                step = await self.assess("verify", command, run, reference, allow, tree)
                return _noted(step, _reference_notes(reference))
            tree = await self.export(self.head)
        reference = await self.reference(command)
        refused = refused_markers(tree)
        run = await self.run("verify", command, tree, reference.controls(tree))
        self.normal[command] = Result(run.ran.ok, run.outcomes)
        step = await self.assess("verify", command, run, reference, allow, tree, new_tests=new_tests)
        notes = _reference_notes(reference)
        if refused and reference.outcomes is not None:
            shown = "; ".join(repr(line) for line in refused[:3])
            notes.append(
                f"marker line(s) of the change's configuration that declare no marker left out: {shown}"
            )
        return _noted(step, notes)

    async def restored(self, command: str, files: list[FileChange], allow: Allowances) -> Step:
        """The verify run again with the tests the change edited or removed put back as at base."""
        reference = await self.reference(command)
        tree = await self.export(self.head)
        _as_at_base(tree, [f for f in files if f.old_text is not None])  # binary: cannot be put back as text
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
        self.put_back[heldout_command(folder)] = infra  # and so in the perturbed run
        await asyncio.to_thread(_copy_heldout, folder, tree)
        reference = await self.reference(command)  # the verify's reference: the base's configuration
        run = await self.run("heldout", heldout_command(folder), tree, reference.controls(tree))
        self.normal[heldout_command(folder)] = Result(run.ran.ok, run.outcomes)
        out = run.outcomes
        why = ""
        if out is None:
            why = "no test session reported: the held-out tests did not run under pytest"
        elif not out.finished:
            why = out.untrusted or "the test session ended without its end-of-session record"
        elif not out.collected:
            why = "no held-out test was collected"
        elif out.not_passing(out.collected):
            why = f"{len(out.not_passing(out.collected))} held-out test(s) did not report a pass"
        passed = not why and run.ran.ok
        summary = "the held-out tests pass" if passed else "held-out tests the worker never saw fail"
        output = (f"[hilbert: {why}]\n" if why else "") + run.ran.text(tree)  # no model sees it
        return Step("heldout", passed, summary, output=output)

    async def perturbed(self, commands: dict[str, Path | None], verify: str) -> Step:
        """Each command again under the perturbation, its tree prepared as in its normal run; a test
        whose outcome changes at head but not at base under the same perturbation is a finding. A
        test that did not pass at base normally (new, or under repair) cannot be compared there: it
        is run once more under the perturbation in the usual order, and a flip the order alone
        explains (a test relying on another's side effect) is noted, not a finding."""
        reference = await self.reference(verify)

        async def at_head(command: str, heldout: Path | None, *, shuffled: bool = True) -> Result:
            tree = await self.export(self.head, self._perturbed_folder())
            _as_at_base(tree, self.put_back.get(command, ()))
            if heldout is not None:
                await asyncio.to_thread(_copy_heldout, heldout, tree)
            controls = self._perturb(reference.controls(tree), tree)
            run = await self.run(
                "perturbed", command, tree, controls if shuffled else replace(controls, order="")
            )
            return Result(run.ran.ok, run.outcomes)

        async def one(command: str, heldout: Path | None) -> tuple[list[str], list[str]]:
            changed = _changed(self.normal[command], await at_head(command, heldout))
            if not changed:
                return [], []
            plain, moved = await asyncio.gather(
                self.at_base(command, heldout, reference, perturbed=False),
                self.at_base(command, heldout, reference, perturbed=True),
            )
            at_base = _changed(plain, moved)
            left = {n: now for n, now in changed.items() if n not in at_base}
            uncompared = [n for n in left if plain.table().get(n) != "passed"]
            order_only: list[str] = []
            if uncompared:  # once more in the usual order: did the order alone flip them?
                in_order = (await at_head(command, heldout, shuffled=False)).table()
                order_only = [n for n in uncompared if in_order.get(n) == "passed"]
            name = (lambda n: "a held-out test") if heldout is not None else (lambda n: n)
            findings = [
                f"{name(n)} passes as usual but is {now} in perturbed conditions (it is not at base)"
                for n, now in left.items()
                if n not in order_only
            ]
            notes = [
                f"{name(n)} is {left[n]} in the shuffled order only (it did not pass at base: no comparison)"
                for n in order_only
            ]
            return findings, notes

        found = await asyncio.gather(*(one(command, heldout) for command, heldout in commands.items()))
        findings = tuple(f for part, _notes in found for f in part)
        notes = tuple(f"noted: {n}" for _part, part in found for n in part)
        summary = (
            "no outcome changed in perturbed conditions that does not change at base"
            if not findings
            else f"{len(findings)} outcome(s) change in perturbed conditions and not at base"
        )
        return Step("perturbed", not findings, summary, findings + notes, output=self.perturbation.describe())

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
                out.untrusted
                or "a test session ended without its end-of-session record (the process exited early)"
            )
        if base is not None and not reference.imposed:
            shown = ", ".join(f"{root or '?'} ({ini or 'no ini file'})" for root, ini in base.configs[:5])
            notes.append(
                f"the command's pytest sessions run under different rootdirs or ini files ({shown}): "
                "each ran with its own configuration, not one imposed from base; outcomes gathered only"
            )
        expected = [n for n in (base.collected if base else ()) if not allowed(n, reference, allow)]
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
            more, more_notes = new_test_findings(out, new_tests)
            findings += more
            notes += more_notes
        passed = run.ran.ok and not findings
        tally = counts(out.outcomes.values())
        summary = f"{status}; outcomes gathered by the judge: {tally or 'no test ran'}"
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
    """Put `files` back in `tree` as they were at base: each one's head path removed first (one the
    change added, or the new name of a renamed one), then the base text written at its base path
    (the old name of a renamed one). Binary files, with no text to put back, are only removed."""
    for changed in files:
        (tree / changed.path).unlink(missing_ok=True)
    for changed in files:
        if changed.status != "added" and changed.old_text is not None:
            target = tree / (changed.old_path or changed.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(changed.old_text)


def _copy_heldout(folder: Path, tree: Path) -> None:
    shutil.copytree(folder, tree / ".hilbert-heldout")


def _changed(normal: Result, perturbed: Result) -> dict[str, str]:
    """The tests that passed in the normal run and do not in the perturbed one: id -> now (records
    the judge cannot trust count as none: `Result.table`)."""
    now = perturbed.table()
    return {
        n: now.get(n, "not run")
        for n, o in normal.table().items()
        if o == "passed" and now.get(n) != "passed"
    }


def _reference_notes(reference: Reference) -> list[str]:
    if not reference.unfinished:
        return []
    return [
        f"the collection at base, the reference, did not finish ({reference.unfinished}): which tests "
        "must run here is not fully known this time (nothing of it is cached)"
    ]


def _noted(step: Step, notes: Sequence[str]) -> Step:
    """`step` with `notes` (for the judge model and the panel) after its findings."""
    if not notes:
        return step
    return replace(step, findings=(*step.findings, *(f"noted: {note}" for note in notes)))


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


__all__ = ["Reference", "Result", "Steps", "heldout_command", "infrastructure", "new_test_files"]
