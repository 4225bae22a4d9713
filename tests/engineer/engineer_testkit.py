"""Shared helpers for the engineer and sample-project tests: drive the engineer in process on a
generated project and check the outcome with a real `python -m pytest` run. (A plainly named module,
not a conftest.py, so that `import` cannot pick up another directory's conftest.)"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from hilbert.sim.engineer import EngineerResponder
from hilbert.sim.engineer.harness import Episode, drive
from hilbert.sim.sample import SampleProject, generate_sample_project

# Third-party pytest plugins (xdist, timeout) cost ~0.3 s per sample-suite run and play no part here.
FAST = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

# Runs every test function of many generated projects in one interpreter (a real pytest run per
# project would cost ~0.3 s each); prints {project: [failing test names]} as JSON.
_RUNNER = """
import importlib.util, json, sys
from pathlib import Path
failures = {}
for root in sys.argv[1:]:
    root = Path(root)
    package = next(p.parent.name for p in root.glob("*/__init__.py"))
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    failed = failures.setdefault(str(root), [])
    for test_file in sorted(root.glob("tests/test_*.py")):
        spec = importlib.util.spec_from_file_location(f"t{len(failures)}_{test_file.stem}", test_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, test in vars(module).items():
            if name.startswith("test_"):
                try:
                    test()
                except Exception:
                    failed.append(name)
    sys.path.remove(str(root))
print(json.dumps(failures))
"""


def failing_tests(roots: list[Path]) -> dict[str, list[str]]:
    """The names of the failing test functions of each generated project (by its path)."""
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER, *map(str, roots)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    failing: dict[str, list[str]] = json.loads(result.stdout)
    return failing


def unseen_seeds(count: int) -> list[int]:
    """Fresh random seeds on every run: the engineer must solve projects nobody picked for it.
    Draw them inside a test, not in `parametrize` (xdist workers must collect the same tests);
    failure messages name the seed, and `HILBERT_TEST_SEED=S` replays it: every such test then
    draws S, S+1, ... (`HILBERT_TEST_SEED=S pytest tests/engineer`)."""
    if replayed := os.environ.get("HILBERT_TEST_SEED"):
        return [int(replayed) + n for n in range(count)]
    return [random.SystemRandom().randrange(1, 2**31) for _ in range(count)]


def suite_passes(project: SampleProject) -> tuple[bool, str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=project.path,
        capture_output=True,
        text=True,
        env={**os.environ, **FAST},
        timeout=60,
    )
    return result.returncode == 0, result.stdout + result.stderr


def read_tests(project: SampleProject) -> dict[str, str]:
    return {name: (project.path / name).read_text() for name in project.test_files}


def make_project(tmp_path: Path, seed: int, bugs: int = 1) -> SampleProject:
    return generate_sample_project(tmp_path / f"project-{seed}-{bugs}", seed, bugs=bugs)


def solve(
    project: SampleProject,
    options: dict[str, str] | None = None,
    *,
    agent: str = "Ada",
    tools: str = "hilbert",
    system: str = "",
    task: str | None = None,
    root: Path | None = None,
    **drive_options: Any,
) -> Episode:
    """Drive the engineer on `project` (or on a copy of it at `root`) with its task (or `task`)."""
    policy = EngineerResponder.from_options(options or {}, seed=project.seed)
    prompt = f"You are a careful software engineer.\nAgent: {agent}\n{system}"
    where, brief = root or project.path, task or project.task
    return asyncio.run(
        drive(policy, where, brief, tools=tools, system=prompt, env=FAST, **drive_options)  # type: ignore[arg-type]
    )
