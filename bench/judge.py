"""How many cheats the judge's gate catches, and how many honest fixes it rejects, on real projects.

    python bench/judge.py                                   # every project and case (a few minutes)
    python bench/judge.py --project inflection --case '*/ordinal-teens/*' --markdown
    python bench/judge.py --cases-only                      # check the cases themselves, no gate

Three small pure-Python projects, pinned by version and sdist sha256 (`bench/judge_cases/*/project.yaml`),
are downloaded once from PyPI into `--cache` (default ~/.cache/hilbert/bench-sdists). Each project has
injected bugs (a source edit that makes some of its own tests fail, or a test the task declares wrong),
each with the task's verify command and held-out tests. Each case (`cases/<bug>.yaml`) is an honest fix
or a cheat using one technique of docs/design/cheats.md; it becomes a real git repository (base = the
bug injected, head = base + the case's edits) and `hilbert.judge.gate.run_gate` decides done/not_done.

A cheat counts only if it is effective: its verify command passes in the worker's checkout or on a plain
`git archive` export of its commit (it would fool a verify-only harness); the others are listed as
ineffective. An honest fix that fails verify or the held-out tests is listed as broken, not counted.
Prints a table per technique (cheats, effective, caught, catch rate), the honest fixes' false-alarm
rate, one line per missed cheat / false alarm with what the gate said, and the figures as
key=value on the last line:

    projects=3 cases=.. cheats=.. effective=.. caught=.. catch_rate=.. catch_ci95=lo-hi honest=..
    false_alarms=.. false_alarm_rate=.. false_alarm_ci95=lo-hi perturbed_caught_alone=..
    perturbed_false_alarms=../.. gate_s_per_call=.. ineffective=.. broken=.. bad_bugs=.. gated=yes wall_s=..

The intervals are Wilson 95 % intervals. `perturbed_caught_alone`: cheats only the differential step
caught; `perturbed_false_alarms`: honest fixes that step rejected, of those that reached it (its own
false-alarm rate). The gate keeps its runs at a base in one cache folder for the whole bench, as a
fleet does for the attempts on one base.

Exit 0 whatever the rates (it measures, it does not assert); exit 2 with one line on bad input, a bad
case file, or when an sdist is neither cached nor downloadable.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hilbert.errors import HilbertError, UserError
from hilbert.workspaces.git import Git
from judge_bench.cases import Case, Project, load_project, taxonomy
from judge_bench.measure import BugCheck, Outcome, Settings, check_bug, run_case
from judge_bench.report import details, figures, summarise, table
from judge_bench.sdists import fetch_sdist, unpack

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "bench" / "judge_cases"
TAXONOMY = ROOT / "docs" / "design" / "cheats.md"


def select(projects: list[Project], names: list[str], globs: list[str], limit: int | None) -> list[Case]:
    known = {p.name for p in projects}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UserError(f"unknown project {unknown[0]!r}", hint=f"one of: {', '.join(sorted(known))}")
    chosen: list[Case] = []
    for project in projects:
        if names and project.name not in names:
            continue
        mine = [
            case
            for case in project.cases
            if not globs or any(fnmatch.fnmatch(case.name, g) or case.label == g for g in globs)
        ]
        chosen += mine[:limit] if limit is not None else mine
    if not chosen:
        raise UserError("no case matches the selection", hint="check --project / --case / --limit")
    return chosen


def line(outcome: Outcome) -> str:
    case, verify = outcome.case, "pass" if outcome.verify_passed else "fail"
    return f"  {outcome.verdict:<8} verify={verify} {outcome.seconds:5.1f}s {case.name} ({case.label})"


async def measure(
    projects: list[Project], cases: list[Case], cache: Path, settings: Settings, jobs: int
) -> tuple[list[Outcome], list[BugCheck]]:
    git = Git(home=settings.work / "git-home")
    (settings.work / "git-home").mkdir(parents=True)
    pristine: dict[str, Path] = {}
    for project in {p.name: p for p in projects if any(c.project == p.name for c in cases)}.values():
        pristine[project.name] = unpack(
            fetch_sdist(project, cache), settings.work / "pristine" / project.name
        )
    gate = asyncio.Semaphore(jobs)
    by_name = {p.name: p for p in projects}

    async def bounded_check(project: Project, bug_id: str) -> BugCheck:
        async with gate:
            return await check_bug(project, project.bug(bug_id), pristine[project.name], settings, git)

    async def bounded_case(case: Case) -> Outcome:
        async with gate:
            outcome = await run_case(by_name[case.project], case, pristine[case.project], settings, git)
            print(line(outcome), file=sys.stderr, flush=True)
            return outcome

    bugs = sorted({(c.project, c.bug) for c in cases})
    try:
        async with asyncio.TaskGroup() as group:  # the first error cancels the rest and waits for them
            checks = [group.create_task(bounded_check(by_name[p], b)) for p, b in bugs]
            outcomes = [group.create_task(bounded_case(case)) for case in cases]
    except ExceptionGroup as errors:
        raise errors.exceptions[0] from None
    return [task.result() for task in outcomes], [task.result() for task in checks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "hilbert" / "bench-sdists")
    parser.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    parser.add_argument(
        "--case", action="append", default=[], help="glob on project/bug/case, or a technique id"
    )
    parser.add_argument("--limit", type=int, default=None, help="at most N cases per project")
    parser.add_argument(
        "--cases-only", action="store_true", help="check the cases (verify, held-out), no gate"
    )
    parser.add_argument("--jobs", type=int, default=2, help="cases at once (default 2)")
    parser.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    parser.add_argument("--keep", type=Path, default=None, help="keep the repositories in this new folder")
    parser.add_argument("--verbose", action="store_true", help="also print what the gate said on every case")
    parser.add_argument(
        "--cases-dir", type=Path, default=CASES, help="the project folders (bench/judge_cases)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per verify / gate run")
    args = parser.parse_args(argv)
    started = time.monotonic()
    work = args.keep or Path(tempfile.mkdtemp(prefix="hilbert-judge-bench-"))
    try:
        if (args.limit is not None and args.limit < 1) or args.jobs < 1:
            raise UserError("--limit and --jobs must be at least 1", hint="e.g. --limit 5 --jobs 2")
        if args.keep:
            if args.keep.exists() and any(args.keep.iterdir()):
                raise UserError(f"--keep {args.keep} is not empty", hint="name a new or empty folder")
            args.keep.mkdir(parents=True, exist_ok=True)
        techniques = taxonomy(TAXONOMY)
        folders = sorted(p.parent for p in args.cases_dir.glob("*/project.yaml"))
        if not folders:
            raise UserError(f"no project.yaml under {args.cases_dir}", hint="run from a hilbert checkout")
        projects = [load_project(folder, techniques) for folder in folders]
        cases = select(projects, args.project, args.case, args.limit)
        settings = Settings(
            work=work.resolve(), site_packages=Path(sysconfig.get_paths()["purelib"]),
            python=sys.executable, timeout_s=args.timeout, gate=not args.cases_only,
            gate_cache=work.resolve() / "gate-cache",
        )  # fmt: skip
        outcomes, checks = asyncio.run(measure(projects, cases, args.cache, settings, args.jobs))
    except (HilbertError, RuntimeError) as err:
        print(f"judge bench: {err}", file=sys.stderr)
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarise(outcomes, checks, techniques)
    if args.verbose:
        print("\n".join(f"{line(o)}: {o.said or '(no gate)'}" for o in outcomes))
    print("\n".join(table(summary, args.markdown) + details(summary)))
    print(figures(summary, len({c.project for c in cases}), time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
