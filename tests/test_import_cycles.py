"""No import cycle in `src/hilbert`, read from the static import graph (issue 13).

The graph is built with `ast`, without importing anything, from every `import` and `from ... import`
statement anywhere in a module: at the top, under `if TYPE_CHECKING:`, inside `try`, inside functions. A
lazy import inside a function or a TYPE_CHECKING import is still an edge: the first only moves the cycle
to run time, the second hides a circle that the first refactoring to drop `from __future__ import
annotations` or to use a type at run time brings back.

What counts as an edge, to match what Python executes:

- `import a.b.c` (with or without `as`) runs `a`, `a.b` and `a.b.c`: edges to all three.
- `from a.b import c` runs `a` and `a.b`; if `c` is a submodule (a file or folder next to `a/b/__init__.py`)
  it also runs `a.b.c`: an edge to `a.b.c`, else the name comes from `a/b/__init__.py` and the edge is to
  `a.b`. Relative imports are resolved against the importing module's package first.
- Re-exports are not looked through: `from hilbert.judge import Change` is an edge to the package
  `hilbert.judge` (its `__init__.py`), which in turn has edges to the submodules it imports. That is what
  runs, so a cycle through a package `__init__` is a cycle.
- The parent packages that an import runs *implicitly* are not an edge when they are the importing module
  itself or one of its own parent packages: Python has always started running those before the importing
  module (that is how the module was found), so `hilbert.fleet.x` importing `hilbert.fleet.y` adds no
  edge back to `hilbert.fleet`, and a package `__init__` may import its own submodules. An *explicit*
  import of one's own parent package (`from hilbert.models import Message` inside `hilbert.models.wire`)
  is an edge: it reads names from an `__init__` that may still be half run.
- Only modules of the package under test are nodes; the standard library and third parties are not.
  `importlib.import_module("...")` with a string is not read (nothing in `src/hilbert` should need it to
  hide a cycle: write the import).

Each strongly connected component of more than one module is reported as cycles that together cover every
edge inside it (for each such edge `u -> v`, the shortest path back from `v` to `u`), each edge with the
file and line of every statement that makes it, so the report names every import that would have to move.
"""

from __future__ import annotations

import ast
import itertools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


@dataclass
class ImportGraph:
    """Modules of one package and, for each edge, where it is made (`path:line`)."""

    modules: dict[str, Path]
    edges: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def add(self, source: str, target: str, where: str) -> None:
        wheres = self.edges.setdefault(source, {}).setdefault(target, [])
        if where not in wheres:
            wheres.append(where)


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root` (the folder that holds the package), by dotted name."""
    names: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imported_names(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """Each module an import statement of `module` names, with its line: `import a.b` names `a.b`;
    `from a.b import c` names `a.b.c` if that is a module, else `a.b`; relative names resolved."""
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                named.append((submodule if submodule in modules else base, node.lineno))
    return named


def import_graph(root: Path, package: str) -> ImportGraph:
    graph = ImportGraph(module_names(root, package))
    for module, path in graph.modules.items():
        own_packages = {module, *_ancestors(module)}
        for target, line in imported_names(module, path, graph.modules):
            where = f"{path.relative_to(root)}:{line}"
            if target in graph.modules and target != module:
                graph.add(module, target, where)
            for parent in _ancestors(target):  # run implicitly, before the target
                if parent in graph.modules and parent not in own_packages:
                    graph.add(module, parent, where)
    return graph


def strongly_connected(graph: ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm; components of more than one module, each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.edges.get(node, {}):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph.modules):
        if node not in index:
            visit(node)
    return sorted(found)


def _shortest_path(graph: ImportGraph, start: str, goal: str, within: set[str]) -> list[str]:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for succ in sorted(graph.edges.get(node, {})):
            if succ in within and succ not in previous:
                previous[succ] = node
                queue.append(succ)
    path: list[str] = []
    step: str | None = goal
    while step is not None:
        path.append(step)
        step = previous[step]
    return path[::-1]


def cycles(graph: ImportGraph) -> list[list[str]]:
    """Cycles (first module repeated at the end) that together use every edge inside every component."""
    found: dict[tuple[str, ...], list[str]] = {}
    for component in strongly_connected(graph):
        members = set(component)
        for source in component:
            for target in sorted(graph.edges.get(source, {})):
                if target not in members:
                    continue
                loop = [source, *_shortest_path(graph, target, source, members)]
                turn = loop.index(min(loop[:-1]))
                canonical = [*loop[turn:-1], *loop[:turn], loop[turn]]
                found.setdefault(tuple(canonical), canonical)
    return list(found.values())


def describe(graph: ImportGraph, loop: list[str]) -> str:
    lines = [" -> ".join(loop)]
    for source, target in itertools.pairwise(loop):
        lines.append(f"    {source} -> {target}: {', '.join(graph.edges[source][target])}")
    return "\n".join(lines)


def report(graph: ImportGraph) -> str:
    return "\n".join(describe(graph, loop) for loop in cycles(graph))


def test_no_import_cycle_in_hilbert() -> None:
    graph = import_graph(SRC, "hilbert")
    assert not cycles(graph), "import cycles (paths under src/):\n" + report(graph)


def test_the_graph_reads_every_module_of_hilbert() -> None:
    graph = import_graph(SRC, "hilbert")
    # an empty or partial graph would pass anything
    assert {"hilbert", "hilbert.fleet.merge_queue", "hilbert.judge.gate"} <= set(graph.modules)
    assert "hilbert.models.defaults" in graph.edges["hilbert.models.wire"]
    assert "hilbert.models.wire" in graph.edges["hilbert.models"]  # under TYPE_CHECKING there


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_cycle_hidden_under_type_checking_is_found_and_located(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "def f():\n    from . import a\n    return a\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")

    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert report(graph) == (
        "pkg.a -> pkg.b -> pkg.a\n"
        f"    pkg.a -> pkg.b: {Path('pkg/a.py')}:3\n"
        f"    pkg.b -> pkg.a: {Path('pkg/b.py')}:2"
    )


def test_a_cycle_through_a_package_reexport_is_found_and_own_parents_are_not(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/types.py": "",
            # The package re-exports from its submodule: importing its own submodules is not a cycle.
            "pkg/sub/__init__.py": "from pkg.sub.core import Core\nfrom .helpers import help\n",
            "pkg/sub/core.py": "from pkg.sub.helpers import help\nimport pkg.types\n",
            "pkg/sub/helpers.py": "import pkg.other\n",
            # ...but a module that reads a name through the package does run the package's __init__.
            "pkg/other.py": "from pkg.sub import Core\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")

    assert graph.edges["pkg.other"] == {"pkg.sub": [f"{Path('pkg/other.py')}:1"]}
    assert "pkg" not in graph.edges["pkg.sub.core"]
    assert strongly_connected(graph) == [["pkg.other", "pkg.sub", "pkg.sub.core", "pkg.sub.helpers"]]
    assert ["pkg.other", "pkg.sub", "pkg.sub.helpers", "pkg.other"] in cycles(graph)
