"""Integrity checks on configuration: the test runner's (`test_config_changed`) and git's
(`attributes_changed`).

Configuration that only declares is not a finding: a marker registered (the `markers` key of a pytest
section, or a `pytest_configure` that only calls `config.addinivalue_line("markers", ...)`), or a
conftest that only adds imports, helpers, constants and fixtures that new tests request and no
existing test does. Configuration that changes what runs or how outcomes count is: any other pytest
key (`addopts`, `testpaths`, `python_files`, `-p` plugins, `filterwarnings`, `xfail_strict` ...),
`collect_ignore`, `pytest_plugins`, any other hook, an autouse fixture, a fixture that replaces one
existing tests use, code a conftest runs at import, a removed or changed conftest statement, start-up
hooks (`sitecustomize`, `.pth`). `filterwarnings` is not declarative: `ignore` can turn a test that
the base fails under `error` into a pass, and `error` can fail tests the base passes.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import PurePosixPath

from hilbert.judge.change import (
    Allowances,
    Change,
    FileChange,
    Finding,
    added_lines,
    is_test_path,
    new_occurrences,
)
from hilbert.judge.python_ast import dotted, parse

STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py")
SECTION = re.compile(r"^\s*\[+([^\]]+)\]+\s*$", re.MULTILINE)
DECLARATIVE_KEYS = frozenset({"markers"})
SELECTION_GLOBALS = frozenset({"pytest_plugins", "collect_ignore", "collect_ignore_glob"})
# attributes that change more than line endings in what a checkout or `git archive` writes: the gate
# exports raw blobs, so none applies to its own runs, but these put other bytes in a person's checkout
# or a release archive than the commit holds. Line-ending ones (text, eol, crlf, binary) and diff or
# merge drivers are advisory: they are repository hygiene, and change no byte the gate runs.
CONTENT_ATTRIBUTES = frozenset({"filter", "export-subst", "export-ignore", "ident", "working-tree-encoding"})


def test_config_changed(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """A conftest that does more than declare (see the module docstring), pytest.ini or a pytest
    section of tox.ini/setup.cfg/pyproject.toml changed beyond `markers`, pytest plugins and entry
    points, or interpreter start-up hooks (sitecustomize, .pth files). Blocking: each of these changes
    which tests run or how their outcomes count, and an honest fix needs none of it (a new test's
    fixture and marker are declarative and not findings). Covered (advisory when the gate gathered
    pytest's outcomes), except the start-up hooks: the gate's runs use the base's configuration, load
    plugins by name with autoload off, read outcomes from raw call info and run the existing tests
    once without the candidate's conftests, so none of this can change what they decide."""
    findings: list[Finding] = []
    for fc in change.files:
        name = PurePosixPath(fc.path).name
        if name == "conftest.py":
            why = _conftest_does_more(fc, change)
            if why is not None:
                line, reason = why
                message = f"{fc.path} was {fc.status}: {reason}"
                findings.append(Finding("test_config_changed", fc.path, line, message, covered=True))
        elif name in ("pytest.ini", ".pytest.ini", *STARTUP_HOOKS) or name.endswith(".pth"):
            if fc.status == "modified" and name.endswith(".ini") and _only_declarative_ini(fc, ("pytest",)):
                continue  # a new pytest.ini is never declarative: it outranks every other config file
            message = f"{fc.path} was {fc.status}"
            covered = name.endswith(".ini")  # the base's configuration is imposed; start-up hooks are not
            findings.append(Finding("test_config_changed", fc.path, None, message, covered=covered))
        elif name in ("tox.ini", "setup.cfg", "pyproject.toml"):
            for section in _pytest_sections_changed(fc):
                message = f"section [{section}] of {fc.path} was changed"
                findings.append(Finding("test_config_changed", fc.path, None, message, covered=True))
        elif fc.is_python and (new := parse(fc.new_text)) is not None:
            old = parse(fc.old_text)
            before = Counter(key for key, _ in _plugin_tokens(old)) if old is not None else Counter[str]()
            for key, line in new_occurrences(fc, before, _plugin_tokens(new)):
                message = f"{fc.path} newly defines {key}, a pytest plugin hook"
                findings.append(Finding("test_config_changed", fc.path, line, message, covered=True))
        else:
            for line, text in added_lines(fc.old_text, fc.new_text):
                if "pytest11" in text:
                    message = f"{fc.path} newly registers a pytest plugin entry point"  # autoload is off
                    findings.append(Finding("test_config_changed", fc.path, line, message, covered=True))
    return findings


# ---------------------------------------------------------------- conftest.py


def _conftest_does_more(fc: FileChange, change: Change) -> tuple[int | None, str] | None:
    """None when the conftest change only declares; else (line, why) of the first thing that does more."""
    if fc.status == "deleted":
        return None, "a conftest the existing tests ran with was removed"
    new = parse(fc.new_text)
    if new is None:
        return None, "it does not parse"
    old = parse(fc.old_text) if fc.old_text is not None else ast.Module(body=[], type_ignores=[])
    if old is None:
        return None, "its old version does not parse"
    kept = Counter(ast.dump(stmt) for stmt in new.body)
    for stmt in old.body:
        if kept[ast.dump(stmt)] <= 0:
            return None, f"its statement at old line {stmt.lineno} was changed or removed"
        kept[ast.dump(stmt)] -= 1
    had = Counter(ast.dump(stmt) for stmt in old.body)
    added = []
    for stmt in new.body:
        if had[ast.dump(stmt)] > 0:
            had[ast.dump(stmt)] -= 1
        else:
            added.append(stmt)
    existing, fresh = _requested_fixtures(change)
    for stmt in added:
        reason = _not_declarative(stmt, existing, fresh)
        if reason:
            return stmt.lineno, reason
    return None


def _not_declarative(stmt: ast.stmt, existing: set[str], fresh: set[str]) -> str:
    """Why an added conftest statement does more than declare, or '' when it only declares."""
    if isinstance(stmt, ast.Import):
        return ""
    if isinstance(stmt, ast.ImportFrom):
        names = [alias.asname or alias.name for alias in stmt.names]
        if any(name == "*" or name.startswith("pytest_") for name in names):
            return f"it imports {', '.join(names)} (hooks or everything) from {stmt.module}"
        return ""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return ""
    if isinstance(stmt, ast.ClassDef):
        return ""
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [dotted(target) for target in targets]
        if any(
            name in SELECTION_GLOBALS or name.startswith("pytest_") or not name.isidentifier()
            for name in names
        ):
            return f"it sets {', '.join(names)}"
        if stmt.value is not None and any(isinstance(node, ast.Call) for node in ast.walk(stmt.value)):
            return f"it runs code at import ({', '.join(names)} = ...)"
        return ""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return _function_not_declarative(stmt, existing, fresh)
    return f"it runs code at import (line {stmt.lineno})"


def _function_not_declarative(
    func: ast.FunctionDef | ast.AsyncFunctionDef, existing: set[str], fresh: set[str]
) -> str:
    decorators = [dotted(d) for d in func.decorator_list]
    if any("hookimpl" in name or "hookspec" in name for name in decorators):
        return f"{func.name} is a pytest hook"
    if func.name.startswith("pytest_"):
        if func.name == "pytest_configure" and _only_registers_markers(func):
            return ""
        return f"it defines {func.name}, a pytest hook"
    fixture = [d for d in func.decorator_list if dotted(d).split(".")[-1] == "fixture"]
    if not fixture:
        return ""  # a helper: it runs only when something calls it
    call = fixture[0] if isinstance(fixture[0], ast.Call) else None
    keywords = {k.arg: k.value for k in call.keywords} if call is not None else {}
    autouse = keywords.get("autouse")
    if autouse is not None and not (isinstance(autouse, ast.Constant) and autouse.value is False):
        return f"fixture {func.name} is autouse: it runs for every test"
    named = keywords.get("name")
    name = named.value if isinstance(named, ast.Constant) and isinstance(named.value, str) else func.name
    if name in existing:
        return f"fixture {name} replaces one that existing tests use"
    if name not in fresh:
        return f"fixture {name} is not requested by any new test"
    return ""


def _only_registers_markers(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return bool(body) and all(
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and isinstance(s.value.func, ast.Attribute)
        and s.value.func.attr == "addinivalue_line"
        and bool(s.value.args)
        and isinstance(s.value.args[0], ast.Constant)
        and s.value.args[0].value == "markers"
        for s in body
    )


def _requested_fixtures(change: Change) -> tuple[set[str], set[str]]:
    """The fixture names that tests and fixtures which existed at the base request, and those that the
    change's new tests and fixtures request (parameters and `usefixtures`)."""
    changed = {fc.path: fc for fc in change.files}
    existing: set[str] = set()
    fresh: set[str] = set()
    for path, text in change.head_tests:
        if path not in changed:
            existing |= _requests(parse(text), None)
    for fc in change.files:
        if not fc.is_python or not is_test_path(fc.path):
            continue
        old, new = parse(fc.old_text), parse(fc.new_text)
        existing |= _requests(old, None)
        fresh |= _requests(new, _functions(old))
    return existing, fresh


def _functions(module: ast.Module | None) -> set[str]:
    return (
        set()
        if module is None
        else {ast.dump(n) for n in ast.walk(module) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    )


def _requests(module: ast.Module | None, skip: set[str] | None) -> set[str]:
    """Fixture names requested by the functions in `module` (those whose code is in `skip` left out)."""
    found: set[str] = set()
    if module is None:
        return found
    for node in ast.walk(module):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if skip is not None and ast.dump(node) in skip:
            continue
        found |= {arg.arg for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        found |= set(_usefixtures(node))
    return found - {"self", "cls", "request"}


def _usefixtures(node: ast.AST) -> Iterator[str]:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and dotted(inner.func).endswith("usefixtures"):
            yield from (
                a.value for a in inner.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )


# ---------------------------------------------------------------- ini and toml


def _sections(text: str | None) -> dict[str, str]:
    if text is None:
        return {}
    found: dict[str, str] = {}
    matches = list(SECTION.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found[match.group(1).strip().strip('"')] = text[match.end() : end].strip()
    return found


def _pytest_sections_changed(fc: FileChange) -> list[str]:
    old, new = _sections(fc.old_text), _sections(fc.new_text)
    changed = []
    for name in sorted(old.keys() | new.keys()):
        relevant = name in ("pytest", "tool:pytest") or name.startswith("tool.pytest") or "pytest11" in name
        relevant = relevant or (
            name == "options.entry_points" and "pytest11" in old.get(name, "") + new.get(name, "")
        )
        if relevant and old.get(name) != new.get(name):
            declarative = name in old and (  # a new section can make pytest read this file, not another
                _only_declarative_toml(fc, name)
                if fc.path.endswith(".toml")
                else _only_declarative_ini(fc, (name,))
            )
            if not declarative:
                changed.append(name)
    return changed


def _ini_keys(text: str | None, sections: tuple[str, ...]) -> dict[str, str] | None:
    if text is None:
        return {}
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return {
        key: value
        for section in sections
        if parser.has_section(section)
        for key, value in parser[section].items()
    }


def _only_declarative_ini(fc: FileChange, sections: tuple[str, ...]) -> bool:
    old, new = _ini_keys(fc.old_text, sections), _ini_keys(fc.new_text, sections)
    return old is not None and new is not None and _differ_only_in_declarations(old, new)


def _only_declarative_toml(fc: FileChange, section: str) -> bool:
    tables = []
    for text in (fc.old_text, fc.new_text):
        try:
            table: object = tomllib.loads(text or "")
        except tomllib.TOMLDecodeError:
            return False
        for part in section.split("."):
            table = table.get(part, {}) if isinstance(table, dict) else {}
        if not isinstance(table, dict):
            return False
        tables.append(table)
    return _differ_only_in_declarations(tables[0], tables[1])


def _differ_only_in_declarations(old: Mapping[str, object], new: Mapping[str, object]) -> bool:
    differing = {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}
    return differing <= DECLARATIVE_KEYS


def _plugin_tokens(module: ast.Module) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("pytest_"):
            found.append((node.name, node.lineno))
        elif isinstance(node, ast.Name) and node.id == "pytest_plugins":
            found.append(("pytest_plugins", node.lineno))
        elif isinstance(node, ast.Constant) and node.value == "pytest11":
            found.append(("pytest11", node.lineno))
    return found


# ---------------------------------------------------------------- .gitattributes


def attributes_changed(change: Change, verify: str, allow: Allowances) -> list[Finding]:
    """A `.gitattributes` (in any folder) or an `info/attributes` file was changed. Blocking when a
    line added or removed sets an attribute that puts other bytes than the commit's in a checkout or
    `git archive` (filter, export-subst, export-ignore, ident, working-tree-encoding, or a macro made of
    them): an honest fix changes code, not how git writes it, and the gate exports raw blobs anyway
    (`hilbert.workspaces.export`), so the attempt is the finding. Advisory for any other change: line
    endings (`text=auto eol=lf`), diff and merge drivers, `linguist-vendored` are repository hygiene."""
    findings: list[Finding] = []
    for fc in change.files:
        pure = PurePosixPath(fc.path)
        if pure.name != ".gitattributes" and not fc.path.endswith("info/attributes"):
            continue
        old, new = _attribute_lines(fc.old_text), _attribute_lines(fc.new_text)
        macros = _content_macros((fc.old_text or "") + "\n" + (fc.new_text or ""))
        gained, lost = Counter(text for _, text in new), Counter(text for _, text in old)
        added = [(line, text) for line, text in new if (gained - lost)[text] > 0]
        removed = [(line, text) for line, text in old if (lost - gained)[text] > 0]
        steering: list[tuple[int | None, str]] = [
            (line, text) for line, text in added if _content(text, macros)
        ]
        steering += [(None, text) for _line, text in removed if _content(text, macros)]
        if steering:
            line, text = steering[0]
            verb = "sets" if line is not None else "removes"
            message = f"{fc.path} {verb} `{text}`, which changes what a checkout or `git archive` writes"
            findings.append(Finding("attributes_changed", fc.path, line, message))
        elif added or removed or fc.status in ("added", "deleted"):
            message = f"{fc.path} was {fc.status} (no attribute that changes file content)"
            findings.append(Finding("attributes_changed", fc.path, None, message, blocking=False))
    return findings


def _attribute_lines(text: str | None) -> list[tuple[int, str]]:
    return [
        (i, line.strip())
        for i, line in enumerate((text or "").splitlines(), 1)
        if line.strip() and not line.strip().startswith("#")
    ]


def _names(text: str) -> set[str]:
    """The attribute names a line sets, unsets or unspecifies (`-text !eol filter=x`: text, eol, filter)."""
    words = text.split()[1:]
    return {word.lstrip("-!").split("=")[0] for word in words}


def _content_macros(text: str) -> set[str]:
    macros: set[str] = set()
    for _line, entry in _attribute_lines(text):
        if entry.startswith("[attr]") and _names(entry) & CONTENT_ATTRIBUTES:
            macros.add(entry.split()[0].removeprefix("[attr]"))
    return macros


def _content(text: str, macros: set[str]) -> bool:
    names = _names(text)
    return bool(names & CONTENT_ATTRIBUTES or names & macros)


__all__ = ["attributes_changed", "test_config_changed"]
