"""What the sandbox costs per shell command: the same command run directly, inside bubblewrap and
under Landlock.

    python bench/sandbox.py --runs 200                      # `true`, and a Python start-up
    python bench/sandbox.py --runs 20 --command "python -m pytest --version"

Each command runs `--runs` times one after another through hilbert's own `Runner` (the path a
worker's shell tool takes), first unconfined, then wrapped by `hilbert.security.sandbox` with a run
folder hidden, as the fleet does: in bubblewrap, then under Landlock (what `detect` picks without
bubblewrap), each where this machine has it. Printed per command and sandbox: milliseconds per run,
the difference and the ratio. Exit status 2 with one line when this machine has neither. Last line
(`sandbox=` names what the `*_sandbox_*` fields measure: bubblewrap, or `none` without it; the
`*_landlock_*` fields are Landlock's, absent with `landlock_abi=0`):

    runs=200 sandbox=bubblewrap landlock_abi=7 true_direct_ms=.. true_sandbox_ms=..
    true_overhead_ms=.. true_landlock_ms=.. true_landlock_overhead_ms=.. python_direct_ms=..
    python_sandbox_ms=.. python_overhead_ms=.. python_landlock_ms=.. python_landlock_overhead_ms=..
    ratio_true=.. ratio_true_landlock=..
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from hilbert.commands import Output, Runner, Timeout
from hilbert.security.sandbox import Sandbox, detect

COMMANDS = {"true": "true", "python": f"{sys.executable} -c pass"}


async def per_run_ms(command: str, runs: int, workspace: Path, sandbox: Sandbox) -> float:
    runner = Runner(sandbox)
    started = time.perf_counter()
    for _ in range(runs):
        done = await runner.run(
            command, root=workspace, timeout=Timeout(60, "bench"), output=Output(2000, lambda: None)
        )
        if done.exit_code != 0:
            raise SystemExit(f"bench: `{command}` failed (exit {done.exit_code}): {done.output.render()}")
    return (time.perf_counter() - started) * 1000 / runs


async def main(runs: int, extra: str | None) -> int:
    found = {
        "bubblewrap": detect(landlock_abi=lambda: 0),
        "landlock": detect(which=lambda name: None),
    }
    sandboxes = {kind: sandbox for kind, sandbox in found.items() if sandbox.kind == kind}
    if not sandboxes:
        why = "; ".join(sandbox.why for sandbox in found.values())
        print(f"bench: no working sandbox here ({why}); run `make sandbox`", file=sys.stderr)
        return 2
    commands = dict(COMMANDS, **({"custom": extra} if extra else {}))
    figures = {
        "runs": str(runs),
        "sandbox": "bubblewrap" if "bubblewrap" in sandboxes else "none",
        "landlock_abi": str(sandboxes["landlock"].abi if "landlock" in sandboxes else 0),
    }
    ratios: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hilbert-sandbox-bench-") as scratch:
        root = Path(scratch) / "run"
        workspace = root / "workspaces" / "w1"
        workspace.mkdir(parents=True)
        print(f"| command | sandbox | direct ms | sandboxed ms | overhead ms | ratio |  ({runs} runs each)")
        print("|---|---|---:|---:|---:|---:|")
        for name, command in commands.items():
            direct = await per_run_ms(command, runs, workspace, Sandbox("unsandboxed"))
            figures[f"{name}_direct_ms"] = f"{direct:.2f}"
            for kind, sandbox in sandboxes.items():
                inside = await per_run_ms(command, runs, workspace, sandbox.hiding(root))
                cells = (f"`{command}`", kind, f"{direct:.2f}", f"{inside:.2f}", f"{inside - direct:.2f}")
                print("| " + " | ".join(cells) + f" | {inside / direct:.2f} |")
                own = kind != "bubblewrap"  # bubblewrap keeps the field names it had before Landlock
                figures[f"{name}_{kind if own else 'sandbox'}_ms"] = f"{inside:.2f}"
                figures[f"{name}_{kind + '_' if own else ''}overhead_ms"] = f"{inside - direct:.2f}"
                if name == "true":
                    ratios[f"ratio_true{'_' + kind if own else ''}"] = f"{inside / direct:.2f}"
    print(" ".join(f"{key}={value}" for key, value in (figures | ratios).items()))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs of each command, each way")
    parser.add_argument("--command", help="one more command to measure")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    sys.exit(asyncio.run(main(options.runs, options.command)))
