"""Where the first-run bench injects its bugs: seeded sites over a project's product lines.

A site is one `rewrites(line, "inject")` of `hilbert.sim.sample.mutations` on one line of a product
module (never a test, never text inside a string or a comment). `candidate_sites` lists every
such rewrite of a project, in a fixed order; `draw` shuffles them with `random.Random(seed)` and
keeps, in that order, each site that on its own breaks at least one test that passed before (the
caller's `breaks` runs the suite), until it has `count`, never two in one function.

Pure apart from `breaks`: the tests drive it with a small fake project and a fake `breaks`.
"""

from __future__ import annotations

import ast
import io
import random
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from hilbert.sim.engineer.reading import is_test_path
from hilbert.sim.sample.mutations import rewrites

SKIPPED_DIRS = frozenset({"docs", "doc", "tests", "test", "build", "dist", "examples", "benchmarks"})
SKIPPED_FILES = frozenset({"setup.py", "conftest.py", "noxfile.py", "conf.py"})


@dataclass(frozen=True)
class Site:
    """One injected bug: `path` (relative), `line` (1-based), the operator, the line before and
    after, the function it sits in (`qualname`, or `<module>`), and the tests it breaks alone."""

    path: str
    line: int
    operator: str
    old: str
    new: str
    function: str
    breaks: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.path}:{self.line} {self.operator}"


def product_files(root: Path) -> list[str]:
    """The project's product modules: `.py` files outside tests, docs and dot-folders, sorted."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        parts = relative.split("/")
        if any(p.startswith(".") or p in SKIPPED_DIRS for p in parts[:-1]) or parts[-1] in SKIPPED_FILES:
            continue
        if not is_test_path(relative):
            found.append(relative)
    return found


def code_lines(source: str) -> set[int]:
    """1-based lines holding code tokens outside strings and comments (a docstring's lines are not)."""
    lines: set[int] = set()
    skipped = (tokenize.STRING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type not in (*skipped, tokenize.DEDENT, tokenize.ENDMARKER):
                lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        return set()
    return lines


def functions_by_line(source: str) -> dict[int, str]:
    """1-based line -> qualified name of the innermost function or method holding it."""
    owner: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                        owner[line] = name  # inner functions overwrite: visited after
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return owner


def candidate_sites(root: Path, files: Iterable[str]) -> list[Site]:
    """Every single-site injection in the product files, in file and line order."""
    sites = []
    for path in files:
        source = (root / path).read_text()
        try:
            owners = functions_by_line(source)
        except SyntaxError:
            continue
        code = code_lines(source)
        for number, text in enumerate(source.splitlines(), start=1):
            if number not in code:
                continue
            for rewrite in rewrites(text, "inject"):
                function = owners.get(number, "<module>")
                sites.append(Site(path, number, rewrite.operator, text, rewrite.apply(text), function))
    return sites


def draw(
    candidates: list[Site],
    seed: int,
    count: int,
    breaks: Callable[[Site], tuple[str, ...]],
    on_try: Callable[[Site, tuple[str, ...]], None] | None = None,
) -> list[Site]:
    """Up to `count` sites, drawn in the order `random.Random(seed)` shuffles the candidates into:
    a site is kept when `breaks(site)` names a test, no kept site has its line, and none its function
    (module-level lines count as one function per line)."""
    order = list(candidates)
    random.Random(seed).shuffle(order)
    kept: list[Site] = []
    for site in order:
        if len(kept) == count:
            break
        if any(_same_place(site, other) for other in kept):
            continue
        broken = breaks(site)
        if on_try is not None:
            on_try(site, broken)
        if broken:
            kept.append(replace(site, breaks=broken))
    return kept


def _same_place(a: Site, b: Site) -> bool:
    if a.path != b.path:
        return False
    return a.line == b.line or (a.function == b.function and a.function != "<module>")


def apply_sites(root: Path, sites: Iterable[Site]) -> None:
    """Write each site's mutated line over its line (the line must still read as the site's `old`)."""
    by_path: dict[str, list[Site]] = {}
    for site in sites:
        by_path.setdefault(site.path, []).append(site)
    for path, mine in by_path.items():
        target = root / path
        text = target.read_text()
        lines = text.split("\n")
        for site in mine:
            if lines[site.line - 1] != site.old:
                raise ValueError(f"{site.label}: the line is not what the site was drawn on")
            lines[site.line - 1] = site.new
        target.write_text("\n".join(lines))
