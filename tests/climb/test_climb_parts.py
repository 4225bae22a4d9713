"""The climb's pure parts: reading a metric, the noise and `better`, near-duplicates, the fold and the
results it writes, the guard."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_support import run_cli
from hilbert.climb import events as ce
from hilbert.climb.driver import budget_spent, sealed_folders
from hilbert.climb.metric import MetricError, better, clearly_better, noise, read_metric
from hilbert.climb.neardup import duplicate_of, fingerprint, jaccard
from hilbert.climb.results import leaderboard, results_tsv
from hilbert.climb.state import ClimbFold, is_climb
from hilbert.climb.tries import guard_findings
from hilbert.errors import UserError
from hilbert.judge.change import Change, FileChange
from hilbert.store import EventStore


def test_the_metric_is_the_last_non_empty_line_as_one_number() -> None:
    assert read_metric("warming up\n0.25\n\n") == 0.25
    assert read_metric("1e-3") == 0.001
    for bad, said in (("", "printed nothing"), ("12 s\n", "not a number"), ("nan", "not a finite")):
        with pytest.raises(MetricError, match=said):
            read_metric(bad)


def test_noise_is_the_spread_floored_and_better_needs_twice_it() -> None:
    assert noise([1.0, 1.0, 1.0]) == pytest.approx(0.005)  # identical readings: the floor, not zero
    assert noise([1.0, 1.1, 0.9, 1.0, 1.2]) == pytest.approx(0.1 * 1.4826)
    assert better("min", 0.7, 1.0, 0.1) and not better("min", 0.85, 1.0, 0.1)
    assert better("max", 1.3, 1.0, 0.1) and not better("max", 0.7, 1.0, 0.1)
    assert clearly_better("min", [0.5, 0.6, 0.55], [1.0, 0.9, 1.1], 0.05)
    assert not clearly_better("min", [0.5, 0.95, 0.55], [1.0, 0.9, 1.1], 0.05)  # a reading overlaps
    assert not clearly_better("max", [], [1.0], 0.0)


def test_near_duplicates_ignore_spacing_and_equal_trees_are_duplicates() -> None:
    one = "--- a/x.py\n+++ b/x.py\n-    return slow(values)\n+    return fast(values, cache=True)\n"
    spaced = "--- a/x.py\n+++ b/x.py\n-    return slow( values )\n+    return fast(values,  cache=True)\n"
    other = "--- a/x.py\n+++ b/x.py\n-import os\n+import sys\n+print(sys.argv)\n"
    assert jaccard(fingerprint(one), fingerprint(spaced)) == 1.0
    assert duplicate_of(fingerprint(spaced), "t2", [(1, fingerprint(one), "t1")]) == (1, 1.0)
    assert duplicate_of(fingerprint(other), "t3", [(1, fingerprint(one), "t1")]) is None
    assert duplicate_of(fingerprint(other), "t1", [(1, fingerprint(one), "t1")]) == (1, 1.0)


def test_the_guard_names_the_metric_files_and_the_guarded_data() -> None:
    change = Change(
        (
            FileChange("bench.py", "modified", "a", "b"),
            FileChange("data/input.json", "modified", "a", "b"),
            FileChange("pairs.py", "modified", "a", "b"),
        )
    )
    found = guard_findings(change, "python ./bench.py --fast", ["data/*"])
    assert [line.split(",")[0] for line in found] == [
        "metric_guarded: bench.py",
        "metric_guarded: data/input.json",
    ]


def _log(store: EventStore, run: str, *records: ce.FleetEvent) -> None:
    for record in records:
        store.append(run, "harness", record.kind, record.data())


def test_the_fold_tracks_the_best_and_a_try_in_flight_and_resumes_where_it_was(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        _log(
            store, "c1",
            ce.ClimbStarted(base="b0", metric="python bench.py", tries=5, branch="hilbert/climb/c1/best"),
            ce.BaselineMeasured(commit="b0", values=[1.0, 1.1, 0.9], median=1.0, noise=0.1),
            ce.TryStarted(try_no=1, explorer="Noether", base="b0"),
            ce.TryStarted(try_no=2, explorer="Erdős", base="b0"),
            ce.TryGated(try_no=1, commit="c1", idea="a dict", passed=True, tree="t1"),
            ce.TryMeasured(try_no=1, commit="c1", values=[0.2, 0.21, 0.19], median=0.2, spread=0.01),
            ce.TryKept(try_no=1, commit="c1", median=0.2, previous=1.0),
        )  # fmt: skip
        store.append("c1", "Noether#1", "model_call", {"cost_usd": 0.25})
        store.append("other", "harness", "fleet_started", {})
        fold = ClimbFold(store, "c1")
        state = fold.catch_up()
        assert (state.best, state.best_median, state.baseline_median, state.noise) == ("c1", 0.2, 1.0, 0.1)
        assert [t.no for t in state.in_flight] == [2] and state.next_try() == 3
        assert state.tries[1].passed_gate and not state.tries[2].passed_gate  # near-duplicates: try 1 only
        assert state.spent_usd == 0.25
        _log(
            store, "c1", ce.TryReverted(try_no=2, stage="interrupted", reason="the run stopped while it ran")
        )
        state = fold.catch_up()  # only the new event is applied
        assert not state.in_flight and state.tries[2].stage == "interrupted"
        assert is_climb(store, "c1") and not is_climb(store, "other")
    rows = results_tsv(state).splitlines()
    assert rows[0].split("\t")[:3] == ["try", "explorer", "idea"]
    assert rows[1].split("\t")[:4] == ["1", "Noether", "a dict", "0.2"] and "kept" in rows[1]
    assert "interrupted" in rows[2]
    board = "\n".join(leaderboard(state))
    assert "base 1 -> best 0.2" in board and "* #1" in board and "1 interrupted, 1 kept" in board


def test_a_holdout_must_name_its_files_outside_the_repository(tmp_path: Path) -> None:
    repo, sealed = tmp_path / "repo", tmp_path / "sealed"
    repo.mkdir()
    sealed.mkdir()
    (repo / "bench.py").write_text("")
    (sealed / "holdout.py").write_text("")
    assert sealed_folders(f"python {sealed / 'holdout.py'} --quick", repo) == (sealed.resolve(),)
    with pytest.raises(UserError, match="inside the repository"):
        sealed_folders(f"python {repo / 'bench.py'}", repo)
    with pytest.raises(UserError, match="names no file by absolute path"):
        sealed_folders("python holdout.py", repo)


def test_bad_climb_input_is_one_line_with_a_hint(tmp_path: Path) -> None:
    env = {**os.environ, "HILBERT_HOME": str(tmp_path / "home")}
    db = str(tmp_path / "log.db")
    no_metric = run_cli("climb", "--repo", str(tmp_path), "--db", db, "--yes", cwd=tmp_path, env=env)
    assert no_metric.returncode == 2
    assert (
        no_metric.stderr.startswith("hilbert: error: no metric given") and "Traceback" not in no_metric.stderr
    )
    not_repo = run_cli(
        "climb", "--repo", str(tmp_path), "--metric", "true", "--db", db, "--yes", cwd=tmp_path, env=env
    )
    assert not_repo.returncode == 2 and "is not a git repository" in not_repo.stderr
    assert len(not_repo.stderr.strip().splitlines()) == 1
    no_log = run_cli("climb", "--status", "--db", db, cwd=tmp_path, env=env)
    assert no_log.returncode == 2 and "no event log at" in no_log.stderr and not Path(db).exists()


def test_a_climb_stops_when_its_tries_money_or_time_run_out(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "log.db") as store:
        _log(store, "c", ce.ClimbStarted(base="b0", tries=2, max_cost_usd=0.5, max_time_s=3600))
        _log(store, "c", ce.TryStarted(try_no=1, explorer="Noether", base="b0"))
        fold = ClimbFold(store, "c")
        assert budget_spent(fold.catch_up()) == ""
        _log(store, "c", ce.TryReverted(try_no=1, stage="interrupted"))  # not counted
        _log(store, "c", ce.TryStarted(try_no=2, explorer="Noether", base="b0"))
        store.append("c", "Noether#2", "model_call", {"cost_usd": 0.6})
        assert budget_spent(fold.catch_up()) == "the money budget ($0.5) is spent"
        _log(store, "c", ce.TryStarted(try_no=3, explorer="Noether", base="b0"))
        assert budget_spent(fold.catch_up()) == "all 2 tries made"  # two running count as made
        state = fold.catch_up()
        state.started_at -= 3600  # as if the climb began an hour ago
        assert budget_spent(state) == "all 2 tries made"
        state.started = ce.ClimbStarted(max_time_s=3600)
        assert budget_spent(state) == "the time budget (3600 s) is spent"


def test_the_optimiser_takes_a_red_teams_ideas_from_a_file_in_order(tmp_path: Path) -> None:
    from hilbert.sim.optimiser.responder import OptimiserResponder
    from hilbert.testing.fake_server.responders import make_responder

    ideas = [
        {"key": "a", "kind": "gaming", "title": "first", "files": {"bench.py": "print(0)\n"}},
        {"key": "b", "kind": "good", "title": "second", "files": {"pairs.py": "x = 1\n"}},
    ]
    (tmp_path / "ideas.json").write_text(json.dumps(ideas))
    responder = make_responder(f"optimiser:ideas_file={tmp_path / 'ideas.json'}")
    assert isinstance(responder, OptimiserResponder)
    assert [responder.pick(n).title for n in (1, 2, 3)] == ["first", "second", "first"]
    assert responder.pick(2).files == (("pairs.py", "x = 1\n"),)
    (tmp_path / "bad.json").write_text(
        json.dumps([{"key": "c", "kind": "sneaky", "title": "t", "files": {"a": ""}}])
    )
    for spec in (
        f"optimiser:ideas_file={tmp_path / 'bad.json'}",
        f"optimiser:ideas_file={tmp_path / 'none.json'}",
    ):
        with pytest.raises(UserError) as refused:
            make_responder(spec)
        assert "ideas file" in str(refused.value) and "\n" not in str(refused.value)


def test_by_seed_any_six_tries_in_a_row_try_every_idea_once() -> None:
    from hilbert.sim.optimiser.ideas import ideas
    from hilbert.sim.optimiser.responder import OptimiserResponder

    every = sorted(idea.key for idea in ideas())
    for seed in (0, 7, 28547, 99_999):  # 28547: a demo whose three explorers all drew the same idea
        responder = OptimiserResponder(seed)
        for first in (1, 4):
            assert sorted(responder.pick(n).key for n in range(first, first + len(every))) == every
