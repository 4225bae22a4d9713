"""What it costs to provision N checkouts of one repository, per strategy, and what each one isolates.

    python bench/workspaces.py --workers 128 --files 5000 --mb 50
    python bench/workspaces.py --workers 3 --files 50 --mb 1 --strategies worktree,hilbert --keep /tmp/ws

Generates a seeded repository (F text files across nested folders, ~M MB, three commits) in a temp
folder, then for each strategy provisions N checkouts of `main`, each on its own branch, at most
`--jobs` at a time, and measures: wall seconds; disk (`du -skx` of the base repository plus what the
strategy made, minus the base repository alone, so hard links and the base are counted once and
overlay mounts are not walked); and the seconds to clean all N up. Strategies:

    worktree        git worktree add -b w<i>                  (the reference for the ratios)
    clone-shared    git clone --shared, then switch -c w<i>   (objects borrowed via alternates)
    clone-local     git clone (local: objects hard-linked), then switch -c
    clone-no-local  git clone --no-local --single-branch, then switch -c   (full copy: portable fallback)
    hilbert         hilbert.workspaces.Workspaces.provision; cleanup is its archive_or_remove
    overlay         one full clone as the lower layer, one overlayfs mount per worker (needs root /
                    CAP_SYS_ADMIN; detected, else "unavailable: why"); always unmounted

Isolation is probed, not claimed, after the clock stops, on checkouts 1 and 2 of each strategy:
`gitdir` — whether git run inside checkout 1's work tree finds a git dir (so a worker can edit its own
hooks and config); `hook 1->2` — whether a pre-commit hook written into checkout 1's hooks folder (as git
resolves it for checkout 1) runs on a plain `git commit` in checkout 2; `hook in base` — whether that
hooks folder is inside the base repository (so it also runs there); `refs 2` — how many refs checkout 2's
repository holds. The probe commit is undone before the cleanup is timed.

The default is the fastest strategy that needs no privileges, whose hook does not cross and whose git
dir is unreachable from the work tree. Last line:

    workers=N files=F mb=M default=.. hilbert_s=.. hilbert_mb=.. worktree_s=.. worktree_mb=..
    time_ratio=.. disk_ratio=..   (hilbert / worktree)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from hilbert.workspaces import Checkout, Workspaces
from hilbert.workspaces.integration import Integration

STRATEGIES = ("worktree", "clone-shared", "clone-local", "clone-no-local", "hilbert", "overlay")
SHARES = {
    "worktree": "one .git: hooks, config, refs, objects",
    "clone-shared": "objects via alternates (read-only)",
    "clone-local": "objects hard-linked (immutable)",
    "clone-no-local": "nothing",
    "hilbert": "base-only pack via alternates (read-only)",
    "overlay": "lower clone (read-only, copy-on-write)",
}
IDENTITY = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost"}
IDENTITY |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


@dataclass(frozen=True)
class Result:
    strategy: str
    seconds: float
    mb: float
    cleanup_s: float
    gitdir: str
    hook_crosses: bool
    hook_in_base: bool
    refs: int


def git_env(top: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(top / "home")}
    return env | IDENTITY | {"GIT_CEILING_DIRECTORIES": str(top), "LC_ALL": "C"}


async def sh(env: dict[str, str], *argv: str | Path, cwd: Path | None = None, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        *map(str, argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {proc.returncode}: {err.decode().strip()}")
    return out.decode()


def generate(repo: Path, files: int, mb: float, env: dict[str, str], seed: int = 7) -> None:
    """F text files of word soup (compresses ~3x, like source) in nested folders; three commits."""
    rng = random.Random(seed)
    vocab = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz_0123456789", k=rng.randint(2, 12)))
        for _ in range(4000)
    ]
    weights = [rng.lognormvariate(0, 1) for _ in range(files)]
    scale = mb * 1_000_000 / sum(weights)
    paths = [
        repo / f"pkg{i % 10}" / f"mod{i // 10 % 10}" / f"sub{i // 100 % 5}" / f"f{i:05d}.py"
        for i in range(files)
    ]

    def write(path: Path, size: int) -> None:
        words = rng.choices(vocab, k=max(1, size // 8))
        lines = [" ".join(words[j : j + 10]) for j in range(0, len(words), 10)]
        path.write_text(f"# {path.name}\n" + "\n".join(lines) + "\n")

    for path, weight in zip(paths, weights, strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, int(weight * scale))
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], env=env, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "--initial-branch=main")
    run("add", "-A")
    run("commit", "-q", "-m", "initial")
    for n in (2, 3):
        for path in rng.sample(paths, max(1, files // 50)):
            write(path, int(len(path.read_text()) * rng.uniform(0.8, 1.2)))
        run("commit", "-q", "-am", f"change {n}")
    run("gc", "-q")  # one pack, as a real repository mostly is


def du_kb(*paths: Path) -> int:
    out = subprocess.run(["du", "-skxc", *map(str, paths)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


async def bounded(jobs: int, n: int, make: Callable[[int], Awaitable[object]]) -> None:
    gate = asyncio.Semaphore(jobs)

    async def one(i: int) -> None:
        async with gate:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(n)))


def overlay_unavailable(top: Path) -> str | None:
    probe = top / "overlay-probe"
    dirs = [probe / d for d in ("l", "u", "w", "m")]
    for d in dirs:
        d.mkdir(parents=True)
    opts = f"lowerdir={dirs[0]},upperdir={dirs[1]},workdir={dirs[2]}"
    try:
        done = subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", opts, str(dirs[3])], capture_output=True, text=True
        )
    except FileNotFoundError:
        return "no mount command"
    if done.returncode != 0:
        return f"mount -t overlay failed: {done.stderr.strip() or done.returncode}"
    subprocess.run(["umount", str(dirs[3])], check=True)
    shutil.rmtree(probe)
    return None


class Bench:
    """One strategy run: provision N, measure, probe isolation, clean up."""

    def __init__(self, top: Path, base: Path, workers: int, jobs: int) -> None:
        self.top, self.base, self.n, self.jobs = top, base, workers, jobs
        self.env = git_env(top)

    async def git(self, *args: str | Path, cwd: Path | None = None, check: bool = True) -> str:
        return await sh(self.env, "git", *args, cwd=cwd, check=check)

    async def run(self, strategy: str) -> Result:
        dest = self.top / strategy
        dest.mkdir()
        base_kb = du_kb(self.base)
        self.mounts: list[Path] = []
        self.checkouts: list[Checkout] = []
        try:
            start = time.perf_counter()
            await getattr(self, "provision_" + strategy.replace("-", "_"))(dest)
            seconds = time.perf_counter() - start
            mb = (du_kb(self.base, dest) - base_kb) / 1024
            probe = await self.probe(strategy, dest)
            start = time.perf_counter()
            await self.cleanup(strategy, dest)
            cleanup_s = time.perf_counter() - start
        finally:
            for mount in self.mounts:
                subprocess.run(["umount", str(mount)], capture_output=True)
            shutil.rmtree(dest, ignore_errors=True)
            await self.git("-C", self.base, "worktree", "prune")
        return Result(strategy, seconds, mb, cleanup_s, *probe)

    async def provision_worktree(self, dest: Path) -> None:
        async def add(i: int) -> None:
            # git reads every worktree's files while it adds one; one being added beside it can be
            # half-written ("failed to read .git/worktrees/w0/commondir", seen once in a fresh-clone
            # CI): tried again, with -B in case the branch was made before the add failed
            for attempt in range(3):
                flag = "-b" if attempt == 0 else "-B"
                try:
                    await self.git(
                        "-C", self.base, "worktree", "add", "-q", flag, f"w{i}", dest / f"w{i}", "main"
                    )
                    return
                except RuntimeError as failed:
                    if "worktrees/" not in str(failed) or attempt == 2:
                        raise

        await bounded(self.jobs, self.n, add)

    async def _clone(self, dest: Path, *flags: str) -> None:
        async def one(i: int) -> None:
            await self.git("clone", "-q", *flags, self.base, dest / f"w{i}")
            await self.git("-C", dest / f"w{i}", "switch", "-q", "-c", f"w{i}")

        await bounded(self.jobs, self.n, one)

    async def provision_clone_shared(self, dest: Path) -> None:
        await self._clone(dest, "--shared")

    async def provision_clone_local(self, dest: Path) -> None:
        await self._clone(dest, "--local")

    async def provision_clone_no_local(self, dest: Path) -> None:
        await self._clone(dest, "--no-local", "--single-branch")

    async def provision_hilbert(self, dest: Path) -> None:
        self.spaces = Workspaces(dest, self.base)
        checkouts: dict[int, Checkout] = {}

        async def one(i: int) -> None:
            checkouts[i] = await self.spaces.provision(f"w{i}", "main")

        await bounded(self.jobs, self.n, one)
        self.checkouts = [checkouts[i] for i in range(self.n)]

    async def provision_overlay(self, dest: Path) -> None:
        lower = dest / "lower"
        await self.git("clone", "-q", "--no-local", self.base, lower)

        async def one(i: int) -> None:
            parts = [dest / p / f"w{i}" for p in ("upper", "work", "merged")]
            for part in parts:
                part.mkdir(parents=True)
            opts = f"lowerdir={lower},upperdir={parts[0]},workdir={parts[1]}"
            await sh(self.env, "mount", "-t", "overlay", "overlay", "-o", opts, parts[2])
            self.mounts.append(parts[2])
            await self.git("-C", parts[2], "switch", "-q", "-c", f"w{i}")

        await bounded(self.jobs, self.n, one)

    def tree(self, strategy: str, dest: Path, i: int) -> Path:
        if strategy == "hilbert":
            return self.checkouts[i].work_tree
        return dest / "merged" / f"w{i}" if strategy == "overlay" else dest / f"w{i}"

    def git_args(self, strategy: str, dest: Path, i: int) -> list[str | Path]:
        if strategy == "hilbert":  # the work tree has no .git: name the git dir, as the harness does
            c = self.checkouts[i]
            return [f"--git-dir={c.git_dir}", f"--work-tree={c.work_tree}"]
        return ["-C", self.tree(strategy, dest, i)]

    async def probe(self, strategy: str, dest: Path) -> tuple[str, bool, bool, int]:
        """Real checks on checkouts 0 and 1 (workers 1 and 2); leaves their branches as they were."""
        one, two = self.git_args(strategy, dest, 0), self.git_args(strategy, dest, 1)
        found = await self.git(
            "rev-parse", "--absolute-git-dir", cwd=self.tree(strategy, dest, 0), check=False
        )
        gitdir = "reachable" if found.strip() else "none"
        hooks = Path(
            (await self.git(*one, "rev-parse", "--path-format=absolute", "--git-path", "hooks")).strip()
        )
        marker = self.top / f"hook-ran-{strategy}"
        hook = hooks / "pre-commit"
        hooks.mkdir(parents=True, exist_ok=True)
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
        try:
            before = (await self.git(*two, "rev-parse", "HEAD")).strip()
            await self.git(*two, "commit", "-q", "--allow-empty", "-m", "probe")
            await self.git(*two, "reset", "-q", "--soft", before)
        finally:
            hook.unlink()
        refs = len((await self.git(*two, "for-each-ref")).splitlines())
        return gitdir, marker.exists(), hooks.resolve().is_relative_to(self.base.resolve()), refs

    async def cleanup(self, strategy: str, dest: Path) -> None:
        if strategy == "worktree":  # remove the worktrees, then their branches (they live in the base)
            remove = lambda i: self.git("-C", self.base, "worktree", "remove", "--force", dest / f"w{i}")  # noqa: E731
            await bounded(self.jobs, self.n, remove)
            await self.git("-C", self.base, "branch", "-q", "-D", *(f"w{i}" for i in range(self.n)))
        elif strategy == "hilbert":
            await bounded(
                self.jobs,
                self.n,
                lambda i: self.spaces.archive_or_remove(
                    self.checkouts[i], Integration(self.base, self.spaces.git, "main")
                ),
            )
            if any((dest / "archive").glob("*")):
                raise RuntimeError("hilbert archived a clean checkout")
        elif strategy == "overlay":
            await bounded(self.jobs, len(self.mounts), lambda i: sh(self.env, "umount", self.mounts[i]))
            self.mounts = []
            await asyncio.to_thread(shutil.rmtree, dest)
        else:
            await bounded(self.jobs, self.n, lambda i: asyncio.to_thread(shutil.rmtree, dest / f"w{i}"))


def isolated(r: Result) -> bool:
    return r.gitdir == "none" and not r.hook_crosses and not r.hook_in_base


HEADER = (
    "| strategy | seconds | MB | cleanup s | time / worktree | disk / worktree "
    "| gitdir from tree | hook 1->2 | hook in base | refs 2 | shares |"
)


def table(results: list[Result], skipped: dict[str, str]) -> list[str]:
    ref = next((r for r in results if r.strategy == "worktree"), None)

    def ratio(value: float, attr: str) -> str:
        return f"{value / getattr(ref, attr):.3f}" if ref and getattr(ref, attr) > 0 else "n/a"

    rows = [HEADER, "|---|---:|---:|---:|---:|---:|---|---|---|---:|---|"]
    for r in results:
        cells = [r.strategy, f"{r.seconds:.2f}", f"{r.mb:.1f}", f"{r.cleanup_s:.2f}"]
        cells += [
            ratio(r.seconds, "seconds"),
            ratio(r.mb, "mb"),
            r.gitdir,
            "runs" if r.hook_crosses else "no",
        ]
        cells += ["yes" if r.hook_in_base else "no", str(r.refs), SHARES[r.strategy]]
        rows.append("| " + " | ".join(cells) + " |")
    rows += [f"| {name} | unavailable: {why} |" for name, why in skipped.items()]
    return rows


async def main_async(args: argparse.Namespace, top: Path) -> int:
    (top / "home").mkdir()
    base = top / "base"
    base.mkdir()
    start = time.perf_counter()
    generate(base, args.files, args.mb, git_env(top))
    size = sum(p.stat().st_size for p in base.glob("pkg*/**/*.py")) / 1e6
    on_disk, dot_git = du_kb(base) / 1024, du_kb(base / ".git") / 1024
    took = time.perf_counter() - start
    print(
        f"generated {args.files} files, {size:.1f} MB of text "
        f"({on_disk:.1f} MB on disk, .git {dot_git:.1f} MB) in {took:.1f} s"
    )
    bench = Bench(top, base, args.workers, args.jobs)
    results: list[Result] = []
    skipped: dict[str, str] = {}
    for strategy in args.strategies:
        why = overlay_unavailable(top) if strategy == "overlay" else None
        if why:
            print(f"overlay unavailable: {why}", flush=True)
            skipped[strategy] = why
            continue
        results.append(await bench.run(strategy))
        r = results[-1]
        print(f"{strategy}: {r.seconds:.2f} s, {r.mb:.1f} MB, cleanup {r.cleanup_s:.2f} s", flush=True)
    print("\n".join(table(results, skipped)))
    by = {r.strategy: r for r in results}
    fits = [r for r in results if isolated(r) and r.strategy != "overlay"]
    default = min(fits, key=lambda r: r.seconds).strategy if fits else "none"
    h, w = by.get("hilbert"), by.get("worktree")
    figures = f"workers={args.workers} files={args.files} mb={args.mb:g} default={default}"
    for name, r in (("hilbert", h), ("worktree", w)):
        figures += f" {name}_s={r.seconds:.2f} {name}_mb={r.mb:.2f}" if r else f" {name}_s=n/a {name}_mb=n/a"
    if h and w:
        figures += f" time_ratio={h.seconds / w.seconds:.3f} disk_ratio={h.mb / w.mb:.3f}"
    else:
        figures += " time_ratio=n/a disk_ratio=n/a"
    print(figures)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=128)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--jobs", type=int, default=8, help="checkouts provisioned at once (every strategy)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), type=lambda s: s.split(","))
    parser.add_argument("--keep", type=Path, help="keep the generated repository in this folder")
    args = parser.parse_args()
    if bad := set(args.strategies) - set(STRATEGIES):
        parser.error(f"unknown strategies {sorted(bad)}; choose from {','.join(STRATEGIES)}")
    if args.workers < 2:
        parser.error("--workers must be at least 2 (the isolation probe uses checkouts 1 and 2)")
    top = Path(tempfile.mkdtemp(prefix="bench-workspaces-"))
    try:
        return asyncio.run(main_async(args, top))
    finally:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.move(str(top / "base"), str(args.keep / "base"))
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
