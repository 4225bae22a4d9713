"""A person's first real run (issue 16): real libraries with seeded bugs, `hilbert run --yes`, the result.

    python bench/first_run.py                                  # cachetools and more-itertools, seed 16
    python bench/first_run.py --libraries cachetools --seed 3 --workers 2 --keep /tmp/first-run

For each library (pinned sdists, the projects of `bench/judge_cases/`, downloaded once into `--cache`):
the sdist becomes a git repository (`base`); five bug sites are drawn with `random.Random(seed)` over its
product lines, each a mutation operator's `inject` rewrite kept only if alone it breaks a test that
passed at base, never two in one function (`first_run_bench/sites.py`); all five are committed
("inject bugs"). Then the fake model server's simulated lead and engineers run it the way a person
would: `hilbert run "Make the tests pass" --repo DIR --yes --model ... --lead-model ...` (a real
subprocess, `HILBERT_HOME` in a temporary folder). The result branch `hilbert/<run>` is cloned fresh
and its suite run: a bug is fixed when the tests it broke pass there, or pass once the other bugs
still there are undone (a test two bugs break); its task is the plan's task whose
verify runs one of them, merged or not as the run's status says (or, given up, merged by another task:
its check passes at the tip).

Prints one row per bug (library, bug, outcome, task, merged?), per library "k of 5 merged, branch
suite green|red", and last:

    first_run: cachetools 5/5 green, more-itertools 4/5 green

Exit 0 whatever the outcome (it measures); exit 2 with one line on bad input or an sdist that is
neither cached nor downloadable. Needs PyPI once, then minutes: not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from first_run_bench.sites import Site, apply_sites, candidate_sites, draw, product_files
from hilbert.commands import command_env
from hilbert.errors import HilbertError, UserError
from hilbert.fleet.person import fixed_tasks
from hilbert.fleet.state import FleetState, Fold
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from judge_bench.cases import Project
from judge_bench.sdists import fetch_sdist, unpack

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "bench" / "judge_cases"
LIBRARIES = ("cachetools", "more-itertools")
GOAL = "Make the tests pass"
BUGS = 5
SUITE = ["python", "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider"]
# what a project adds so plain `pytest` finds a src/ layout's package (cachetools' sdist has no such line)
SRC_LAYOUT_CONFIG = "\n[tool:pytest]\npythonpath = src\n"
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$", re.MULTILINE)
IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]


@dataclass(frozen=True)
class Outcome:
    library: str
    site: Site
    fixed: bool
    task: str
    merged: bool
    by_another: bool = False  # its task was given up, and its check passes at the tip: another's merge
    masked: bool = False  # fixed, but a test it broke fails for another bug still there (`_masked`)


@dataclass(frozen=True)
class LibraryResult:
    library: str
    outcomes: tuple[Outcome, ...]
    green: bool
    run: str
    pre_existing: tuple[str, ...]
    wall_s: float


def load(name: str) -> Project:
    """The pinned sdist of a judge-bench project (only its name, version, file and hash are used)."""
    import yaml

    path = CASES / name / "project.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.name for p in CASES.iterdir() if (p / "project.yaml").exists()))
        raise UserError(f"unknown library {name!r}", hint=f"one of: {known}")
    data = yaml.safe_load(path.read_text())
    return Project(data["name"], data["version"], data["sdist"], data["sha256"], path.parent, (), ())


def env_for_project() -> dict[str, str]:
    """The environment of a person who activated hilbert's virtual environment (its pytest)."""
    return command_env(hilbert_python_first=True)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENT, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def suite(root: Path, timeout_s: float) -> tuple[set[str], bool, str]:
    """(failing test ids, whether it finished in time, output) of the whole suite in `root`."""
    try:
        done = subprocess.run(
            SUITE, cwd=root, env=env_for_project(), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return set(), False, "timed out"
    failing = set(_FAILED.findall(done.stdout))
    if done.returncode not in (0, 1) and not failing:
        failing.add(f"<pytest exit {done.returncode}>")
    return failing, True, done.stdout


def prepare(project: Project, cache: Path, folder: Path) -> tuple[Path, set[str], float]:
    """The unpacked sdist as a git repository with one commit; its failing tests and suite time."""
    repo = unpack(fetch_sdist(project, cache), folder / project.name)
    if (repo / "src").is_dir() and (repo / "setup.cfg").exists() and "pythonpath" not in _text(repo):
        with (repo / "setup.cfg").open("a") as config:
            config.write(SRC_LAYOUT_CONFIG)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"{project.name} {project.version} (sdist)")
    started = time.monotonic()
    failing, finished, output = suite(repo, 600)
    if not finished or any(f.startswith("<pytest") for f in failing):
        raise UserError(f"{project.name}: the suite does not run at base", hint=output[-500:])
    return repo, failing, time.monotonic() - started


def _text(repo: Path) -> str:
    return (repo / "setup.cfg").read_text() + _read(repo / "pyproject.toml") + _read(repo / "pytest.ini")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def inject(repo: Path, seed: int, base_failing: set[str], suite_s: float, checks: Path) -> list[Site]:
    """Draw the bug sites (each checked alone against the suite), apply all, commit "inject bugs".
    `checks`: a JSON file of the sites checked before on this sdist and the tests each broke (a site's
    check runs the whole suite; the pinned sdist makes its answer the same every time)."""
    timeout = max(60.0, suite_s * 4)
    known: dict[str, list[str]] = json.loads(checks.read_text()) if checks.exists() else {}

    def breaks(site: Site) -> tuple[str, ...]:
        key = f"{site.path}:{site.line}:{site.new}"
        if key in known:
            return tuple(known[key])
        apply_sites(repo, [site])
        try:
            failing, finished, _ = suite(repo, timeout)
        finally:
            git(repo, "checkout", "-q", "--", site.path)
        if not finished:
            return ()
        known[key] = sorted(failing - base_failing)
        checks.parent.mkdir(parents=True, exist_ok=True)
        checks.write_text(json.dumps(known, indent=1))
        return tuple(known[key])

    def said(site: Site, broken: tuple[str, ...]) -> None:
        print(f"  tried {site.label} in {site.function}: breaks {len(broken)} tests", flush=True)

    sites = draw(candidate_sites(repo, product_files(repo)), seed, BUGS, breaks, said)
    apply_sites(repo, sites)
    git(repo, "commit", "-qam", "inject bugs")
    return sites


def run_hilbert(repo: Path, home: Path, workers: int, log: Path) -> tuple[int, str]:
    """`hilbert run GOAL --repo REPO --yes` against the fake lead and engineer; (exit code, output)."""
    env = {**env_for_project(), "HILBERT_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}
    with FakeServer("lead") as lead, FakeServer("engineer") as engineer:
        command = [
            sys.executable, "-m", "hilbert.ui.cli", "run", GOAL, "--repo", str(repo), "--yes",
            "--workers", str(workers),
            "--model", f"openai:fake@{engineer.openai_base_url}",
            "--lead-model", f"anthropic:lead@{lead.base_url}",
        ]  # fmt: skip
        done = subprocess.run(command, cwd=repo.parent, env=env, capture_output=True, text=True)
    output = done.stdout + done.stderr
    log.write_text(output)
    return done.returncode, output


def fleet_state(home: Path) -> FleetState | None:
    """The last fleet run's state, folded from the event log in `HILBERT_HOME` (None: no run)."""
    db = home / "hilbert.db"
    if not db.exists():
        return None
    with EventStore.open(db) as store:
        started = store.events(kinds=["fleet_started"])
        return Fold(store, started[-1].run).catch_up() if started else None


def assess(
    library: str,
    repo: Path,
    state: FleetState | None,
    sites: list[Site],
    base_failing: set[str],
    suite_s: float,
) -> tuple[tuple[Outcome, ...], bool]:
    """Each bug's outcome on the result branch `hilbert/<run>`, and whether its whole suite is green
    (no failure that was not there at base). A bug's task: the plan's task whose verify runs one of
    the tests it breaks; merged when that task is done, or when it was given up and the final check
    found its check passing at the tip (another task's merge fixed it: marked so)."""
    branch = f"hilbert/{state.run}" if state else ""
    delivered = bool(branch) and bool(git(repo, "branch", "--list", branch))
    failing: set[str] = set()
    green = False
    if delivered:
        check = repo.parent / "result"
        shutil.rmtree(check, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "-b", branch, str(repo), str(check)], check=True)
        failing, finished, _ = suite(check, max(120.0, suite_s * 4))
        green = finished and not (failing - base_failing)
    tasks = state.plan.tasks if state and state.plan else ()
    plain = [delivered and not (set(site.breaks) & failing) for site in sites]
    masks = masked_fixes(repo.parent / "result", sites, plain, suite_s) if delivered else [False] * len(sites)
    outcomes = []
    for site, fixed, masked in zip(sites, plain, masks, strict=True):
        fixed = fixed or masked
        task = next((t.id for t in tasks if _runs_any(t.verify or "", site.breaks)), "")
        in_merged = state is not None and task in state.merged
        by_another = bool(task) and state is not None and not in_merged and task in fixed_tasks(state)
        merged = bool(task) and (in_merged or by_another)
        outcomes.append(Outcome(library, site, fixed, task or "-", merged, by_another, masked))
    return tuple(outcomes), green


def masked_fixes(check: Path, sites: list[Site], plain: list[bool], suite_s: float) -> list[bool]:
    """For each site not plainly fixed (`plain`: its tests pass on the result checkout `check`),
    whether it is fixed with its tests failing for another bug still there (`_masked`). A bug found
    fixed so is not put back for another's check: its fix may be a compensation on another line
    (seed 26: `+= 2` in `_Timer.__enter__` for the `-= 2` put in `__exit__`), which putting the bug
    back breaks; so those still not fixed are checked again without it."""
    unfixed = [site for site, fixed in zip(sites, plain, strict=True) if not fixed]
    masks = [
        not fixed and _masked(check, site, unfixed, suite_s) for site, fixed in zip(sites, plain, strict=True)
    ]
    still = [site for site, mask in zip(sites, masks, strict=True) if site in unfixed and not mask]
    if len(still) == len(unfixed):
        return masks
    return [
        mask or (site in still and _masked(check, site, still, suite_s))
        for site, mask in zip(sites, masks, strict=True)
    ]


def _masked(check: Path, site: Site, unfixed: list[Site], suite_s: float) -> bool:
    """Whether `site` is fixed on the result checkout `check` but its tests fail for another bug
    still there: with every other unfixed site's line put back as it was, the tests it broke pass (a
    test two bugs break passes only once both are fixed)."""
    others = [other for other in unfixed if other != site]
    for other in others:
        target = check / other.path
        lines = target.read_text().split("\n")
        at = other.line - 1
        if not (at < len(lines) and lines[at] == other.new):
            found = [i for i, line in enumerate(lines) if line == other.new]
            if len(found) != 1:
                continue  # changed by the run, or not found once: left as it is
            at = found[0]
        lines[at] = other.old
        target.write_text("\n".join(lines))
    try:
        failing, finished, _ = suite(check, max(120.0, suite_s * 4))
    finally:
        git(check, "checkout", "-q", "--", ".")
    return finished and not (set(site.breaks) & failing)


def _runs_any(verify: str, tests: tuple[str, ...]) -> bool:
    """Whether a verify command runs one of `tests` (named, or its whole file named)."""
    words = set(shlex.split(verify))
    return any(test in words or test.split("::", 1)[0] in words for test in tests)


def bench_library(name: str, args: argparse.Namespace, folder: Path) -> LibraryResult:
    started = time.monotonic()
    project = load(name)
    work = folder / name
    work.mkdir(parents=True)
    print(f"{name} {project.version}: preparing", flush=True)
    repo, base_failing, suite_s = prepare(project, args.cache, work)
    print(f"  base suite: {len(base_failing)} failing, {suite_s:.0f} s", flush=True)
    checks = args.cache / f"site-checks-{project.name}-{project.version}.json"
    sites = inject(repo, args.seed, base_failing, suite_s, checks)
    for site in sites:
        print(f"  bug {site.label} in {site.function}: breaks {', '.join(site.breaks[:4])}", flush=True)
    home = work / "home"
    code, output = run_hilbert(repo, home, args.workers, work / "hilbert-run.log")
    print(f"  hilbert run exited {code}; its last lines:", flush=True)
    for line in output.strip().splitlines()[-8:]:
        print(f"    {line}", flush=True)
    state = fleet_state(home)
    outcomes, green = assess(name, repo, state, sites, base_failing, suite_s)
    wall = time.monotonic() - started
    run = state.run if state else ""
    return LibraryResult(name, outcomes, green, run, tuple(sorted(base_failing)), wall)


def report(results: list[LibraryResult]) -> list[str]:
    rows = [("library", "bug", "outcome", "task", "merged?")]
    for result in results:
        for o in result.outcomes:
            rows.append(
                (
                    o.library,
                    o.site.label,
                    ("fixed (its tests fail for another bug)" if o.masked else "fixed")
                    if o.fixed
                    else "not fixed",
                    o.task,
                    "yes, by another task's merge" if o.by_another else _yes(o.merged),
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    ratios = []
    for result in results:
        merged = sum(o.fixed and o.merged for o in result.outcomes)
        colour = "green" if result.green else "red"
        pre = f", {len(result.pre_existing)} pre-existing failures" if result.pre_existing else ""
        lines.append(
            f"{result.library}: {merged} of {len(result.outcomes)} merged, branch suite {colour}"
            f" (run {result.run or '-'}, {result.wall_s:.0f} s{pre})"
        )
        ratios.append(f"{result.library} {merged}/{len(result.outcomes)} {colour}")
    lines.append("first_run: " + ", ".join(ratios))
    return lines


def _fixed(outcome: Outcome) -> str:
    if not outcome.fixed:
        return "not fixed"
    return "fixed (a test of it fails for another bug)" if outcome.masked else "fixed"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=16, help="seed of the bug sites (default 16)")
    parser.add_argument(
        "--libraries", default=",".join(LIBRARIES), help=f"comma-separated (default {','.join(LIBRARIES)})"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "hilbert" / "bench-sdists",
        help="folder of the downloaded sdists",
    )
    parser.add_argument(
        "--keep", type=Path, help="work in this folder and keep it (default: a temporary one)"
    )
    parser.add_argument("--workers", type=int, default=3, help="hilbert run --workers (default 3)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.libraries.split(",") if n.strip()]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="hilbert-first-run-"))
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        print(f"error: {args.keep} is not empty (--keep needs a new or empty folder)", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    try:
        results = [bench_library(name, args, folder) for name in names]
    except HilbertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("\n".join(report(results)))
    if args.keep:
        print(f"kept: {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
