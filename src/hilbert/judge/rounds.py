"""Gate rounds: what a stop becomes once the stop gate (and the review panel) ruled on it — shared by the
fleet's `StopGate` (`hilbert.fleet.stop_gate`) and `hilbert hook stop` (`hilbert.judge.hook`).

`await decide_round(n, max_rounds, result, panel, ...)` is the whole decision for round `n` (1-based):

- `Done`: the gate passed and the panel, if it reviewed, agreed;
- `SendBack(text)`: not done; the worker is told why (`feedback`, `PANEL_FEEDBACK`) and tries again;
- `Halted(reason, cause)`: the judge says the task is impossible (`impossible`, in any round), or round
  `n` reached `max_rounds` and the gate still refuses (`gate_refused`) or the panel still sends it back
  (`panel_refused`). Round `max_rounds` is the last one judged: it is never followed by a send-back.

The feedback quotes the gate's reasons and the failing step's output, the held-out tests' output never
(`WITHHELD`: it would hand the worker their inputs and expected values), and, when the integrity checks
found protected files changed (`RESTORABLE`), the command that puts them back as the task's start had
them (`restore_hint`). That command is the only thing here that needs I/O — the originals' bytes, and a
copy of them where the worker can read them — and it comes through the caller's `Originals`. Nothing
else here reads or writes anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from hilbert.agent.policies import Cause
from hilbert.judge.evidence import WITHHELD
from hilbert.judge.gate import GateResult, Step
from hilbert.judge.panel import PanelResult
from hilbert.security.envelope import defang

IMPOSSIBLE = "the judge says the task is impossible"
OUTPUT_CHARS = 3000  # the tail of the failing step's output a worker is shown
FEEDBACK = (  # the fleet's worker (its first words mark it as feedback: `hilbert.context.pinned`)
    "The harness committed your work ({commit}) and ran its stop gate on a clean checkout of that "
    "commit. The task is not done:\n{reasons}\n{output}\n"
    "Fix the cause in your workspace — the code, not the tests — run `{verify}` yourself, then call "
    "finish again.{restore}"
)
BLOCK = (  # an external agent through its Stop hook (`hilbert hook stop`): same parts, its own verbs
    "hilbert's stop gate checked your work ({commit}) on a clean checkout and it is not done yet:\n"
    "{reasons}\n{output}\n"
    "Fix the cause in the workspace — the code, not the tests — run `{verify}` yourself, then stop "
    "again. Do not edit, skip or delete the existing tests to get there.{restore}"
)
PANEL_FEEDBACK = (
    "The checks passed on your commit ({commit}), but the review panel (reviewers on other model "
    "families, each on their own) agreed on blocking problems:\n{reasons}\n\n"
    "Fix them in your workspace, run `{verify}` yourself, then call finish again."
)
# findings about files the task's start had right (tests, their configuration, CI): put back, not fixed
RESTORABLE = frozenset(
    {
        "tests_changed",
        "tests_deleted_or_emptied",
        "skip_markers_added",
        "test_config_changed",
        "verify_or_ci_changed",
        "assertions_weakened",
    }
)


@dataclass(frozen=True)
class Done:
    kind: Literal["done"] = "done"


@dataclass(frozen=True)
class SendBack:
    """Not done: the worker goes on, told `text`."""

    text: str
    kind: Literal["send_back"] = "send_back"


@dataclass(frozen=True)
class Halted:
    """No more rounds: `reason` for people, `cause` as data (`impossible`, `gate_refused`,
    `panel_refused`)."""

    reason: str
    cause: Cause
    kind: Literal["halt"] = "halt"


Decision = Done | SendBack | Halted


@dataclass(frozen=True)
class Originals:
    """Where the protected files as the task's start had them come from, for a restore hint.

    `read(path)`: the file's bytes at the start, None where the start did not have it. `copy(files)`:
    writes copies where the worker can read them and returns their folder relative to its work tree
    (None: it could not be done safely, and there is no hint) — for a worker without git of its own.
    Without `copy`, the worker has git and the hint checks the files out of `base`; `root`, when given,
    is the repository's top, which the hint's paths then start with (a worker's shell may be below it)."""

    read: Callable[[str], Awaitable[bytes | None]]
    copy: Callable[[Mapping[str, bytes]], str | None] | None = None
    base: str = ""
    root: str = ""

    def at(self, path: str) -> str:
        return str(PurePosixPath(self.root, path))


async def decide_round(
    round_no: int,
    max_rounds: int,
    result: GateResult,
    panel: PanelResult | None = None,
    *,
    commit: str,
    verify: str,
    template: str = FEEDBACK,
    originals: Originals | None = None,
) -> Decision:
    """Round `round_no` (1-based) of at most `max_rounds`, given the gate's `result` and, when the gate
    passed and the panel reviewed, its `panel` result. `template` words the gate's feedback (`FEEDBACK`,
    `BLOCK`); `originals` is read only when the worker is sent back with protected files to put back."""
    last = round_no >= max_rounds
    if result.verdict == "done":
        if panel is None or not panel.send_back:
            return Done()
        if last:
            return Halted(f"the review panel still sends it back after {round_no} rounds", "panel_refused")
        reasons = "\n".join(f"- {reason}" for reason in panel.reasons)
        return SendBack(PANEL_FEEDBACK.format(commit=commit[:12], reasons=reasons, verify=verify))
    because = "; ".join(result.reasons)
    if result.verdict == "impossible":
        return Halted(f"{IMPOSSIBLE}: {because}", "impossible")
    if last:
        return Halted(f"the stop gate still refuses after {round_no} rounds: {because}", "gate_refused")
    restore = await restore_hint(result, originals) if originals is not None else ""
    return SendBack(feedback(result, commit=commit, verify=verify, template=template, restore=restore))


def feedback(
    result: GateResult, *, commit: str, verify: str, template: str = FEEDBACK, restore: str = ""
) -> str:
    """The gate's reasons and the failing step's output (never a `WITHHELD` step's), in `template`.
    Both quote the worker's code, untrusted text, as it is: what reads it defangs it (hilbert's agent
    loop, `hilbert.agent.defanging`; the Stop hook's answer, `hilbert.judge.hook`)."""
    failed = failing_step(result.steps)
    output = f"\nOutput of the failed {failed.name} step:\n{tail(failed.output)}\n" if failed else ""
    reasons = "\n".join(f"- {reason}" for reason in result.reasons)
    return template.format(commit=commit[:12], reasons=reasons, output=output, verify=verify, restore=restore)


def tail(text: str, limit: int = OUTPUT_CHARS) -> str:
    """The end of `text` in at most `limit` characters, starting at a line (not mid-word), and saying
    what was left out."""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    start = cut.find("\n") + 1  # the first whole line; a single line longer than `limit` is cut
    return f"[... {len(text) - len(cut) + start} characters before this]\n" + (cut[start:] if start else cut)


def failing_step(steps: tuple[Step, ...]) -> Step | None:
    """The first failed step with output a worker may see: never the held-out tests'."""
    return next((s for s in steps if not s.passed and s.output and s.name not in WITHHELD), None)


def restorable(result: GateResult) -> list[str]:
    """The protected paths the integrity checks found changed and the worker should put back, sorted."""
    found = (pair for step in result.steps if step.name == "integrity" for pair in step.found)
    return sorted({path for check, path in found if check in RESTORABLE})


async def restore_hint(result: GateResult, originals: Originals) -> str:
    """The sentence with the command that puts back the protected files the integrity checks found
    changed, as the task's start had them (those it did not have removed), or ""."""
    kept = {path: await originals.read(path) for path in restorable(result)}
    existed = {path: data for path, data in kept.items() if data is not None}
    added = [path for path, data in kept.items() if data is None]
    commands = _restore_commands(existed, added, originals)
    if not commands:
        return ""
    return f"\nTo put the protected files back as the task's start had them, run `{' && '.join(commands)}`."


def _restore_commands(existed: Mapping[str, bytes], added: list[str], originals: Originals) -> list[str]:
    """The shell commands of a restore hint: copy back (or check out) `existed`, remove `added`; none
    when the copies could not be made."""
    quote = _quote
    commands: list[str] = []
    if existed and originals.copy is not None:
        folder = originals.copy(existed)
        if folder is None:
            return []
        commands = [
            f"mkdir -p {quote(str(PurePosixPath(p).parent))} && cp {quote(f'{folder}/{p}')} {quote(p)}"
            for p in existed
        ]
    elif existed:
        commands = [
            f"git checkout {quote(originals.base)} -- {' '.join(quote(originals.at(p)) for p in existed)}"
        ]
    if added:
        commands.append(f"rm -f -- {' '.join(quote(originals.at(p)) for p in added)}")
    return commands


_UNSAFE = re.compile(r"[^A-Za-z0-9 ._/-]")
_RUNS = re.compile(r"\?+|[^?]+")


def _quote(path: str) -> str:
    """`path` quoted for the shell so that defanging leaves it as it is: the model reads the hint
    defanged (`hilbert.agent.defanging`), and a name a worker made to look like an envelope's tag would
    reach the shell with a `(<)` that names no file. Such a name is matched by a glob instead, each
    character other than a letter, digit, space or `._/-` a `?`."""
    quoted = shlex.quote(path)
    if defang(quoted) == quoted:
        return quoted
    return "".join(
        shlex.quote(run) if run[0] != "?" else run for run in _RUNS.findall(_UNSAFE.sub("?", path))
    )


__all__ = [
    "BLOCK",
    "FEEDBACK",
    "IMPOSSIBLE",
    "PANEL_FEEDBACK",
    "RESTORABLE",
    "WITHHELD",
    "Decision",
    "Done",
    "Halted",
    "Originals",
    "SendBack",
    "decide_round",
    "failing_step",
    "feedback",
    "restorable",
    "restore_hint",
]
