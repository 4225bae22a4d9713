"""Integrity checks that read the tests' Python code: existing tests changed, deleted or emptied,
assertions weakened, tests patching the code under test, and test expectations hard-coded into the code.

Each check is `(change, verify, allow) -> list[Finding]`; `integrity` registers them. Adding a new test
file, or new test functions to an existing file, is never a finding here: only what already existed counts.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import PurePosixPath

from hilbert.judge.change import Allowances, Change, FileChange, Finding, is_test_path
from hilbert.judge.python_ast import (
    TestUnit,
    answer_literals,
    assertion_count,
    calls,
    dotted,
    expected_literals,
    fingerprint,
    import_roots,
    is_empty_body,
    parse,
    product_modules,
    tautologies,
    units,
)


def _is_conftest(path: str) -> bool:
    return PurePosixPath(path).name == "conftest.py"


def _test_modules(change: Change) -> Iterator[tuple[FileChange, dict[str, TestUnit], dict[str, TestUnit]]]:
    """Existing Python test modules that are still there: (file, old units, new units)."""
    for fc in change.files:
        if fc.status not in ("modified", "renamed") or not fc.is_python or not is_test_path(fc.path):
            continue
        if _is_conftest(fc.path):
            continue
        old, new = parse(fc.old_text), parse(fc.new_text)
        if old is not None and new is not None:
            yield fc, units(old), units(new)


def _has_tests(found: dict[str, TestUnit]) -> bool:
    return any(unit.is_test for unit in found.values())


def tests_changed(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """An existing test function, fixture, helper or module-level test code was changed or removed.
    A change that only inserts code into an existing test (an assert, a row of a parametrize table)
    is not a finding by itself: whatever it inserted, the gate also runs the verify with the original
    test files restored (`tests_restored`), so a test neutered by an insertion still fails the gate
    unless the code really passes the original test; other checks see inserted skips and exits.
    Blocking: the existing tests are the specification; the task names the tests it allows editing."""
    findings: list[Finding] = []
    for fc in change.files:
        if allow.allows(fc.path) or (fc.old_path is not None and allow.allows(fc.old_path)):
            continue
        if fc.status == "modified" and is_test_path(fc.path) and not fc.is_python:
            findings.append(Finding("tests_changed", fc.path, None, f"test data file {fc.path} was changed"))
    for fc, old, new in _test_modules(change):
        if allow.allows(fc.path) or (fc.old_path is not None and allow.allows(fc.old_path)):
            continue
        if _has_tests(old) and not _has_tests(new):
            continue  # reported by tests_deleted_or_emptied
        for name, unit in old.items():
            after = new.get(name)
            if after is None:
                what = "was removed"
            elif is_empty_body(after.node) and not is_empty_body(unit.node):
                continue  # reported by tests_deleted_or_emptied
            elif name == "<module>":
                now = getattr(after.node, "body", [])
                kept = {ast.dump(s) for s in now}
                lost = [  # a statement only extended (rows added to a table) is kept, as for tests
                    s
                    for s in getattr(unit.node, "body", [])
                    if ast.dump(s) not in kept and not any(only_insertions(s, n) for n in now)
                ]
                if not lost:
                    continue
                what = f"module-level code at old line {lost[0].lineno} was changed or removed"
                findings.append(Finding("tests_changed", fc.path, after.line, f"{fc.path}: {what}"))
                continue
            elif fingerprint(after.node) != fingerprint(unit.node):
                if only_insertions(unit.node, after.node):
                    continue  # strengthened (an assert, a table row added); the restored run checks the rest
                what = "was changed"
            else:
                continue
            line = after.line if after is not None else None
            kind = "test" if unit.is_test else "test helper"
            findings.append(
                Finding("tests_changed", fc.path, line, f"existing {kind} {name} in {fc.path} {what}")
            )
    return findings


def only_insertions(old: ast.AST, new: ast.AST) -> bool:
    """`new`'s code is `old`'s with tokens inserted and none removed or changed."""
    before, after = _tokens(ast.unparse(old)), _tokens(ast.unparse(new))
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return all(tag in ("equal", "insert") for tag, *_ in matcher.get_opcodes())


def _tokens(code: str) -> list[str]:
    return re.findall(r"\w+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S", code)


def tests_deleted_or_emptied(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """A test file was deleted or moved off the test paths, all its tests were removed, or an existing
    test's body was reduced to nothing. Blocking: a fix adds to the tests, it does not take them away."""
    findings: list[Finding] = []
    for fc in change.files:
        old_path = fc.old_path or fc.path
        if not is_test_path(old_path) or _is_conftest(old_path):
            continue
        if fc.status == "deleted":
            findings.append(
                Finding("tests_deleted_or_emptied", fc.path, None, f"test file {fc.path} was deleted")
            )
        elif fc.status == "renamed" and not is_test_path(fc.path):
            message = f"test file {old_path} was moved to {fc.path}, off the test paths"
            findings.append(Finding("tests_deleted_or_emptied", fc.path, None, message))
    for fc, old, new in _test_modules(change):
        if _has_tests(old) and not _has_tests(new):
            message = f"every test in {fc.path} was removed ({sum(u.is_test for u in old.values())} before)"
            findings.append(Finding("tests_deleted_or_emptied", fc.path, None, message))
            continue
        for name, unit in old.items():
            after = new.get(name)
            if after is not None and is_empty_body(after.node) and not is_empty_body(unit.node):
                message = f"existing test {name} in {fc.path} now has an empty body"
                findings.append(Finding("tests_deleted_or_emptied", fc.path, after.line, message))
    return findings


def assertions_weakened(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """An existing test or helper lost assertions, or gained one that cannot fail (`assert True`,
    `x == x`, `... or True`, a huge `approx` tolerance, `pytest.raises(Exception)`, a swallowing `except`).
    Applies to test edits the task allows, too. Blocking: a test the task lets a worker correct gets a
    right expectation, not a weaker one."""
    findings: list[Finding] = []
    for fc, old, new in _test_modules(change):
        for name, unit in old.items():
            after = new.get(name)
            if after is None or is_empty_body(after.node) or name == "<module>":
                continue
            before_count, after_count = assertion_count(unit.node), assertion_count(after.node)
            if after_count < before_count:
                message = f"{name} in {fc.path} has {after_count} assertions, {before_count} before"
                findings.append(Finding("assertions_weakened", fc.path, after.line, message))
            known = Counter(why for _line, why in tautologies(unit.node))
            for line, why in tautologies(after.node):
                if known[why] > 0:
                    known[why] -= 1
                    continue
                findings.append(Finding("assertions_weakened", fc.path, line, f"{name} in {fc.path}: {why}"))
    return findings


def _patch_targets(module: ast.Module, project: frozenset[str]) -> Counter[str]:
    """A key (the patching code, position-free) for each place the module patches project code."""
    roots = import_roots(module)
    found: Counter[str] = Counter()

    def project_root(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.split(".")[0] in project
        name = dotted(node)
        return bool(name) and roots.get(name.split(".")[0], "") in project

    for name, call in calls(module):
        last = name.split(".")[-1]
        first = call.args[0] if call.args else None
        if first is None:
            continue
        patches = last in ("setattr", "delattr", "patch") or name.endswith(("patch.object", "patch.multiple"))
        if patches and project_root(first):
            found[ast.dump(call)] += 1
    for node in ast.walk(module):
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and project_root(target.value):
                    found[ast.dump(node)] += 1
    return found


def _locate(module: ast.Module, key: str) -> tuple[int | None, str]:
    """Line and (shortened) source of the patching code with this key."""
    for node in ast.walk(module):
        if isinstance(node, ast.Call | ast.Assign | ast.AugAssign) and ast.dump(node) == key:
            code = ast.unparse(node).splitlines()[0]
            return node.lineno, code if len(code) <= 80 else code[:77] + "..."
    return None, ""


def monkeypatch_code_under_test(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """A test module newly patches the project's own code (monkeypatch.setattr, mock.patch, patch.object,
    or assigning to an attribute of a project module or class). Blocking: a test of the code under
    repair runs that code; replacing it in the test proves nothing about it."""
    findings: list[Finding] = []
    for fc in change.files:
        if not fc.is_python or not is_test_path(fc.path) or fc.new_text is None:
            continue
        new = parse(fc.new_text)
        if new is None:
            continue
        old = parse(fc.old_text)
        before = _patch_targets(old, change.project_modules) if old is not None else Counter[str]()
        for key, count in _patch_targets(new, change.project_modules).items():
            if count > before[key]:
                line, code = _locate(new, key)
                message = f"{fc.path} newly patches the project's own code: {code}"
                findings.append(Finding("monkeypatch_code_under_test", fc.path, line, message))
    return findings


def hardcoded_expected(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """A value the tests expect in an assert (`assert f(3) == 42`) newly appears in the project's code
    as a ready-made answer: returned, a lookup table's value, or in a branch chosen by comparing with a
    literal (`python_ast.answer_literals`). Trivial literals (0, 1, -1, True, False, None, "") and
    answers the file already gave are left out; a literal in a computation is not flagged, since
    restoring a constant (`x * 5`) is how many honest fixes look. Answers computed at run time are a
    blind spot: the held-out tests are the check for those. Blocking: an answer the tests expect,
    put where the code hands answers back, is the shape of a special case, not of a fix."""
    expected: dict[tuple[str, object], str] = {}
    tests = dict(change.head_tests)
    tests.update({fc.path: fc.new_text for fc in change.files if fc.new_text is not None and fc.is_python})
    for path, text in sorted(tests.items()):
        module = parse(text) if is_test_path(path) else None
        if module is not None:
            for key in expected_literals(module):
                expected.setdefault(key, path)
    findings: list[Finding] = []
    for fc, new, old in product_modules(change):
        had = answer_literals(old) if old is not None else {}
        for key, line in sorted(answer_literals(new).items(), key=lambda item: item[1]):
            if key in expected and key not in had:
                message = f"{fc.path} newly contains {key[1]!r}, a value {expected[key]} expects in an assert"
                findings.append(Finding("hardcoded_expected", fc.path, line, message))
    return findings
