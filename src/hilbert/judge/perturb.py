"""The perturbed conditions of the gate's differential runs, drawn per gate run from a secret seed.

A `Perturbation` changes what honest code does not depend on and test-aware code might: where the tree
lives (another export location, its folder under another name), the runner's variables
(`PYTEST_CURRENT_TEST` never set for the code under test, `sys.argv` and `sys.orig_argv` those of
`python -c`), the clock (moved by days with libfaketime, the monotonic clock left alone: waits with a
timeout must still end; the variables that move it are out of the code under test's `os.environ`, see
`hilbert.judge.reporter`), the order the tests run in, `TMPDIR` and `HOME`. `describe()` is what the
evidence records; a missing tool skips its part and says so (`skipped`).
"""

from __future__ import annotations

import glob
import random
import secrets
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

FAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
)
NO_FAKETIME = "the clock is not moved: libfaketime is not installed (`make faketime` installs it)"


@cache
def faketime_library() -> str | None:
    for pattern in FAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


@dataclass(frozen=True)
class Perturbation:
    seed: str
    order: str
    clock_days: int
    folder: str
    faketime: str | None
    skipped: tuple[str, ...] = field(default=())

    @classmethod
    def draw(cls, seed: str | None = None) -> Perturbation:
        """Parameters from `seed` (by default a fresh secret one: nothing the worker can know)."""
        seed = seed or secrets.token_hex(8)
        rng = random.Random(seed)
        days = rng.choice((-1, 1)) * rng.randint(400, 4000)
        folder = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
        library = faketime_library()
        skipped = () if library else (NO_FAKETIME,)
        return cls(seed, str(rng.randrange(1, 1 << 30)), days, folder, library, skipped)

    def key(self) -> str:
        """Every parameter that shapes a run, for the cache of runs at base (the seed alone would
        not tell apart a perturbation whose parameters were changed after it was drawn)."""
        return f"{self.seed}|{self.order}|{self.clock_days}|{self.folder}|{self.faketime or ''}"

    def env(self, tree: Path) -> dict[str, str]:
        """The environment for a run in `tree`: a temporary folder and a home of its own (inside the
        tree: a sandboxed command can write nowhere else)."""
        return {"TMPDIR": str(tree / f".{self.folder}-tmp"), "HOME": str(tree / f".{self.folder}-home")}

    def clock(self) -> dict[str, str]:
        """The variables that move the clock, for the command's own processes only: set on the
        sandbox (bubblewrap) itself, libfaketime would make its shared memory outside the sandbox."""
        if not self.faketime:
            return {}
        return {
            "LD_PRELOAD": self.faketime,
            "FAKETIME": f"{self.clock_days:+d}d",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def describe(self) -> str:
        clock = f"clock moved {self.clock_days:+d} days" if self.faketime else "clock not moved"
        parts = [
            f"seed {self.seed}",
            f"tests shuffled (order {self.order})",
            f"exported to another folder ({self.folder}/)",
            "PYTEST_CURRENT_TEST and sys.argv hidden from the code under test",
            clock,
            "TMPDIR and HOME moved",
        ]
        return "; ".join(parts) + "".join(f"; skipped: {why}" for why in self.skipped)


__all__ = ["NO_FAKETIME", "Perturbation", "faketime_library"]
