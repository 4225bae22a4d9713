"""What the sandbox costs per shell command: the same command run directly and inside bubblewrap.

    python bench/sandbox.py --runs 200                      # `true`, and a Python start-up
    python bench/sandbox.py --runs 20 --command "python -m pytest --version"

Each command runs `--runs` times one after another through hilbert's own `run_command` (the path a
worker's shell tool takes), first unconfined, then wrapped by `hilbert.security.sandbox` with a run
folder hidden, as the fleet does. Printed per command: milliseconds per run each way, the difference and
the ratio. Exit status 2 with one line when this machine has no working bubblewrap. Last line:

    runs=200 sandbox=bubblewrap true_direct_ms=.. true_sandbox_ms=.. true_overhead_ms=..
    python_direct_ms=.. python_sandbox_ms=.. python_overhead_ms=.. ratio_true=..
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from hilbert.agent.shell import Output, run_command
from hilbert.agent.tools import command_env
from hilbert.security.sandbox import Sandbox, detect

COMMANDS = {"true": "true", "python": f"{sys.executable} -c pass"}


async def per_run_ms(command: str, runs: int, workspace: Path, sandbox: Sandbox | None) -> float:
    env = command_env()
    wrap = (lambda argv: sandbox.wrap(argv, workspace, workspace)) if sandbox else None
    started = time.perf_counter()
    for _ in range(runs):
        done = await run_command(
            command, cwd=workspace, env=env, timeout_s=60, output=Output(2000, lambda: None), wrap=wrap
        )
        if done.exit_code != 0:
            raise SystemExit(
                f"bench: `{command}` failed (exit {done.exit_code}): {done.output.render(workspace)}"
            )
    return (time.perf_counter() - started) * 1000 / runs


async def main(runs: int, extra: str | None) -> int:
    sandbox = detect()
    if sandbox.kind != "bubblewrap":
        print(f"bench: no working bubblewrap here ({sandbox.why}); run `make sandbox`", file=sys.stderr)
        return 2
    commands = dict(COMMANDS, **({"custom": extra} if extra else {}))
    figures: dict[str, str] = {"runs": str(runs), "sandbox": "bubblewrap"}
    with tempfile.TemporaryDirectory(prefix="hilbert-sandbox-bench-") as scratch:
        root = Path(scratch) / "run"
        workspace = root / "workspaces" / "w1"
        workspace.mkdir(parents=True)
        walled = sandbox.hiding(root)
        print(f"| command | direct ms | sandboxed ms | overhead ms | ratio |  ({runs} runs each)")
        print("|---|---:|---:|---:|---:|")
        for name, command in commands.items():
            direct = await per_run_ms(command, runs, workspace, None)
            inside = await per_run_ms(command, runs, workspace, walled)
            cells = (
                f"`{command}`",
                f"{direct:.2f}",
                f"{inside:.2f}",
                f"{inside - direct:.2f}",
                f"{inside / direct:.2f}",
            )
            print("| " + " | ".join(cells) + " |")
            figures |= {
                f"{name}_direct_ms": f"{direct:.2f}",
                f"{name}_sandbox_ms": f"{inside:.2f}",
                f"{name}_overhead_ms": f"{inside - direct:.2f}",
            }
            if name == "true":
                figures["ratio_true"] = f"{inside / direct:.2f}"
    print(" ".join(f"{key}={value}" for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs of each command, each way")
    parser.add_argument("--command", help="one more command to measure")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    sys.exit(asyncio.run(main(options.runs, options.command)))
