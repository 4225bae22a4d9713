"""The engineer on projects of many modules: it fixes one half of a pair from that half's own test
(and two workers doing the two halves collide in git, which is what pairs are for), both halves when
the whole suite is its task, and a function whose name other modules define too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engineer_testkit import FAST, solve, suite_passes

from hilbert.sim.engineer.harness import tool_arguments
from hilbert.sim.sample import Bug, SampleProject, generate_sample_project


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def half_task(half: Bug) -> str:
    """A worker's task on one half (the lead's plan gives each half a task: its test calls a function
    of its own)."""
    return (
        f"Task T1: Fix {half.tests[0]}\n"
        f"The task is done when `python -m pytest -q {half.tests[0]}` passes. Do not edit or skip tests."
    )


def passes(root: Path, test_id: str) -> bool:
    command = [sys.executable, "-m", "pytest", "-q", test_id]
    return subprocess.run(command, cwd=root, env={**os.environ, **FAST}, capture_output=True).returncode == 0


def test_two_workers_fix_the_two_halves_of_a_pair_alone_and_their_changes_conflict(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "origin", 4, bugs=1, paired=12)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "base")):
        assert git(*args, cwd=project.path).returncode == 0
    first, second = project.pairs[-1]  # last in the file: the engineer looks where the test's function calls
    copies = {}
    for name, half in (("a", first), ("b", second)):
        root = tmp_path / name
        assert git("clone", "-q", str(project.path), str(root), cwd=tmp_path).returncode == 0
        episode = solve(project, task=half_task(half), root=root)
        assert episode.finished and episode.claim.startswith("Fixed"), episode.claim
        assert passes(root, half.tests[0]), (name, episode.claim)
        lines = (root / half.file).read_text().splitlines()
        other = second if half is first else first
        assert lines[half.line - 1] == half.original and lines[other.line - 1] == other.mutated
        assert not passes(root, other.tests[0]), "the other half is left for its own worker"
        diff = git("diff", "-U0", cwd=root).stdout
        assert diff.count("\n+ ") == 1 and diff.count("\n- ") == 1, diff  # one line changed
        assert git("commit", "-qam", f"fix {name}", cwd=root).returncode == 0
        copies[name] = root
    assert git("pull", "-q", "--no-rebase", str(copies["b"]), "main", cwd=copies["a"]).returncode != 0
    status = git("status", "--porcelain", cwd=copies["a"]).stdout
    assert f"UU {first.file}" in status, status


def test_fixes_both_halves_of_a_pair_one_after_the_other_when_the_suite_is_its_task(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "p", 8, bugs=1, paired=2)
    episode = solve(project)
    passed, output = suite_passes(project)
    assert episode.finished and passed, f"{episode.claim}\n{output}"
    lines = (project.path / project.pairs[0][0].file).read_text().splitlines()
    assert all(lines[bug.line - 1] == bug.original for pair in project.pairs for bug in pair)


def _bug_in_a_name_defined_earlier(tmp_path: Path) -> tuple[SampleProject, Bug, list[str]]:
    """A project whose one bug is in a function that a module sorting before it defines too (so the
    first `def` a grep finds is the wrong one)."""
    for seed in range(200):
        project = generate_sample_project(tmp_path / f"s{seed}", seed, bugs=1, modules=12)
        bug = project.bugs[0]
        twins = [
            f
            for f in project.source_files
            if f != bug.file and f"def {bug.function}(" in (project.path / f).read_text()
        ]
        if twins and min(twins) < bug.file:
            return project, bug, twins
    raise AssertionError("no seed below 200 puts the bug in a name an earlier module defines too")


def test_fixes_a_function_whose_name_other_modules_define_too(tmp_path: Path) -> None:
    project, bug, twins = _bug_in_a_name_defined_earlier(tmp_path)
    before = {f: (project.path / f).read_text() for f in twins}
    episode = solve(project)
    passed, output = suite_passes(project)
    assert episode.finished and passed, f"seed {project.seed}: {episode.claim}\n{output}"
    assert {f: (project.path / f).read_text() for f in twins} == before
    edited = {a["path"] for a in tool_arguments(episode.messages, "edit_file")}
    assert edited == {bug.file}, edited
