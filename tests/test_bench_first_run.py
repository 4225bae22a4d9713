"""The first-run bench's pure parts (bench/first_run_bench/sites.py), without PyPI or a fleet run.

A small fake project stands in for a library; a fake `breaks` stands in for running its suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import first_run  # noqa: E402
from first_run_bench.sites import (  # noqa: E402
    Site,
    apply_sites,
    candidate_sites,
    code_lines,
    draw,
    product_files,
)

LIB = '''"""A docstring that says x < y and True or not."""

LIMIT = 10


def clamp(value, low, high):
    """Keep value between low and high (if low < high)."""
    if value < low:
        return low
    return min(value, high)


class Box:
    def area(self, w, h):
        # w * h would be the area
        return w * h

    def fits(self, w, h):
        return w <= 3 and h <= 3
'''


def fake_project(root: Path) -> Path:
    (root / "src" / "lib").mkdir(parents=True)
    (root / "src" / "lib" / "__init__.py").write_text(LIB)
    (root / "tests").mkdir()
    (root / "tests" / "test_lib.py").write_text(
        "from lib import clamp\n\n\ndef test_clamp():\n    assert 1 < 2\n"
    )
    (root / "docs").mkdir()
    (root / "docs" / "conf.py").write_text("x = 1 + 2\n")
    (root / "setup.py").write_text("x = 1 + 2\n")
    return root


def test_only_product_code_outside_strings_and_comments_is_a_candidate(tmp_path: Path) -> None:
    root = fake_project(tmp_path)
    assert product_files(root) == ["src/lib/__init__.py"]
    sites = candidate_sites(root, product_files(root))
    lines = {site.line for site in sites}
    assert lines == {3, 8, 10, 16, 19}, sorted(lines)  # not the docstrings (1, 7) nor the comment (15)
    assert 1 not in code_lines(LIB) and 7 not in code_lines(LIB) and 15 not in code_lines(LIB)
    by_line = {site.line: site for site in sites}
    assert by_line[3].function == "<module>" and by_line[8].function == "clamp"
    assert by_line[16].function == "Box.area" and by_line[16].operator == "arithmetic"
    assert {s.operator for s in sites if s.line == 10} == {"min_max"}


def test_draw_is_seeded_checks_each_site_and_keeps_one_per_function(tmp_path: Path) -> None:
    root = fake_project(tmp_path)
    candidates = candidate_sites(root, product_files(root))
    tried: list[Site] = []

    def breaks(site: Site) -> tuple[str, ...]:  # the fake suite: the module-level constant is never tested
        tried.append(site)
        return () if site.function == "<module>" else (f"tests/test_lib.py::test_{site.line}",)

    first = draw(candidates, 7, 3, breaks)
    again = draw(candidates, 7, 3, breaks)
    assert first == again and len(first) == 3
    assert all(site.breaks == (f"tests/test_lib.py::test_{site.line}",) for site in first)
    assert len({site.function for site in first}) == 3 and "<module>" not in {s.function for s in first}
    other = [draw(candidates, seed, 2, breaks) for seed in range(8)]
    assert len({tuple(s.label for s in sites) for sites in other}) > 1  # the seed chooses
    tried.clear()
    assert len(draw(candidates, 7, 10, breaks)) == 3  # three functions broken: no more can be kept
    assert any(site.function == "<module>" for site in tried)  # tried, broke nothing, not kept


def test_applied_sites_change_exactly_their_lines(tmp_path: Path) -> None:
    root = fake_project(tmp_path)
    chosen = draw(candidate_sites(root, product_files(root)), 3, 2, lambda site: ("t",))
    apply_sites(root, chosen)
    after = (root / "src" / "lib" / "__init__.py").read_text().split("\n")
    before = LIB.split("\n")
    changed = {n + 1 for n, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}
    assert changed == {site.line for site in chosen}
    assert all(after[site.line - 1] == site.new for site in chosen)


def test_a_fixed_bug_whose_test_fails_for_another_bug_still_there_counts_fixed(tmp_path: Path) -> None:
    """Seeds 22 and 23: a bug its task fixed was counted "not fixed" because a test it broke ran into
    another bug the run left. With the others undone in the result checkout, its tests pass: fixed."""
    (tmp_path / "calc.py").write_text("def a():\n    return 1 + 1\n\n\ndef b():\n    return 3 - 1\n")
    (tmp_path / "test_calc.py").write_text(
        "from calc import a, b\n\n\ndef test_a():\n    assert a() == 2\n\n\n"
        "def test_both():\n    assert (a(), b()) == (2, 2)\n"
    )
    left = Site(
        "calc.py", 2, "arithmetic", "    return 1 + 1", "    return 1 - 1", "a", ("test_calc.py::test_a",)
    )
    fixed = Site(
        "calc.py", 6, "arithmetic", "    return 3 - 1", "    return 3 + 1", "b", ("test_calc.py::test_both",)
    )
    apply_sites(tmp_path, [left])  # the result branch: the run fixed `b`, not `a`
    first_run.git(tmp_path, "init", "-q")
    first_run.git(tmp_path, "add", "-A")
    first_run.git(tmp_path, "commit", "-qm", "result")
    assert first_run._masked(tmp_path, fixed, [left, fixed], 1.0)
    assert not first_run._masked(tmp_path, left, [left, fixed], 1.0)
    assert (tmp_path / "calc.py").read_text().split("\n")[1] == "    return 1 - 1"  # the checkout as it was


def test_a_bug_fixed_by_a_compensation_is_not_put_back_for_another_bugs_check(tmp_path: Path) -> None:
    """Seed 26: one bug was "fixed" by a compensation on another line (`+= 2` in `_Timer.__enter__` for
    the `-= 2` put in `__exit__`); putting that bug back for another fixed bug's check broke the timer,
    and the other bug, fixed and merged, was counted "not fixed". Those still not fixed are checked
    again with only the bugs that are not fixed put back."""
    (tmp_path / "calc.py").write_text(
        "def a():\n    return 1 - 1\n\n\n"  # L: left by the run (was 1 + 1)
        "def b():\n    return 3 - 1\n\n\n"  # Y: fixed by the run
        "def c():\n    base = 3\n    return base - 2\n"  # X: `base - 1` made `- 2`; the run made base 3
    )
    (tmp_path / "test_calc.py").write_text(
        "from calc import a, b, c\n\n\n"
        "def test_c():\n    assert (a(), c()) == (2, 1)\n\n\n"
        "def test_b():\n    assert (a(), b(), c()) == (2, 2, 1)\n\n\n"
        "def test_a():\n    assert a() == 2\n"
    )
    left = Site(
        "calc.py", 2, "arithmetic", "    return 1 + 1", "    return 1 - 1", "a", ("test_calc.py::test_a",)
    )
    fixed = Site(
        "calc.py", 6, "arithmetic", "    return 3 - 1", "    return 3 + 1", "b", ("test_calc.py::test_b",)
    )
    offset = Site(
        "calc.py",
        11,
        "off_by_one",
        "    return base - 1",
        "    return base - 2",
        "c",
        ("test_calc.py::test_c",),
    )
    first_run.git(tmp_path, "init", "-q")
    first_run.git(tmp_path, "add", "-A")
    first_run.git(tmp_path, "commit", "-qm", "result")
    sites = [left, fixed, offset]
    assert not first_run._masked(tmp_path, fixed, sites, 1.0)  # with `base - 1` put back, c() is 2
    assert first_run.masked_fixes(tmp_path, sites, [False, False, False], 1.0) == [False, True, True]
