"""Mutation operators: every injected bug can be undone by one repair the engineer knows."""

from __future__ import annotations

from hilbert.sim.sample import OPERATORS, rewrites
from hilbert.sim.sample.catalogue import THEMES


def _catalogue_lines() -> list[str]:
    return [line for _, templates in THEMES.values() for t in templates for line in t.source.splitlines()[1:]]


def test_every_injected_bug_has_a_repair_that_restores_the_line() -> None:
    seen_operators = set()
    for line in _catalogue_lines():
        for bug in rewrites(line, "inject"):
            broken = bug.apply(line)
            seen_operators.add(bug.operator)
            assert line in {fix.apply(broken) for fix in rewrites(broken, "repair")}, (line, broken)
    assert seen_operators == set(OPERATORS)


def test_operators_touch_code_not_strings_and_keep_it_readable() -> None:
    line = '    return "a - b < c" + text[-1] if not done and x == 0 else min(x, 2)'
    mutants = {r.operator: r.apply(line) for r in rewrites(line, "inject")}
    assert all('"a - b < c"' in mutant for mutant in mutants.values())
    assert mutants["first_last"] == '    return "a - b < c" + text[0] if not done and x == 0 else min(x, 2)'
    assert mutants["negation"] == '    return "a - b < c" + text[-1] if done and x == 0 else min(x, 2)'
    assert mutants["min_max"].endswith("max(x, 2)") and mutants["boolean"].count(" or ") == 1
    assert rewrites("    return -x", "inject") == []  # a unary minus is not an arithmetic operator
    assert "x + 0" not in {r.apply("y = x + 1") for r in rewrites("y = x + 1", "inject")}
