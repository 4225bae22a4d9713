"""`hilbert report`: the report of a finished run holds each section with the numbers the log (its fold)
says, references nothing outside the file, escapes every logged string; a run that merged nothing and one
whose merge queue bisected and met a conflict read right; the real command writes the file, and refuses an
unknown run in one line. The view layer (`hilbert.views`) read incrementally gives what one read gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from views_support import SCRIPT, Log, Report

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.fleet import events as ev
from hilbert.fleet.state import Fold
from hilbert.store import EventStore
from hilbert.ui.report import report_html
from hilbert.views import RunLog

USAGE_1 = {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 600, "cache_write_tokens": 0}
USAGE_2 = {"input_tokens": 2000, "output_tokens": 200, "cache_read_tokens": 1500, "cache_write_tokens": 100}
USAGE_3 = {"input_tokens": 500, "output_tokens": 50, "cache_read_tokens": 0, "cache_write_tokens": 0}


def finished_run(store: EventStore, run: str = "r1") -> None:
    """T1 sent back once by the stop gate then merged; T2's attempt ran out of turns, retried, then needs
    the person; T3 never started. Untrusted text in the goal, a gate reason and a stop reason."""
    log = Log(store, run)
    log.start(f"fix it {SCRIPT}", "T1", "T2", "T3")
    log.attempt("T1", "Poincaré", calls=[(0.01, USAGE_1)])
    log.verdict("T1", "Poincaré", 1, "not_done", failed=("verify", "model"), reasons=(f"verify: {SCRIPT}",),
                cost=0.002)  # fmt: skip
    log.agent("Poincaré", "model_call", usage=USAGE_2, cost_usd=0.02, model="m", priced=True)
    log.verdict("T1", "Poincaré", 2, "done", cost=0.003)
    log.ended("T1", "Poincaré", "finished", candidate=True)
    log.attempt("T2", "Noether", calls=[(0.005, USAGE_3)])
    log.ended("T2", "Noether", "halted", candidate=False, cause="max_turns", reason=f"out of turns {SCRIPT}")
    log.harness(
        ev.TaskStateChanged(task="T2", status="failed", attempts=1),
        ev.TaskRetried(task="T2", why="halted: out of turns", decision="retry (attempt 2 of 2)"),
        ev.TaskNeedsYou(task="T2", why="no lead to ask", evidence="halted"),
        ev.TaskStateChanged(task="T2", status="needs_you", attempts=2),
        ev.MergeBatchStarted(tasks=["T1"], base="b0"),
        ev.MergeChecksPassed(tasks=["T1"], commit="m1", commands=["true"]),
        ev.MergeLanding(tasks=["T1"], refs=[log.ref("T1", "Poincaré")], commit="m1", old="b0"),
        ev.Merged(task="T1", ref=log.ref("T1", "Poincaré"), commit="m1aaaaaaaaaaaa"),
        ev.TaskStateChanged(task="T1", status="done", worker="Poincaré"),
        ev.FleetFinished(states={"T1": "done", "T2": "needs_you", "T3": "pending"}),
    )


def report_of(tmp_path: Path, write: object, run: str = "r1") -> tuple[Report, str]:
    with EventStore.open(tmp_path / "log.db") as store:
        write(store)  # type: ignore[operator]
        page = report_html(RunLog.read(store, run).view())
    return Report(page), page


def test_the_report_of_a_finished_run_has_each_section_with_the_logs_numbers(tmp_path: Path) -> None:
    report, page = report_of(tmp_path, finished_run)
    summary = report.sections["summary"].pairs()
    assert summary["outcome"] == "finished"
    assert summary["tasks"] == "3 (1 done, 1 needs you, 1 pending)"
    assert summary["merged"] == "1 of 3: T1"
    assert summary["needs you"] == "T2: no lead to ask"
    assert summary["cost"] == "$0.0400"  # 0.01 + 0.02 + 0.005 by the workers, 0.002 + 0.003 by the judge
    assert summary["tokens"] == "3,500 input (2,100 of them cache reads, 100 cache writes), 350 output"
    assert summary["workers"] == "2"
    timeline = report.sections["timeline"]
    assert timeline.svgs == 1
    assert timeline.column("outcome") == {"Poincaré": "merged", "Noether": "not done"}
    assert timeline.column("gate rounds") == {"Poincaré": "not_done done", "Noether": ""}
    assert timeline.column("detail")["Noether"] == f"halted (max_turns): out of turns {SCRIPT}"
    spend = report.sections["spend"]
    assert spend.svgs == 2  # over time, by agent
    costs = spend.column("cost")
    assert costs == {"Poincaré": "$0.0300", "harness (judge, panel)": "$0.0050", "Noether": "$0.0050"}
    assert spend.column("of input: cache reads")["Poincaré"] == "2,100"
    funnel = report.sections["funnel"].column("count")
    assert funnel == {"claimed": "2", "sent back": "1", "done": "1", "merged": "1"}
    reasons = report.sections["reasons"]
    grouped = {(row[0], row[1]): (row[2], row[3]) for row in reasons.rows(0)[1:]}
    # the judge model's step fails whenever a check did: the check is the reason
    assert grouped == {("stop gate", "verify"): ("1", "T1"), ("attempt", "halted (max_turns)"): ("1", "T2")}
    assert [row[1:4] for row in reasons.rows(1)[1:]] == [
        ["T2", "retried", "retry (attempt 2 of 2)"],
        ["T2", "needs you", "no lead to ask"],
    ]
    (batch,) = report.sections["merge-queue"].rows()[1:]
    assert batch[:4] == ["1", batch[1], "T1", "1"] and batch[8] == "T1"
    # nothing outside the file: no script, no reference a mail reader would fetch
    assert not [tag for tag, _ in report.tags if tag in ("script", "iframe", "img", "link", "object")]
    assert report.external_references() == []
    # the untrusted text is shown as text, never as markup
    assert "".join(report.text).count(SCRIPT) == 4  # the goal, a gate reason, a stop reason (twice shown)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_a_run_that_merged_nothing_says_so(tmp_path: Path) -> None:
    def write(store: EventStore) -> None:
        log = Log(store, "r1")
        log.start("nothing lands", "T1")
        log.attempt("T1", "Galois", calls=[(0.001, USAGE_3)])
        log.verdict("T1", "Galois", 1, "not_done", failed=("model",), reasons=("the judge model says no",))
        log.ended("T1", "Galois", "finished", candidate=False)
        log.harness(ev.FleetFinished(states={"T1": "failed"}))

    report, _ = report_of(tmp_path, write)
    assert report.sections["summary"].pairs()["merged"] == "0 of 1"
    assert report.sections["funnel"].column("count") == {
        "claimed": "1",
        "sent back": "1",
        "done": "0",
        "merged": "0",
    }
    reasons = report.sections["reasons"].rows(0)[1:]
    assert [row[:4] for row in reasons] == [
        ["attempt", "finished", "1", "T1"],
        ["stop gate", "judge model", "1", "T1"],
    ]
    assert "no batch reached the merge queue" in "".join(report.sections["merge-queue"].text)


def test_a_batch_that_met_a_conflict_and_bisected_to_a_culprit(tmp_path: Path) -> None:
    def write(store: EventStore) -> None:
        log = Log(store, "r1")
        log.start("three at once", "T1", "T2", "T3")
        for task, worker in (("T1", "Euler"), ("T2", "Gauss"), ("T3", "Hilbert")):
            log.attempt(task, worker, calls=[(0.001, USAGE_3)])
            log.verdict(task, worker, 1, "done")
            log.ended(task, worker, "finished", candidate=True)
        ref = {t: log.ref(t, w) for t, w in (("T1", "Euler"), ("T2", "Gauss"), ("T3", "Hilbert"))}
        log.harness(
            ev.MergeBatchStarted(tasks=["T1", "T2", "T3"], base="b0"),
            ev.MergeConflict(task="T3", ref=ref["T3"], base="b0", files=[f"src/{SCRIPT}.py"], hunks="<<<<"),
            ev.MergeChecksFailed(
                tasks=["T1", "T2"], commit="x", command="pytest -q", exit=1, output="1 failed"
            ),
            ev.MergeBisect(suspects=["T1", "T2"], testing=["T1"], base="b0"),
            ev.MergeChecksPassed(tasks=["T1"], commit="y", commands=["pytest -q"]),
            ev.Merged(task="T1", ref=ref["T1"], commit="y0000000000000"),
            ev.MergeRejected(task="T2", ref=ref["T2"], command="pytest -q", exit=1, output="FAILED test_two"),
            ev.FleetFinished(states={"T1": "done", "T2": "failed", "T3": "failed"}),
        )

    report, _ = report_of(tmp_path, write)
    (batch,) = report.sections["merge-queue"].rows()[1:]
    header = report.sections["merge-queue"].rows()[0]
    row = dict(zip(header, batch, strict=True))
    assert row["tasks"] == "T1, T2, T3" and row["checks passed"] == "1"
    assert row["checks failed"] == "pytest -q (exit 1)"
    assert row["bisections"] == "T1, T2 → testing T1"
    assert row["conflicts"] == f"T3: src/{SCRIPT}.py"
    assert row["rejected"].startswith("T2: pytest -q exit 1") and "FAILED test_two" in row["rejected"]
    assert row["merged"] == "T1"
    outcomes = report.sections["timeline"].column("outcome")
    assert outcomes == {"Euler": "merged", "Gauss": "sent back", "Hilbert": "sent back"}
    funnel = report.sections["funnel"]
    assert funnel.column("count") == {"claimed": "3", "sent back": "0", "done": "3", "merged": "1"}
    assert "sent back 1 conflicts, 1 red checks" in "".join(funnel.text)
    reasons = {(row[0], row[1]): row[3] for row in report.sections["reasons"].rows(0)[1:]}
    assert reasons == {("merge queue", "conflict"): "T3", ("merge queue", "red checks"): "T2"}


def test_a_live_view_caught_up_in_steps_sees_what_one_read_sees(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        live = RunLog("r1")
        log = Log(store, "r1")
        log.start("step by step", "T1")
        log.attempt("T1", "Noether", calls=[(0.01, USAGE_1)])
        assert live.catch_up(store).view().summary.cost_usd == 0.01
        log.verdict("T1", "Noether", 1, "done", cost=0.002)
        log.ended("T1", "Noether", "finished", candidate=True)
        stepped, whole = live.catch_up(store).view(), RunLog.read(store, "r1").view()
        fold = Fold(store, "r1").catch_up()
    assert stepped == whole
    assert whole.summary.cost_usd == fold.spent_usd == whole.spend[-1].cost_usd
    assert [(b.agent, b.outcome, b.open) for b in whole.bars] == [("Noether", "waiting", False)]


def test_the_command_writes_the_file_and_refuses_an_unknown_run_in_one_line(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        finished_run(store)
    env = {**command_env(), "HILBERT_HOME": str(tmp_path / "home")}
    done = run_cli("report", "--db", "log.db", "-o", "out.html", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "report of run r1: out.html"
    assert (
        "T2: no lead to ask"
        in Report((tmp_path / "out.html").read_text()).sections["summary"].pairs().values()
    )
    bad = run_cli("report", "nope", "--db", "log.db", "-o", "x.html", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("hilbert: error: no run nope in"), bad.stderr
    assert not (tmp_path / "x.html").exists()


def test_the_command_line_starts_without_matplotlib() -> None:
    probe = "import sys, hilbert.ui.cli; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
