"""The climb's sample project: a slow function, its tests and a benchmark that prints seconds.

pairs.py        count_pairs(values, target): how many index pairs i < j sum to target — O(n²)
test_pairs.py   its tests (small inputs, duplicates, negatives)
bench.py        count_pairs on 2,000 seeded numbers: prints the count (its answer), then the seconds
                (the metric: read as printed, or timed by the harness with `--metric-kind time`); the
                seed is the harness's (`HILBERT_CLIMB_SEED`) when it gives one, else 7
holdout.py      the same on other numbers (a sealed holdout: written outside the repository)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PAIRS = '''def count_pairs(values, target):
    """How many index pairs i < j have values[i] + values[j] == target."""
    count = 0
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            if values[i] + values[j] == target:
                count += 1
    return count
'''

TESTS = """from pairs import count_pairs


def test_small():
    assert count_pairs([1, 2, 3, 4], 5) == 2


def test_duplicates():
    assert count_pairs([2, 2, 2], 4) == 3


def test_negatives_and_none():
    assert count_pairs([-1, 6, 3, 2], 5) == 2
    assert count_pairs([1, 1], 5) == 0
    assert count_pairs([], 0) == 0
"""

BENCH = """import os
import random
import time

from pairs import count_pairs

rng = random.Random(int(os.environ.get("HILBERT_CLIMB_SEED", "7")))
values = [rng.randrange(1000) for _ in range({n})]
start = time.process_time()
print("pairs", count_pairs(values, 1000))
print(f"{{time.process_time() - start:.6f}}")
"""

HOLDOUT = """import random
import sys
import time

sys.path.insert(0, ".")
from pairs import count_pairs  # noqa: E402

rng = random.Random(11)
values = [rng.randrange(500) for _ in range({n})]
start = time.process_time()
print("pairs", count_pairs(values, 500))
print(f"{{time.process_time() - start:.6f}}")
"""

N = 2000  # the pair count's work (~0.1 s of CPU) well above a Python's start (~0.03 s)
METRIC = "python bench.py"
TESTS_COMMAND = "python -m pytest -q -p no:cacheprovider test_pairs.py"


def write_sample(repo: Path, *, n: int = N) -> Path:
    """The sample project, committed, in the new folder `repo`."""
    repo.mkdir(parents=True)
    (repo / "pairs.py").write_text(PAIRS)
    (repo / "test_pairs.py").write_text(TESTS)
    (repo / "bench.py").write_text(BENCH.format(n=n))
    git = ["git", "-c", "user.name=sample", "-c", "user.email=sample@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "a slow count_pairs"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    return repo


def write_holdout(folder: Path, *, n: int = N) -> Path:
    """The holdout benchmark, outside any repository; run it from the measured tree."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "holdout.py"
    path.write_text(HOLDOUT.format(n=n))
    return path


__all__ = ["METRIC", "TESTS_COMMAND", "write_holdout", "write_sample"]
