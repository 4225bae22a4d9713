"""The harness's measurement: nothing else of the run runs while the metric does, a try and the best
are measured interleaved, and a metric that writes into the tree is a failed measurement."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from git_support import git
from hilbert.climb.measure import Measurement, Measurer
from hilbert.commands import Runner, Slots, Timeout
from hilbert.workspaces import Git

METRIC = """import os, sys, time
start = time.time()
time.sleep(0.1)
with open(sys.argv[1], "a") as log:
    log.write(f"metric {os.path.basename(os.getcwd())} {start} {time.time()}\\n")
print(open("score.txt").read())
"""
OTHER = """import sys, time
start = time.time()
time.sleep(0.1)
with open(sys.argv[1], "a") as log:
    log.write(f"other - {start} {time.time()}\\n")
"""
WRITER = """open("answer.cache", "w").write("1")
print(1)
"""
LIMIT = Timeout(60, "test")


def _commit(repo: Path, files: dict[str, str]) -> str:
    """A commit of `files` in `repo` (made on first use)."""
    if not repo.exists():
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a version")
    return git(repo, "rev-parse", "HEAD")


def _measurer(tmp_path: Path, runner: Runner, metric: str) -> Measurer:
    return Measurer(
        tmp_path / "repo", metric, runner, Git(home=tmp_path / "home"), tmp_path / "scratch", LIMIT
    )


def test_the_metric_runs_alone_and_interleaved_with_the_best(tmp_path: Path) -> None:
    log, other = tmp_path / "intervals.txt", tmp_path / "other.py"
    other.write_text(OTHER)
    best = _commit(tmp_path / "repo", {"metric.py": METRIC, "score.txt": "2.0"})
    candidate = _commit(tmp_path / "repo", {"score.txt": "1.0"})
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    runner = Runner.unsandboxed(env, slots=Slots(2))
    measurer = _measurer(tmp_path, runner, f"python metric.py {log}")

    async def measure_among_others() -> tuple[Measurement, ...]:
        others = [runner.run(f"python {other} {log}", root=tmp_path, timeout=LIMIT) for _ in range(6)]
        measured, *_ = await asyncio.gather(measurer.compare((candidate, best), 3, "try-1"), *others)
        return measured

    tried, beside = asyncio.run(measure_among_others())
    assert (tried.values, beside.values) == ((1.0, 1.0, 1.0), (2.0, 2.0, 2.0))
    lines = [line.split() for line in log.read_text().splitlines()]
    metric = [(float(start), float(end)) for kind, _, start, end in lines if kind == "metric"]
    others = [(float(start), float(end)) for kind, _, start, end in lines if kind == "other"]
    assert len(metric) == 6 and len(others) == 6
    assert not [(m, o) for m in metric for o in others if m[0] < o[1] and o[0] < m[1]]  # never together
    assert [tree for kind, tree, _, _ in lines if kind == "metric"] == ["tree-0", "tree-1"] * 3


def test_a_metric_that_writes_into_the_tree_is_a_failed_measurement(tmp_path: Path) -> None:
    commit = _commit(tmp_path / "repo", {"writer.py": WRITER})
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    measurer = _measurer(tmp_path, Runner.unsandboxed(env), "python writer.py")
    measured = asyncio.run(measurer.measure(commit, 3, "m"))
    assert measured.error == "the metric's run wrote into the tree: answer.cache"
    assert measured.wrote == ("answer.cache",) and measured.values == ()
