"""The sample-project generator: varied, valid projects whose every injected bug breaks a test."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from engineer_testkit import failing_tests, suite_passes

from hilbert.errors import UserError
from hilbert.sim.sample import OPERATORS, generate_sample_project


def test_originals_pass_and_every_bug_breaks_a_test_of_its_function(tmp_path: Path) -> None:
    seeds = range(150)
    clean = {s: generate_sample_project(tmp_path / f"clean{s}", s, bugs=0) for s in seeds}
    broken = {s: generate_sample_project(tmp_path / f"broken{s}", s, bugs=1 + s % 2) for s in seeds}
    failing = failing_tests([p.path for p in (*clean.values(), *broken.values())])
    for seed in seeds:
        assert failing[str(clean[seed].path)] == [], f"seed {seed}: the original project fails its tests"
        project, failed = broken[seed], failing[str(broken[seed].path)]
        for bug in project.bugs:
            assert any(name.startswith(f"test_{bug.function}_") for name in failed), (seed, bug)
        assert all(any(n.startswith(f"test_{b.function}_") for b in project.bugs) for n in failed), (
            seed,
            failed,
        )
        recorded = [test.split("::")[1] for bug in project.bugs for test in bug.tests]
        assert sorted(recorded) == sorted(failed), (seed, recorded, failed)


def test_a_bug_is_one_changed_line_recorded_where_it_is(tmp_path: Path) -> None:
    for seed in range(20):
        clean = generate_sample_project(tmp_path / f"c{seed}", seed, bugs=0)
        broken = generate_sample_project(tmp_path / f"b{seed}", seed, bugs=2)
        assert len({bug.function for bug in broken.bugs}) == 2
        for name in clean.source_files + clean.test_files:
            before = (clean.path / name).read_text().splitlines()
            after = (broken.path / name).read_text().splitlines()
            changed = [i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
            recorded = [bug for bug in broken.bugs if bug.file == name]
            assert changed == [bug.line for bug in recorded], (seed, name)
            for bug in recorded:
                assert before[bug.line - 1] == bug.original and after[bug.line - 1] == bug.mutated
                assert bug.operator in OPERATORS


def test_real_pytest_fails_on_the_bug_and_passes_without_it(tmp_path: Path) -> None:
    clean = generate_sample_project(tmp_path / "clean", 11, bugs=0)
    broken = generate_sample_project(tmp_path / "broken", 11, bugs=1)
    assert suite_passes(clean)[0]
    passed, output = suite_passes(broken)
    assert not passed and f"test_{broken.bugs[0].function}_" in output
    assert broken.test_command == "python -m pytest -q" and "`python -m pytest -q`" in broken.task
    assert not (broken.path / ".pytest_cache").exists(), "the suite must leave no cache behind"


def test_seeds_vary_the_project_and_the_bug(tmp_path: Path) -> None:
    projects = [generate_sample_project(tmp_path / f"p{s}", s, bugs=1) for s in range(60)]
    assert len({p.package for p in projects}) >= 10
    assert len({p.bugs[0].function for p in projects}) >= 25
    operators = Counter(p.bugs[0].operator for p in projects)
    assert len(operators) >= 6, operators
    again = generate_sample_project(tmp_path / "again", 7, bugs=1)
    assert again.bugs == projects[7].bugs
    for name in again.source_files + again.test_files:
        assert (again.path / name).read_text() == (projects[7].path / name).read_text()


def test_refuses_a_non_empty_destination_and_impossible_bug_counts(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        generate_sample_project(tmp_path / "busy", 1)
    with pytest.raises(UserError, match="cannot inject"):
        generate_sample_project(tmp_path / "many", 1, bugs=50)
