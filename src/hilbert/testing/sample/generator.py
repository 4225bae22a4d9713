"""Write a small Python project with pytest tests, then break it with mutation operators.

`generate_sample_project(dest, seed, bugs=1)` picks three modules of functions from the catalogue
(names, constants and mix vary by seed), computes each test's expected value by running the correct
function in-process, writes the package and its tests, and injects `bugs` one-token bugs, each in a
different function. A bug is kept only if running that function's test inputs in-process shows that
at least one test now fails; so the original passes its tests and every recorded bug breaks one.

The `SampleProject` it returns records where the bugs are, for tests and the demo's summary only:
the agents working on the project (and the engineer policy) never see it. No git, no subprocess.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilbert.errors import UserError
from hilbert.testing.sample.catalogue import THEMES, Template
from hilbert.testing.sample.mutations import Rewrite, rewrites

TEST_COMMAND = "python -m pytest -q"
FUNCTIONS_PER_MODULE = 3
_PREFIXES = ("tiny", "handy", "pocket", "little", "quick", "plain", "neat", "simple")
_SUFFIXES = ("kit", "tools", "utils", "lib", "box", "bits")


@dataclass(frozen=True)
class Bug:
    """One injected bug: the operator kind, where it is (file relative to the project, 1-based
    line), the function it sits in and the line before and after."""

    operator: str
    file: str
    line: int
    function: str
    original: str
    mutated: str


@dataclass(frozen=True)
class SampleProject:
    path: Path
    seed: int
    package: str
    test_command: str
    source_files: tuple[str, ...]
    test_files: tuple[str, ...]
    bugs: tuple[Bug, ...]

    @property
    def task(self) -> str:
        """The task an agent gets for this project."""
        return (
            f"The tests of this project fail (`{self.test_command}`). "
            "Make them pass without changing the tests."
        )


@dataclass
class _Function:
    name: str
    source: str
    cases: list[tuple[str, tuple[Any, ...], Any]]  # label, args, expected


@dataclass
class _Module:
    name: str
    functions: list[_Function]

    def source(self) -> str:
        body = "\n\n".join(f.source for f in self.functions)
        return f'"""{self.name.capitalize()} helpers."""\n\n\n{body}'


def generate_sample_project(dest: Path, seed: int, *, bugs: int = 1) -> SampleProject:
    """Write the project into `dest` (created; must be empty) and return what was written."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise UserError(f"{dest} is not empty", hint="generate the sample project into a new directory")
    rng = random.Random(seed)
    package = rng.choice(_PREFIXES) + rng.choice(_SUFFIXES)
    modules = [_pick_module(rng, module_names, templates) for module_names, templates in THEMES.values()]
    chosen = _inject_bugs(rng, modules, package, bugs)

    files: dict[str, str] = {
        "pytest.ini": "[pytest]\npythonpath = .\ntestpaths = tests\naddopts = -p no:cacheprovider\n",
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
        "README.md": _readme(package, modules),
        f"{package}/__init__.py": f'"""{package}: small helpers for text, lists and numbers."""\n',
    }
    for module in modules:
        files[f"{package}/{module.name}.py"] = module.source()
        files[f"tests/test_{module.name}.py"] = _test_source(package, module)
    for relative, text in files.items():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return SampleProject(
        path=dest,
        seed=seed,
        package=package,
        test_command=TEST_COMMAND,
        source_files=tuple(f"{package}/{m.name}.py" for m in modules),
        test_files=tuple(f"tests/test_{m.name}.py" for m in modules),
        bugs=tuple(sorted(chosen, key=lambda b: (b.file, b.line))),
    )


def _pick_module(rng: random.Random, names: tuple[str, ...], templates: tuple[Template, ...]) -> _Module:
    module = _Module(rng.choice(names), [])
    for template in rng.sample(templates, FUNCTIONS_PER_MODULE):
        source = template.source.replace("{name}", name := rng.choice(template.names))
        for slot, choices in template.constants.items():
            source = source.replace("{" + slot + "}", rng.choice(choices))
        module.functions.append(_Function(name, source, []))
    namespace = _load(module.source())
    by_name = {name: t for t in templates for name in t.names}
    for function in module.functions:
        template = by_name[function.name]
        for label, args in template.cases:
            function.cases.append((label, args, namespace[function.name](*copy.deepcopy(args))))
    return module


def _inject_bugs(rng: random.Random, modules: list[_Module], package: str, bugs: int) -> list[Bug]:
    """Break `bugs` different functions, each with one operator the tests notice."""
    slots = [(m, f) for m in modules for f in m.functions]
    if not 0 <= bugs <= len(slots):
        raise UserError(f"cannot inject {bugs} bugs", hint=f"ask for 0 to {len(slots)} bugs")
    rng.shuffle(slots)
    found: list[Bug] = []
    for module, function in slots:
        if len(found) == bugs:
            break
        if (bug := _inject(rng, module, function, package)) is not None:
            found.append(bug)
    if len(found) < bugs:
        raise UserError(f"found only {len(found)} detectable bugs", hint="ask for fewer bugs")
    return found


def _inject(rng: random.Random, module: _Module, function: _Function, package: str) -> Bug | None:
    lines = function.source.splitlines()
    by_operator: dict[str, list[tuple[int, Rewrite]]] = {}
    for i, line in enumerate(lines[1:], start=1):
        for rewrite in rewrites(line, "inject"):
            by_operator.setdefault(rewrite.operator, []).append((i, rewrite))
    candidates = []  # operator kinds in random order (so one kind with many sites does not dominate)
    for operator in rng.sample(sorted(by_operator), len(by_operator)):
        candidates += rng.sample(by_operator[operator], len(by_operator[operator]))
    original_source = function.source
    for index, rewrite in candidates:
        mutated = rewrite.apply(lines[index])
        function.source = "\n".join([*lines[:index], mutated, *lines[index + 1 :]]) + "\n"
        module_source = module.source()
        try:
            compile(module_source, "<sample>", "exec")
        except SyntaxError:
            continue
        if _breaks(module_source, function):
            first = module_source.splitlines().index(lines[0])
            return Bug(
                operator=rewrite.operator,
                file=f"{package}/{module.name}.py",
                line=first + index + 1,
                function=function.name,
                original=lines[index],
                mutated=mutated,
            )
    function.source = original_source
    return None


def _load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sample>", "exec"), namespace)
    return namespace


def _breaks(module_source: str, function: _Function) -> bool:
    """True when the function, as written in `module_source`, fails at least one of its cases."""
    try:
        target = _load(module_source)[function.name]
    except Exception:
        return True
    for _label, args, expected in function.cases:
        try:
            if target(*copy.deepcopy(args)) != expected:
                return True
        except Exception:
            return True
    return False


def _test_source(package: str, module: _Module) -> str:
    names = ", ".join(f.name for f in module.functions)
    tests = []
    for function in module.functions:
        for label, args, expected in function.cases:
            call = f"{function.name}({', '.join(repr(a) for a in args)})"
            check = f"{call} is None" if expected is None else f"{call} == {expected!r}"
            tests.append(f"def test_{function.name}_{label}():\n    assert {check}\n")
    return f"from {package}.{module.name} import {names}\n\n\n" + "\n\n".join(tests)


def _readme(package: str, modules: list[_Module]) -> str:
    lines = [f"# {package}", "", "Small helpers for text, lists and numbers.", ""]
    for module in modules:
        lines.append(f"- `{package}.{module.name}`: " + ", ".join(f"`{f.name}`" for f in module.functions))
    lines += ["", "Run the tests with `python -m pytest -q`.", ""]
    return "\n".join(lines)
