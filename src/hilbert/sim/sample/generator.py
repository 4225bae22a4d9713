"""Write a small Python project with pytest tests, then break it with mutation operators.

`generate_sample_project(dest, seed, bugs=1, modules=3, paired=0)` picks `modules` modules of three
functions each from the catalogue, cycling its themes (text, lists, numbers; names, constants and mix
vary by seed; module names stay unique: text, listops, numbers, strings, ..., text_2, ...), computes
each test's expected value by running the correct function in-process, writes the package and its
tests, and injects `bugs` one-token bugs, each in a different function. A bug is kept only if running
that function's test inputs in-process shows that at least one test now fails; so the original passes
its tests and every recorded bug breaks one. `modules=3` writes what earlier versions wrote for the same
seed. `paired=k` adds the `bounds` module (see `paired.py`): k functions with two wrong constants on
adjacent lines, 2k more bugs; it draws from its own random stream, so the rest of the project is the
same with or without it.

The `SampleProject` it returns records where the bugs are, for tests and the demo's summary only:
the agents working on the project (and the engineer responder) never see it. No git, no subprocess.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilbert.errors import UserError
from hilbert.sim.sample.catalogue import THEMES, Template
from hilbert.sim.sample.mutations import Rewrite, rewrites
from hilbert.sim.sample.paired import MODULE as PAIRED_MODULE
from hilbert.sim.sample.paired import PairedModule, paired_module

TEST_COMMAND = "python -m pytest -q"
FUNCTIONS_PER_MODULE = 3
_PREFIXES = ("tiny", "handy", "pocket", "little", "quick", "plain", "neat", "simple")
_SUFFIXES = ("kit", "tools", "utils", "lib", "box", "bits")


@dataclass(frozen=True)
class Bug:
    """One injected bug: the operator kind, where it is (file relative to the project, 1-based
    line), the function it sits in, the line before and after, and the test ids it makes fail."""

    operator: str
    file: str
    line: int
    function: str
    original: str
    mutated: str
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class SampleProject:
    path: Path
    seed: int
    package: str
    test_command: str
    source_files: tuple[str, ...]
    test_files: tuple[str, ...]
    bugs: tuple[Bug, ...]  # all of them, paired halves included, by file and line
    pairs: tuple[tuple[Bug, Bug], ...] = ()  # the paired halves (also in `bugs`): adjacent lines

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


def generate_sample_project(
    dest: Path, seed: int, *, bugs: int = 1, modules: int = 3, paired: int = 0
) -> SampleProject:
    """Write the project into `dest` (created; must be empty) and return what was written."""
    dest = Path(dest)
    if modules < 1 or paired < 0:
        raise UserError(
            f"cannot write {modules} modules with {paired} paired functions",
            hint="ask for at least 1 module and 0 or more paired functions",
        )
    if dest.exists() and any(dest.iterdir()):
        raise UserError(f"{dest} is not empty", hint="generate the sample project into a new directory")
    rng = random.Random(seed)
    package = rng.choice(_PREFIXES) + rng.choice(_SUFFIXES)
    picked = _pick_modules(rng, modules)
    chosen = _inject_bugs(rng, picked, package, bugs)
    extra = paired_module(random.Random(f"paired:{seed}"), package, paired) if paired else None

    files: dict[str, str] = {
        "pytest.ini": "[pytest]\npythonpath = .\ntestpaths = tests\naddopts = -p no:cacheprovider\n",
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
        "README.md": _readme(package, picked, extra),
        f"{package}/__init__.py": f'"""{package}: small helpers for text, lists and numbers."""\n',
    }
    names = [m.name for m in picked]
    for module in picked:
        files[f"{package}/{module.name}.py"] = module.source()
        files[f"tests/test_{module.name}.py"] = _test_source(package, module)
    pairs = _paired_bugs(package, extra) if extra else ()
    if extra:
        names.append(PAIRED_MODULE)
        files[f"{package}/{PAIRED_MODULE}.py"] = extra.source
        files[f"tests/test_{PAIRED_MODULE}.py"] = extra.tests
    for relative, text in files.items():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return SampleProject(
        path=dest,
        seed=seed,
        package=package,
        test_command=TEST_COMMAND,
        source_files=tuple(f"{package}/{name}.py" for name in names),
        test_files=tuple(f"tests/test_{name}.py" for name in names),
        bugs=tuple(sorted([*chosen, *(b for pair in pairs for b in pair)], key=lambda b: (b.file, b.line))),
        pairs=pairs,
    )


def _pick_modules(rng: random.Random, count: int) -> list[_Module]:
    """`count` modules cycling the themes. The first of each theme gets a name drawn from the
    theme's choices (as it always has); later ones take the theme's other names in turn, then the
    same names again with a number: text, strings, words, text_2, ..."""
    themes = list(THEMES.values())
    modules: list[_Module] = []
    for i in range(count):
        names, templates = themes[i % len(themes)]
        if i < len(themes):
            name = rng.choice(names)
        else:
            first = modules[i % len(themes)].name
            ordered = [first, *(n for n in names if n != first)]
            turn = i // len(themes)
            rounds = turn // len(ordered)
            name = ordered[turn % len(ordered)] + (f"_{rounds + 1}" if rounds else "")
        modules.append(_pick_module(rng, name, templates))
    return modules


def _pick_module(rng: random.Random, name: str, templates: tuple[Template, ...]) -> _Module:
    module = _Module(name, [])
    for template in rng.sample(templates, FUNCTIONS_PER_MODULE):
        source = template.source.replace("{name}", chosen := rng.choice(template.names))
        for slot, choices in template.constants.items():
            source = source.replace("{" + slot + "}", rng.choice(choices))
        module.functions.append(_Function(chosen, source, []))
    namespace = _load(module.source())
    by_name = {name: t for t in templates for name in t.names}
    for function in module.functions:
        template = by_name[function.name]
        for label, args in template.cases:
            function.cases.append((label, args, namespace[function.name](*copy.deepcopy(args))))
    return module


def _paired_bugs(package: str, extra: PairedModule) -> tuple[tuple[Bug, Bug], ...]:
    file, test_file = f"{package}/{PAIRED_MODULE}.py", f"tests/test_{PAIRED_MODULE}.py"
    found = []
    for pair in extra.pairs:
        first, second = (
            Bug("off_by_one", file, h.line, h.function, h.original, h.mutated, (f"{test_file}::{h.test}",))
            for h in pair
        )
        found.append((first, second))
    return tuple(found)


def _inject_bugs(rng: random.Random, modules: list[_Module], package: str, bugs: int) -> list[Bug]:
    """Break `bugs` different functions, each with one operator the tests notice."""
    slots = [(m, f) for m in modules for f in m.functions]
    if not 0 <= bugs <= len(slots):
        raise UserError(
            f"cannot inject {bugs} bugs into {len(slots)} functions",
            hint=f"ask for 0 to {len(slots)} bugs (one per function), or for more modules",
        )
    rng.shuffle(slots)
    found: list[Bug] = []
    for module, function in slots:
        if len(found) == bugs:
            break
        if (bug := _inject(rng, module, function, package)) is not None:
            found.append(bug)
    if len(found) < bugs:  # every slot was tried: `found` is all this project can hold
        raise UserError(
            f"cannot inject {bugs} bugs: only {len(found)} functions have one the tests notice",
            hint=f"ask for at most {len(found)} bugs, or for more modules",
        )
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
        if failing := _failing_cases(module_source, function):
            first = module_source.splitlines().index(lines[0])
            test_file = f"tests/test_{module.name}.py"
            return Bug(
                operator=rewrite.operator,
                file=f"{package}/{module.name}.py",
                line=first + index + 1,
                function=function.name,
                original=lines[index],
                mutated=mutated,
                tests=tuple(f"{test_file}::test_{function.name}_{label}" for label in failing),
            )
    function.source = original_source
    return None


def _load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sample>", "exec"), namespace)
    return namespace


def _failing_cases(module_source: str, function: _Function) -> list[str]:
    """The labels of the cases that the function, as written in `module_source`, fails."""
    try:
        target = _load(module_source)[function.name]
    except Exception:
        return [label for label, _args, _expected in function.cases]
    failing = []
    for label, args, expected in function.cases:
        try:
            if target(*copy.deepcopy(args)) != expected:
                failing.append(label)
        except Exception:
            failing.append(label)
    return failing


def _test_source(package: str, module: _Module) -> str:
    names = ", ".join(f.name for f in module.functions)
    tests = []
    for function in module.functions:
        for label, args, expected in function.cases:
            call = f"{function.name}({', '.join(repr(a) for a in args)})"
            check = f"{call} is None" if expected is None else f"{call} == {expected!r}"
            tests.append(f"def test_{function.name}_{label}():\n    assert {check}\n")
    return f"from {package}.{module.name} import {names}\n\n\n" + "\n\n".join(tests)


def _readme(package: str, modules: list[_Module], extra: PairedModule | None) -> str:
    lines = [f"# {package}", "", "Small helpers for text, lists and numbers.", ""]
    for module in modules:
        lines.append(f"- `{package}.{module.name}`: " + ", ".join(f"`{f.name}`" for f in module.functions))
    if extra:
        names = ", ".join(f"`{first.function}`" for first, _ in extra.pairs)
        lines.append(f"- `{package}.{PAIRED_MODULE}`: {names}")
    lines += ["", "Run the tests with `python -m pytest -q`.", ""]
    return "\n".join(lines)
