"""Reading Python source for the integrity checks: the pieces of a test module, dotted names of
calls, assert counts, tautologies and the literal values tests expect, and names resolved through a
module's imports (`imported_names`, `canonical`). Pure functions over `ast`; the checks that use them
live in the `integrity*` modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from hilbert.judge.change import Change, FileChange, is_test_path

Literal_ = tuple[str, object]
SKIP_NAMES = frozenset(
    {
        "skip",
        "skipif",
        "xfail",
        "skipIf",
        "skipUnless",
        "expectedFailure",
        "skipTest",
        "SkipTest",
        "importorskip",
    }
)
TRIVIAL = frozenset(
    {("num", 0), ("num", 1), ("num", -1), ("bool", True), ("bool", False), ("none", None), ("str", "")}
)
Unit = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class TestUnit:
    """A named piece of a test module: a function, a method (`Class.method`) or module-level code."""

    name: str
    line: int
    node: ast.AST
    is_test: bool


def parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def product_modules(change: Change) -> Iterator[tuple[FileChange, ast.Module, ast.Module | None]]:
    """Each Python file of the product (not a test) the change leaves parseable: the file, its new
    module and its old one (None: added, or unparseable before)."""
    for fc in change.files:
        if not fc.is_python or is_test_path(fc.path) or fc.new_text is None:
            continue
        new = parse(fc.new_text)
        if new is not None:
            yield fc, new, parse(fc.old_text)


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain (calls are looked through: `a().b` → `a.b`), else ''."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return ".".join(reversed(parts))
        else:
            return ".".join(reversed(parts)) if parts else ""


def is_skip_marker(node: ast.AST) -> bool:
    name = dotted(node)
    return bool(name) and name.split(".")[-1] in SKIP_NAMES


def units(module: ast.Module) -> dict[str, TestUnit]:
    """Every named def of a module (methods as `Class.method`), plus `<module>` for the other
    module-level code (imports and skipped left out)."""
    found: dict[str, TestUnit] = {}
    rest: list[ast.stmt] = []
    for stmt in module.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            found[stmt.name] = TestUnit(stmt.name, stmt.lineno, stmt, stmt.name.startswith("test"))
        elif isinstance(stmt, ast.ClassDef):
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{stmt.name}.{item.name}"
                    found[name] = TestUnit(name, item.lineno, item, item.name.startswith("test"))
        elif not isinstance(stmt, ast.Import | ast.ImportFrom) and not _is_docstring(stmt):
            rest.append(stmt)
    if rest:
        found["<module>"] = TestUnit(
            "<module>", rest[0].lineno, ast.Module(body=rest, type_ignores=[]), False
        )
    return found


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def fingerprint(node: ast.AST) -> str:
    """The unit's code without positions, skipped or skip markers (those have their own check)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        decorators = [d for d in node.decorator_list if not is_skip_marker(d)]
        body = [s for i, s in enumerate(node.body) if not (i == 0 and _is_docstring(s))]
        return ast.dump(ast.Module(body=body, type_ignores=[])) + "|" + "|".join(map(ast.dump, decorators))
    return ast.dump(node)


def is_empty_body(node: ast.AST) -> bool:
    """A function whose body does nothing: only a docstring, `pass`, `...` or a bare `return`."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for stmt in node.body:
        if isinstance(stmt, ast.Pass) or _is_docstring(stmt):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is ...:
            continue
        if isinstance(stmt, ast.Return) and stmt.value is None:
            continue
        return False
    return True


def calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield dotted(node.func), node


def assertion_count(tree: ast.AST) -> int:
    """`assert` statements, `assert*`/`assert_*` calls and `pytest.raises`/`warns` blocks."""
    count = sum(isinstance(n, ast.Assert) for n in ast.walk(tree))
    for name, _call in calls(tree):
        last = name.split(".")[-1]
        if last.startswith("assert") or last in ("raises", "warns", "fail"):
            count += 1
    return count


def tautologies(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, why) for every assertion in `tree` that cannot fail or barely checks anything."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and (why := _always_true(node.test)):
            yield node.lineno, why
        elif isinstance(node, ast.Call):
            name = dotted(node.func).split(".")[-1]
            if name in ("assertTrue", "assert_") and node.args and (why := _always_true(node.args[0])):
                yield node.lineno, why
            elif name in ("assertEqual", "assertEquals") and len(node.args) == 2:
                if ast.dump(node.args[0]) == ast.dump(node.args[1]):
                    yield node.lineno, "compares a value with itself"
                elif projection := _same_projection(node.args[0], node.args[1]):
                    yield node.lineno, projection
            elif name in ("approx", "isclose", "allclose", "assert_allclose") and (
                tol := _huge_tolerance(node)
            ):
                yield node.lineno, tol
            elif name == "raises" and node.args and dotted(node.args[0]) in ("Exception", "BaseException"):
                yield node.lineno, f"pytest.raises({dotted(node.args[0])}) accepts any error"
        elif isinstance(node, ast.ExceptHandler) and _swallows(node):
            yield node.lineno, "an except clause swallows failures"


# Built-ins that keep only part of a value: comparing two values through one compares less than the
# values (`f(a) == f(b)` for a project function is an ordinary test of `f`, not a projection).
PROJECTIONS = frozenset(
    {
        "len",
        "sorted",
        "set",
        "frozenset",
        "str",
        "repr",
        "type",
        "bool",
        "list",
        "tuple",
        "abs",
        "round",
        "int",
        "float",
        "hash",
        "id",
    }
)


def _same_projection(left: ast.expr, right: ast.expr) -> str:
    """Both sides of an equality pass through the same call or method (`a.lower() == b.lower()`,
    `len(a) == len(b)`, `set(a) == set(b)`): only what survives the projection is compared."""
    if not (isinstance(left, ast.Call) and isinstance(right, ast.Call)):
        return ""
    same_arguments = [ast.dump(a) for a in (*left.args, *left.keywords)] == [
        ast.dump(a) for a in (*right.args, *right.keywords)
    ]
    if isinstance(left.func, ast.Attribute) and isinstance(right.func, ast.Attribute):
        method = left.func.attr == right.func.attr and same_arguments
        if method and ast.dump(left.func.value) != ast.dump(right.func.value):
            return f"compares both sides only after .{left.func.attr}()"
        return ""
    name = dotted(left.func)
    if name in PROJECTIONS and dotted(right.func) == name and len(left.args) == len(right.args) == 1:
        return f"compares both sides only after {name}()"
    return ""


def _always_true(test: ast.expr) -> str:
    if isinstance(test, ast.Constant) and test.value:
        return f"asserts the constant {test.value!r}"
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and isinstance(test.operand, ast.Constant)
    ):
        return "asserts a negated constant" if not test.operand.value else ""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and any(map(_always_true, test.values)):
        return "an `or` with an always-true operand"
    projected = isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Eq)
    if (
        projected
        and isinstance(test, ast.Compare)
        and (why := _same_projection(test.left, test.comparators[0]))
    ):
        return why
    same = isinstance(test, ast.Compare) and ast.dump(test.left) == ast.dump(test.comparators[0])
    if (
        same
        and isinstance(test, ast.Compare)
        and isinstance(test.ops[0], ast.Eq | ast.Is | ast.GtE | ast.LtE)
    ):
        return "compares a value with itself"
    is_object = isinstance(test, ast.Call) and len(test.args) == 2 and dotted(test.args[1]) == "object"
    if is_object and isinstance(test, ast.Call) and dotted(test.func) == "isinstance":
        return "isinstance(..., object) is always true"
    return ""


def _huge_tolerance(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg in ("rel", "abs", "rel_tol", "abs_tol", "rtol", "atol"):
            value = literal(keyword.value)
            if value is not None and value[0] == "num" and isinstance(value[1], int | float):
                limit = 0.1 if keyword.arg.startswith("r") else 1.0
                if abs(value[1]) >= limit:
                    return f"tolerance {keyword.arg}={value[1]} is huge"
    return ""


def _swallows(handler: ast.ExceptHandler) -> bool:
    broad = handler.type is None or dotted(handler.type) in ("Exception", "BaseException", "AssertionError")
    quiet = all(isinstance(s, ast.Pass | ast.Continue) or _is_docstring(s) for s in handler.body)
    return broad and quiet


def literal(node: ast.AST) -> Literal_ | None:
    """A normalised key for a literal constant (`-3` included), or None."""
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        inner = node.operand.value
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return ("num", -inner)
        return None
    if not isinstance(node, ast.Constant):
        return None
    value = node.value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", value)
    if isinstance(value, str | bytes):
        return (type(value).__name__, value)
    if value is None:
        return ("none", None)
    return None


def expected_literals(module: ast.Module) -> set[Literal_]:
    """Non-trivial literals a test expects: the constant side of `==` in an assert, or the expected
    argument of `assertEqual`, and the constants inside a tuple/list on that side."""
    found: set[Literal_] = set()
    for node in ast.walk(module):
        sides: list[ast.expr] = []
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            if isinstance(node.test.ops[0], ast.Eq | ast.Is):
                sides = [node.test.left, *node.test.comparators]
        elif isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in (
            "assertEqual",
            "assertEquals",
        ):
            sides = list(node.args[:2])
        for side in sides:
            for part in [side, *(side.elts if isinstance(side, ast.Tuple | ast.List) else [])]:
                key = literal(part)
                if key is not None and key not in TRIVIAL:
                    found.add(key)
    return found


def answer_literals(module: ast.Module) -> dict[Literal_, int]:
    """Literals in the positions where code hands back a ready-made answer, with their first line:
    returned (`return 42`, or inside a returned tuple/list/dict of literals), a value of a dict
    display (a lookup table), or anywhere in a branch chosen by comparing with a literal
    (`if x == 3: return 42`, `42 if x == 3 else ...`). A literal in a computation (`x * 5`,
    `range(5)`, `LIMIT = 5`) is not an answer: restoring a constant is how many honest fixes look."""
    found: dict[Literal_, int] = {}

    def note(node: ast.expr) -> None:
        for inner in _literal_leaves(node):
            key = literal(inner)
            if key is not None:
                found[key] = min(found.get(key, inner.lineno), inner.lineno)

    for node in ast.walk(module):
        if isinstance(node, ast.Return) and node.value is not None:
            note(node.value)
        elif isinstance(node, ast.Dict):
            for value in node.values:
                note(value)
        elif isinstance(node, ast.If | ast.IfExp) and _compares_with_literal(node.test):
            for branch in (node.body, node.orelse):
                for part in branch if isinstance(branch, list) else [branch]:
                    for inner in ast.walk(part):
                        if isinstance(inner, ast.Return | ast.Assign) and inner.value is not None:
                            note(inner.value)
                        elif isinstance(inner, ast.expr) and part is inner:
                            note(inner)
    return found


def _literal_leaves(node: ast.expr) -> list[ast.expr]:
    """`node` if it is a literal, or the literals of a tuple/list/set/dict display made only of them."""
    if literal(node) is not None:
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        leaves = [leaf for element in node.elts for leaf in _literal_leaves(element)]
        return leaves if len(leaves) == len(node.elts) else []
    return []


def _compares_with_literal(test: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Compare)
        and any(
            literal(side) is not None or isinstance(side, ast.Tuple)
            for side in [node.left, *node.comparators]
        )
        for node in ast.walk(test)
    )


def import_roots(module: ast.Module) -> dict[str, str]:
    """Local name → top-level module it came from (`import a.b as c` → c: a; `from a import b` → b: a)."""
    roots: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                roots[local] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                roots[alias.asname or alias.name] = node.module.split(".")[0]
    return roots


def imported_names(module: ast.Module) -> dict[str, str]:
    """Local name → the dotted name it stands for (`from os import environ as E` → E: os.environ)."""
    found: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    found[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def canonical(node: ast.AST, aliases: dict[str, str]) -> str:
    """`a.b.c` for a Name/Attribute chain (no calls looked through), its first name resolved through
    the module's imports (`Path.cwd` → `pathlib.Path.cwd`)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def parents_of(module: ast.Module) -> dict[int, ast.AST]:
    """id(node) → its parent, for every node of `module`."""
    return {id(child): node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}


def literal_text(node: ast.AST | None) -> str | None:
    """The string a literal holds, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
