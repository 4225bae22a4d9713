"""Sample projects of many modules and with paired bugs: three modules still write what they always
wrote, more modules keep readable unique names and every bug breaks exactly the tests it records, and
each half of a pair is a one-token bug that its own test notices (through a function of its own) and
the engineer's repairs undo."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from engineer_testkit import failing_tests, suite_passes

from hilbert.errors import UserError
from hilbert.sim.engineer.repairs import candidates
from hilbert.sim.sample import SampleProject, generate_sample_project

# sha256 over (path, content) of every file the generator wrote before `modules` and `paired` existed.
BEFORE = {
    (7, 2): "b2c517abff1f5ef0823235f60ba60d5296da08bf3050abed1a2ef6d92f2d6ddb",
    (0, 3): "c11d8f7ced6c884f785d6d544f9914cda0542a5306be828b8d99e300b648ee02",
    (23, 1): "343eaf15eb0da2b3726626f5a82901a205d3c01598d111eeb615e8f68ffb1e88",
    (4, 0): "a8e65c8372b22367f2871ce4eb79bbc85fd614fd80751f436f4818263859fe21",
}


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for file in sorted(f for f in root.rglob("*") if f.is_file()):
        h.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()


def module_names(project: SampleProject) -> list[str]:
    return [Path(name).stem for name in project.source_files]


def functions_of(project: SampleProject, source_file: str) -> list[str]:
    return re.findall(r"^def (\w+)\(", (project.path / source_file).read_text(), re.MULTILINE)


def test_three_modules_write_exactly_what_they_wrote_before(tmp_path: Path) -> None:
    for (seed, bugs), expected in BEFORE.items():
        project = generate_sample_project(tmp_path / f"s{seed}", seed, bugs=bugs, modules=3)
        assert digest(project.path) == expected, (seed, bugs)
        assert len(project.source_files) == 3 and project.pairs == ()
    again = generate_sample_project(tmp_path / "default", 7, bugs=2)
    assert digest(again.path) == BEFORE[(7, 2)]


def test_more_modules_cycle_the_themes_under_unique_readable_names(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "p", 0, bugs=24, modules=12)
    names = module_names(project)
    assert len(set(names)) == 12
    themes = [
        {"text", "strings", "words"},
        {"listops", "sequences", "items"},
        {"numbers", "mathutil", "arith"},
    ]
    for i, name in enumerate(names):
        base, _, number = name.partition("_")
        assert base in themes[i % 3] and number == ("2" if i >= 9 else ""), names
    assert names[9:] == [f"{n}_2" for n in names[:3]]
    defined = [functions_of(project, f) for f in project.source_files]
    assert all(len(set(functions)) == 3 for functions in defined)
    everywhere = [name for functions in defined for name in functions]
    assert len(set(everywhere)) < len(everywhere), "function names repeat across modules"
    readme = (project.path / "README.md").read_text()
    assert all(f"{project.package}.{name}`" in readme for name in names)


def test_48_modules_hold_128_bugs_each_breaking_exactly_the_tests_it_records(tmp_path: Path) -> None:
    clean = generate_sample_project(tmp_path / "clean", 5, bugs=0, modules=48)
    broken = generate_sample_project(tmp_path / "broken", 5, bugs=128, modules=48)
    assert len(broken.bugs) == 128 and len({(b.file, b.function) for b in broken.bugs}) == 128
    for bug in broken.bugs:
        assert bug.tests and all(t.startswith(f"tests/test_{Path(bug.file).stem}.py::") for t in bug.tests)
    failing = failing_tests([clean.path, broken.path])
    assert failing[str(clean.path)] == []
    recorded = sorted(test.split("::")[1] for bug in broken.bugs for test in bug.tests)
    assert recorded == sorted(failing[str(broken.path)])
    for name in clean.source_files:
        before = (clean.path / name).read_text().splitlines()
        after = (broken.path / name).read_text().splitlines()
        changed = [i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert changed == [bug.line for bug in broken.bugs if bug.file == name]


def test_asking_for_more_bugs_than_functions_says_how_many_fit(tmp_path: Path) -> None:
    with pytest.raises(UserError) as refused:
        generate_sample_project(tmp_path / "p", 1, bugs=40, modules=12)
    assert "cannot inject 40 bugs" in str(refused.value) and "0 to 36 bugs" in str(refused.value)
    with pytest.raises(UserError, match="at least 1 module"):
        generate_sample_project(tmp_path / "q", 1, modules=0)


def test_paired_halves_sit_on_adjacent_lines_and_each_breaks_only_its_own_test(tmp_path: Path) -> None:
    plain = generate_sample_project(tmp_path / "plain", 9, bugs=2)
    project = generate_sample_project(tmp_path / "paired", 9, bugs=2, paired=3)
    assert [b for b in project.bugs if b.file in plain.source_files] == list(plain.bugs)
    for name in plain.source_files + plain.test_files:  # the pairs change nothing else
        assert (project.path / name).read_text() == (plain.path / name).read_text()
    assert len(project.bugs) == 2 + 2 * 3 and len(project.pairs) == 3
    bounds = f"{project.package}/bounds.py"
    assert project.source_files[-1] == bounds and project.test_files[-1] == "tests/test_bounds.py"
    lines = (project.path / bounds).read_text().splitlines()
    tests = (project.path / "tests/test_bounds.py").read_text()
    for first, second in project.pairs:
        assert first in project.bugs and second in project.bugs
        assert (first.file, second.file) == (bounds, bounds) and first.function == second.function
        assert second.line == first.line + 1 and first.operator == second.operator == "off_by_one"
        assert len(first.tests) == len(second.tests) == 1 and first.tests != second.tests
        readers = [half.tests[0].split("::test_")[1].removesuffix("_value") for half in (first, second)]
        assert readers[0] != readers[1] != first.function  # each half is read through its own function
        assert f"def {readers[0]}():" in "\n".join(lines) and f"{readers[1]}() ==" in tests
        for half in (first, second):
            assert lines[half.line - 1] == half.mutated != half.original
            index = half.line - 1
            assert half.original in {c.line for c in candidates(lines, [index])}, half
    broken = failing_tests([project.path])[str(project.path)]
    assert sorted(t.split("::")[1] for b in project.bugs for t in b.tests) == sorted(broken)
    # repair one half of each pair: exactly its own test passes again
    for first, _second in project.pairs:
        lines[first.line - 1] = first.original
    (project.path / bounds).write_text("\n".join(lines) + "\n")
    still = failing_tests([project.path])[str(project.path)]
    assert sorted(still) == sorted(
        set(broken) - {first.tests[0].split("::")[1] for first, _ in project.pairs}
    )


def test_real_pytest_on_48_modules_and_pairs_fails_just_the_recorded_tests(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "p", 2, bugs=128, modules=48, paired=8)
    passed, output = suite_passes(project)
    tests = sum(len(b.tests) for b in project.bugs)
    assert not passed and f"{tests} failed" in output, output[-500:]
