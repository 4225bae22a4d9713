"""The harness's own check of a worker's claim: a worker's word closes nothing.

`HarnessVerify` is an `on_stop` policy. Whenever the worker calls `finish` — or stops without it —
the harness commits the workspace on the worker's behalf, exports that commit to a clean folder
outside the workspace (nothing uncommitted or git-ignored comes along), and runs the task's verify
command there with the environment the harness controls. Green: the stop stands and the commit is
the task's candidate. Red: the worker is resumed with the command's output, up to `max_rounds`
times; then the run is halted for the scheduler to retry or escalate. Every run is an event.

The judge (issue 4) replaces this with the full stop gate; its first step is exactly this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hilbert.agent.policies import Action, Halt, LoopState, Policy, Resume, Stop
from hilbert.agent.shell import Limits, Output, run_command
from hilbert.fleet.plan import Task
from hilbert.models.types import Message
from hilbert.workspaces import Checkout, Workspaces

Record = Callable[[str, dict[str, Any]], None]
FEEDBACK = (
    "The harness committed your work ({commit}) and ran the task's check `{verify}` on a clean checkout "
    "of that commit: {how}. The task is not done.\n\n{output}\n\n"
    "Find the cause, fix it in your workspace, run the check yourself, then call finish again."
)


class HarnessVerify(Policy):
    name = "harness_verify"

    def __init__(
        self,
        task: Task,
        workspaces: Workspaces,
        checkout: Checkout,
        record: Record,
        *,
        scratch: Path,
        env: Mapping[str, str],
        max_rounds: int = 3,
        timeout_s: float = 600.0,
        keep_chars: int = 3000,
        limits: Limits | None = None,
        command_slots: asyncio.Semaphore | None = None,
    ) -> None:
        self.task, self.workspaces, self.checkout, self.record = task, workspaces, checkout, record
        self.scratch, self.env, self.max_rounds, self.timeout_s = scratch, env, max_rounds, timeout_s
        self.keep_chars = keep_chars
        self.limits, self.command_slots = limits, command_slots
        self.rounds = 0
        self.passed_commit: str | None = None

    async def on_stop(self, state: LoopState, stop: Stop) -> Sequence[Action]:
        if stop.status not in ("finished", "no_finish"):
            return ()
        self.rounds += 1
        message = f"{self.task.id}: {stop.claim or 'stopped without finishing'}"
        commit = await self.workspaces.commit(self.checkout, message) or await self.workspaces.tip(
            self.checkout
        )
        clean = self.scratch / f"{self.checkout.worker_id}-verify-{self.rounds}"
        try:
            await self.workspaces.export(self.checkout, commit, clean)
            output = Output(self.keep_chars // 2, lambda: None)
            async with self.command_slots or contextlib.nullcontext():  # a test run, like the workers'
                done = await run_command(
                    self.task.verify,
                    cwd=clean,
                    env=self.env,
                    timeout_s=self.timeout_s,
                    output=output,
                    limits=self.limits,
                )
        finally:  # in a thread (a big tree would stall the loop), and finished even if we are cancelled
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, clean, ignore_errors=True))
        text = done.output.render(clean)
        passed = done.exit_code == 0
        self.record(
            "verify_run",
            {
                "task": self.task.id,
                "worker": self.checkout.worker_id,
                "commit": commit,
                "round": self.rounds,
                "command": self.task.verify,
                "exit_code": done.exit_code,
                "passed": passed,
                "claimed": stop.status == "finished",
                "output": text,
            },
        )
        if passed:
            self.passed_commit = commit
            return ()
        how = "timed out" if done.exit_code is None else f"exit {done.exit_code}"
        if self.rounds >= self.max_rounds:
            return [Halt(f"verify still fails after {self.rounds} rounds: `{self.task.verify}` → {how}")]
        feedback = FEEDBACK.format(commit=commit[:12], verify=self.task.verify, how=how, output=text)
        return [Resume(Message("user", feedback))]
