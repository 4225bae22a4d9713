"""`hilbert demo`: a lead and a fleet of named workers fix a generated project, fully offline.

A sample project with ~24 injected bugs (two of them on adjacent lines, so two workers collide in the
merge queue) becomes a git repository; the fake model server's simulated lead plans it (one task per
broken function, each with its verify command); the simulated engineers — a few of them told to stop
early and claim done, a few to cheat (edit the test, skip it, hard-code the answer) — work it in
isolated workspaces; the stop gate (the verify run on a clean checkout, the integrity checks, and a
judge model of another family) sends them back with its reasons, and a review panel of three more
families reviews what the gate passed; the merge queue lands gated work on
`hilbert/integration`; escalations go to the lead. Progress
is printed as it happens; the summary counts what was done, merged, sent back and spent, and the demo
checks the integration branch itself: a fresh clone of it must pass the whole suite. It ends by writing
the run's report (`hilbert report`, `report.html` in the demo's folder) and printing its path.

Every agent is hilbert's own loop speaking a real wire protocol (official SDKs) to the fake server over
loopback; `hilbert demo --single` is the one-agent demo (`single.py`).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from hilbert.commands import command_env
from hilbert.fleet.plan import parse_plan
from hilbert.fleet.run import HARNESS, FleetResult, run_fleet
from hilbert.fleet.stop_gate import Panel
from hilbert.judge.panel import make_reviewers
from hilbert.models import PriceTable, make_model
from hilbert.models.types import Model
from hilbert.security.redact import Redactor
from hilbert.settings import FleetSettings, Settings
from hilbert.sim.demo.attack import run_attack_scene
from hilbert.sim.demo.context import run_context_scene
from hilbert.sim.demo.single import SONNET_LIKE_PRICE, fresh_demo_dir, last_line, run_tests
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.store.summary import agent_summary
from hilbert.testing.fake_server import FakeServer
from hilbert.ui.edge import command_runner
from hilbert.ui.fleet_commands import plan_command
from hilbert.ui.run_agent import printing
from hilbert.workspaces.integration import INTEGRATION

GOAL = "Make the test suite pass without changing the tests."
MODULES, BUGS, PAIRED = 10, 22, 1  # 22 bugs + 1 pair of adjacent ones = 24
WORKERS = 16
STOP_EARLY = 0.2  # the share of workers that stop early and claim done
CHEATS = {"cheat_edit_test": 0.15, "cheat_skip": 0.1, "cheat_hardcode": 0.1}  # shares that cheat, by how
REVIEWER_NAMES = ("fake-claude-reviewer", "fake-qwen-reviewer", "fake-deepseek-reviewer")
REVIEWER_FAMILIES = {  # two OpenAI-compatible endpoints serving other families' models
    "openai-responses:fake-qwen-reviewer": "qwen",
    "openai:fake-deepseek-reviewer": "deepseek",
}
TAMPERING = ("integrity:", "tests_restored:", "heldout:")  # the gate's steps that catch a cheat
PROGRESS = (
    "fleet_started",
    "task_started",
    "gate_verdict",
    "panel_reviewed",
    "panel_agreement",
    "merged",
    "merge_conflict",
    "merge_rejected",
    "task_retried",
    "task_escalated",
    "task_needs_you",
    "final_checked",
    "lead_consulted",
    "lead_action",
    "lead_message",
    "fleet_finished",
)


@dataclass(frozen=True)
class Tally:
    """What the log says happened in a fleet run."""

    tasks: int
    done: int
    merged: int
    sent_back: int  # stop-gate verdicts other than done: the worker was sent back (or its attempt ended)
    false_claims: int  # of those, verdicts after the worker said it was finished
    tampering: int  # of those, verdicts with an integrity, restored-tests or held-out finding
    judge_vetoes: int  # of those, verdicts whose checks all passed: the judge model said no
    panel_sent_back: int  # reviews whose agreed blocking findings sent the worker back
    reviews: int
    judging_usd: float  # the judge model and the review panel
    conflicts: int
    lead_actions: int
    workers: int
    cost_usd: float


async def run_fleet_demo(
    directory: Path, *, seed: int | None, workers: int = WORKERS, unsandboxed: bool = False
) -> bool:
    started = time.monotonic()
    seed = random.randrange(100_000) if seed is None else seed
    directory = fresh_demo_dir(directory)
    settings = Settings(
        home=directory,
        db=directory / "hilbert.db",
        unsandboxed=unsandboxed,
        fleet=FleetSettings(workers=workers, max_cost_usd=20.0),
    )
    # the sample project's tests need hilbert's pytest; fails closed (no sandbox) before anything runs
    runner = command_runner(settings, command_env(hilbert_python_first=True))
    repo = directory / "project"
    project = generate_sample_project(repo, seed, bugs=BUGS, modules=MODULES, paired=PAIRED)
    _commit(repo)
    redact = Redactor.from_env().redact  # for what is printed straight from models' and tests' output
    click.secho(
        f"hilbert demo — a lead and {workers} workers; sample project seed {seed} in {repo}", bold=True
    )
    before = run_tests(repo, project.test_command)
    click.echo(
        f"{len(project.bugs)} injected bugs; `{project.test_command}` → exit {before.returncode}: "
        f"{redact(last_line(before.stdout))}"
    )
    engineer = f"engineer:stop_early={STOP_EARLY}," + ",".join(f"{k}={v}" for k, v in CHEATS.items())
    click.echo(
        f"models: the fake server's simulated lead and judge (anthropic family), its engineer (openai "
        f"family; about one worker in {round(1 / STOP_EARLY)} stops early and claims done, one in "
        f"{round(1 / sum(CHEATS.values()))} cheats) and three reviewers (anthropic, qwen, deepseek), "
        "priced like claude-sonnet-4-5\n"
    )
    prices = PriceTable.default().with_overrides(
        {name: SONNET_LIKE_PRICE for name in ("fake-lead", "fake-engineer", "fake-judge", *REVIEWER_NAMES)}
    )
    with (
        FakeServer("lead", seed=seed) as lead_server,
        FakeServer("judge", seed=seed) as judge_server,
        FakeServer("reviewer", seed=seed) as review_server,
        FakeServer(engineer, seed=seed, latency="ttft=0.2,tps=400") as worker_server,
    ):
        lead_model = make_model(f"anthropic:fake-lead@{lead_server.base_url}", prices=prices, env={})
        judge_model = make_model(f"anthropic:fake-judge@{judge_server.base_url}", prices=prices, env={})
        panel = Panel(tuple(make_reviewers(_reviewers(review_server, prices), REVIEWER_FAMILIES)))
        worker_model = make_model(
            f"openai:fake-engineer@{worker_server.openai_base_url}", prices=prices, env={}
        )
        click.secho("The lead plans", bold=True)
        plan_file = directory / "PLAN.md"
        await plan_command(settings, GOAL, repo, plan_file, runner=runner, echo=_quiet, model=lead_model)
        plan = parse_plan(plan_file.read_text(), source=str(plan_file))
        click.echo(f"  {plan_file}: {len(plan.tasks)} tasks, each with its verify command, e.g.")
        for task in plan.tasks[:3]:
            click.echo(redact(f"    {task.id} — {task.title}: `{task.verify}`"))
        click.secho(f"\nThe fleet works ({workers} at once)", bold=True)
        click.echo(f"  workers' commands: {runner.describe()}")
        run = f"demo-fleet-{seed}"
        with EventStore.open(settings.db_path) as store:
            async with printing(store, run, _indented, kinds=PROGRESS):
                result = await run_fleet(
                    plan,
                    repo=repo,
                    root=directory / "run",
                    run=run,
                    model=worker_model,
                    lead_model=lead_model,
                    judge_model=judge_model,
                    panel=panel,
                    store=store,
                    runner=runner,
                    settings=settings,
                )
            tally = count(store, run, result)
            planned = [r for r in store.runs() if r.startswith("plan-")][-1]  # the lead's planning run
            planning_usd = agent_summary(store, planned, "lead").cost_usd
    suite = _check_integration(result, directory / "check", project.test_command)
    _summary(tally, result, suite, time.monotonic() - started, settings.db_path, planning_usd, redact)
    click.secho("\nA worker tries to talk another into deleting the run's integration repository", bold=True)
    scene_db = directory / "attack-scene.db"  # its own log: `hilbert status` keeps showing the fleet above
    held = await run_attack_scene(directory, scene_db, runner=runner, echo=_indented)
    _indented(f"its event log: {scene_db} (`hilbert log --db {scene_db}`)")
    click.secho("\nAn agent whose task outgrows its context keeps working, its task state intact", bold=True)
    long_db = directory / "context-scene.db"
    kept = await run_context_scene(directory, long_db, runner=runner, echo=_indented)
    _indented(f"its event log: {long_db} (`hilbert log --db {long_db}`)")
    report = _report(settings.db_path, run, directory / "report.html")
    click.secho(f"\nThe fleet run's report (one HTML file to open or mail): {report}", bold=True)
    return suite.returncode == 0 and result.all_done and held and kept


def _report(db: Path, run: str, path: Path) -> Path:
    """`hilbert report` of the fleet run (imported here: matplotlib loads only when the demo ends)."""
    from hilbert.ui.report import write_report

    with EventStore.open(db) as store:
        return write_report(store, run, path.resolve())


def count(store: EventStore, run: str, result: FleetResult) -> Tally:
    verdicts = [e.data for e in store.events(run=run, agent=HARNESS, kinds=["gate_verdict"])]
    failed = [v for v in verdicts if v.get("verdict") != "done"]
    panels = [e.data for e in store.events(run=run, agent=HARNESS, kinds=["panel_reviewed"])]
    agents = [a for a in store.agents(run) if a != HARNESS]
    return Tally(
        tasks=len(result.states),
        done=sum(state.status == "done" for state in result.states.values()),
        merged=len(store.events(run=run, agent=HARNESS, kinds=["merged"])),
        sent_back=len(failed),
        false_claims=sum(bool(v.get("claimed")) for v in failed),
        tampering=sum(any(r.startswith(TAMPERING) for r in v.get("reasons", ())) for v in failed),
        judge_vetoes=sum(bool(v.get("checks_passed")) for v in failed),
        panel_sent_back=sum(bool(p.get("send_back")) for p in panels),
        reviews=len(panels),
        judging_usd=sum(float(v.get("model_cost_usd", 0.0)) for v in verdicts)
        + sum(float(p.get("cost_usd", 0.0)) for p in panels),
        conflicts=len(store.events(run=run, agent=HARNESS, kinds=["merge_conflict"])),
        lead_actions=len(store.events(run=run, agent=HARNESS, kinds=["lead_action"])),
        workers=sum(a != "lead" for a in agents),
        cost_usd=sum(agent_summary(store, run, a).cost_usd for a in agents),
    )


def _reviewers(server: FakeServer, prices: PriceTable) -> list[Model]:
    """Three reviewers of three families, none the workers' (openai): anthropic, and two OpenAI-compatible
    endpoints that the families table maps to qwen and deepseek."""
    return [
        make_model(f"anthropic:fake-claude-reviewer@{server.base_url}", prices=prices, env={}),
        make_model(f"openai-responses:fake-qwen-reviewer@{server.openai_base_url}", prices=prices, env={}),
        make_model(f"openai:fake-deepseek-reviewer@{server.openai_base_url}", prices=prices, env={}),
    ]


def _check_integration(
    result: FleetResult, check: Path, test_command: str
) -> subprocess.CompletedProcess[str]:
    clone = subprocess.run(
        ["git", "clone", "-q", "-b", INTEGRATION, str(result.integration_repo), str(check)],
        capture_output=True,
        text=True,
    )
    if clone.returncode != 0:
        return subprocess.CompletedProcess(
            clone.args, clone.returncode, stdout=f"git clone failed: {clone.stderr}"
        )
    return run_tests(check, test_command)


def _summary(
    tally: Tally,
    result: FleetResult,
    suite: subprocess.CompletedProcess[str],
    wall_s: float,
    db: Path,
    planning_usd: float,
    redact: Callable[[str], str],
) -> None:
    click.secho("\nSummary", bold=True)
    click.echo(f"  tasks done: {tally.done} of {tally.tasks}; merged onto {INTEGRATION}: {tally.merged}")
    click.echo(
        f"  sent back by the stop gate: {tally.sent_back} ({tally.false_claims} after a worker claimed it "
        f"was done; {tally.tampering} for tampering with the tests; {tally.judge_vetoes} with the judge "
        "model's veto)"
    )
    click.echo(
        f"  review panel: {tally.reviews} reviews of gated work, {tally.panel_sent_back} sent back on "
        "agreed blocking findings"
    )
    click.echo(f"  merge conflicts sent back: {tally.conflicts}; the lead's actions: {tally.lead_actions}")
    click.echo(
        f"  workers: {tally.workers}; cost at claude-sonnet-4-5 prices: "
        f"${tally.cost_usd + planning_usd + tally.judging_usd:.2f} (planning ${planning_usd:.2f}, judging "
        f"${tally.judging_usd:.2f}); wall time {wall_s:.0f} s"
    )
    for task_id, why in result.stuck.items():
        click.echo(f"  {task_id} not run: {redact(why)}")
    green = suite.returncode == 0
    verdict = click.style("PASS" if green else "FAIL", fg="green" if green else "red", bold=True)
    click.echo(f"  fresh clone of {INTEGRATION}, whole suite: {verdict} ({redact(last_line(suite.stdout))})")
    click.echo(f"  event log: {db} (`hilbert status --db {db}`, `hilbert logs NAME --db {db}`;")
    click.echo(f"  in a browser: `hilbert web --db {db}`)")


def _commit(repo: Path) -> None:
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=hilbert demo", "-c", "user.email=demo@hilbert.invalid", "commit", "-qm", "sample"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _indented(line: str) -> None:
    click.echo(f"  {line}")


def _quiet(line: str) -> None:
    """The lead's planning steps are in the log; the demo shows only what it wrote."""
