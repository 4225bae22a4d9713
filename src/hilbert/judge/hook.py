"""`hilbert hook stop`: the stop gate for an external agent (Claude Code, Codex) through its Stop hook.

The agent's harness writes a *gate file* when it starts the agent — what the task is and how to check
it — and configures the hook command `hilbert hook stop --gate FILE`:

    verify: python -m pytest -q          # required
    base: 1f3c...                        # the task's base commit (default: the workspace's HEAD)
    task: "Fix scale() so that ..."      # what the judge model is told (optional)
    heldout: /private/heldout/T1         # tests the agent never sees (optional)
    allow_test_edits: [tests/test_x.py]  # test paths the task allows editing (optional)
    max_rounds: 3                        # how often the hook sends the agent back (default 3)
    judge_model: openai:gpt-5            # optional; else the settings' judge_model, else none

Whenever the agent stops, the hook reads the protocol's JSON on stdin (`session_id`, `cwd`,
`stop_hook_active`), snapshots the work tree as a commit without moving any ref (a private index:
the agent's branch, index and files are untouched), runs the gate on base → snapshot, and answers
`{"decision": "block", "reason": ...}` with the gate's reasons, or nothing to let it stop. A round
counter per session, kept beside the gate file, bounds the blocks; a stop with `stop_hook_active`
false starts a new count (the person spoke since). After `max_rounds` the stop is allowed — the
harness that started the agent still gates its final work itself. An error (a bad gate file, input
that is not the protocol's JSON) is one line on stderr with exit status 2, which Claude Code treats as a
block with that line as the reason: the gate fails closed, and Claude Code's own limit of consecutive
blocks ends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hilbert.errors import UserError
from hilbert.judge.change import Allowances
from hilbert.judge.gate import GateResult, Step, run_gate
from hilbert.models.types import Model
from hilbert.workspaces.git import Git

GATE_HINT = "a gate file is YAML or JSON with at least `verify: COMMAND` (see `hilbert hook stop --help`)"
BLOCK = (
    "hilbert's stop gate checked your work ({commit}) and it is not done yet:\n{reasons}\n\n"
    "Fix this in the workspace, run `{verify}` yourself, then stop again. Do not edit, skip or delete "
    "the existing tests to get there."
)


@dataclass(frozen=True)
class GateSpec:
    verify: str
    base: str | None = None
    task: str = ""
    heldout: Path | None = None
    allow: Allowances = field(default_factory=Allowances)
    max_rounds: int = 3
    judge_model: str | None = None


@dataclass(frozen=True)
class HookInput:
    session_id: str
    cwd: Path
    stop_hook_active: bool


@dataclass(frozen=True)
class HookAnswer:
    """What to print (None: nothing, the agent may stop), the gate's result if it ran, and a note."""

    output: dict[str, Any] | None
    result: GateResult | None
    note: str


def read_gate_spec(path: Path) -> GateSpec:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise UserError(f"cannot read the gate file {path}: {error.strerror}", hint=GATE_HINT) from None
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not YAML or JSON: {error}".splitlines()[0], hint=GATE_HINT) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("verify"), str) or not data["verify"].strip():
        raise UserError(f"{path}: needs `verify: COMMAND`", hint=GATE_HINT)
    known = {"verify", "base", "task", "heldout", "allow_test_edits", "max_rounds", "judge_model"}
    if unknown := sorted(set(data) - known):
        raise UserError(
            f"{path}: unknown key(s) {', '.join(unknown)}", hint=f"known keys: {', '.join(sorted(known))}"
        )
    rounds = data.get("max_rounds", 3)
    if not isinstance(rounds, int) or rounds < 0:
        raise UserError(f"{path}: max_rounds must be a whole number ≥ 0, not {rounds!r}", hint=GATE_HINT)
    allow = data.get("allow_test_edits") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise UserError(f"{path}: allow_test_edits must be a list of paths", hint=GATE_HINT)
    heldout = data.get("heldout")
    return GateSpec(
        verify=data["verify"].strip(),
        base=str(data["base"]) if data.get("base") else None,
        task=str(data.get("task") or ""),
        heldout=Path(heldout) if heldout else None,
        allow=Allowances(tuple(allow)),
        max_rounds=rounds,
        judge_model=str(data["judge_model"]) if data.get("judge_model") else None,
    )


def read_hook_input(text: str) -> HookInput:
    hint = "the hook expects the Stop hook's JSON on stdin: {session_id, cwd, stop_hook_active, ...}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"the hook input is not JSON: {error}", hint=hint) from None
    if not isinstance(data, dict) or not isinstance(data.get("cwd"), str):
        raise UserError("the hook input has no `cwd`", hint=hint)
    return HookInput(
        str(data.get("session_id") or "default"), Path(data["cwd"]), bool(data.get("stop_hook_active"))
    )


async def snapshot(work_tree: Path, git: Git, scratch: Path) -> tuple[Path, str]:
    """The repository root holding `work_tree`, and a commit of everything in it (untracked files
    included, ignored ones not) on top of HEAD — made through a private index, so no ref, index or
    file of the agent's changes."""
    top = Path((await git.run("rev-parse", "--show-toplevel", cwd=work_tree)).stdout.strip())
    index = {"GIT_INDEX_FILE": str(scratch / "snapshot-index")}
    await git.run("read-tree", "HEAD", cwd=top, extra_env=index)
    await git.run("add", "-A", cwd=top, extra_env=index)
    tree = (await git.run("write-tree", cwd=top, extra_env=index)).stdout.strip()
    message = b"hilbert: snapshot of the work tree for the stop gate"
    commit = await git.run("commit-tree", tree, "-p", "HEAD", cwd=top, stdin=message)
    return top, commit.stdout.strip()


async def stop_hook(
    hook: HookInput,
    spec: GateSpec,
    *,
    rounds_file: Path,
    scratch: Path,
    git: Git,
    env: Mapping[str, str],
    judge: Model | None = None,
    on_step: Callable[[Step], None] = lambda step: None,
) -> HookAnswer:
    rounds = _read_rounds(rounds_file)
    used = rounds.get(hook.session_id, 0) if hook.stop_hook_active else 0
    if used >= spec.max_rounds:
        return HookAnswer(
            None, None, f"sent back {used} time(s) already (max_rounds {spec.max_rounds}); stop allowed"
        )
    top, head = await snapshot(hook.cwd, git, scratch)
    base = spec.base or (await git.run("rev-parse", "HEAD", cwd=top)).stdout.strip()
    result = await run_gate(
        top,
        base,
        head,
        verify=spec.verify,
        scratch=scratch / "gate",
        git=git,
        env=env,
        heldout=spec.heldout,
        allow=spec.allow,
        judge=judge,
        task=spec.task,
        on_step=on_step,
    )
    if result.verdict == "done":
        rounds.pop(hook.session_id, None)
        _write_rounds(rounds_file, rounds)
        return HookAnswer(None, result, "the gate passed; stop allowed")
    rounds[hook.session_id] = used + 1
    _write_rounds(rounds_file, rounds)
    reasons = "\n".join(f"- {reason}" for reason in result.reasons) + _failed_output(result.steps)
    reason = BLOCK.format(commit=head[:12], reasons=reasons, verify=spec.verify)
    return HookAnswer(
        {"decision": "block", "reason": reason}, result, f"sent back (round {used + 1} of {spec.max_rounds})"
    )


def _failed_output(steps: tuple[Step, ...]) -> str:
    failed = next((s for s in steps if not s.passed and s.output and s.name != "heldout"), None)  # no leak
    return f"\n\nOutput of the failed {failed.name} step:\n{failed.output[-1500:]}" if failed else ""


def _read_rounds(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_rounds(path: Path, rounds: dict[str, int]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(rounds))
    temporary.replace(path)


__all__ = [
    "GateSpec",
    "HookAnswer",
    "HookInput",
    "read_gate_spec",
    "read_hook_input",
    "snapshot",
    "stop_hook",
]
