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
    unsandboxed: true                    # accept running the checks without a sandbox (default false)

Whenever the agent stops, the hook reads the protocol's JSON on stdin (`session_id`, `cwd`,
`stop_hook_active`), snapshots the work tree as a commit without moving any ref (a private index: the
agent's branch, index and files are untouched; the person's own ignore rules apply, so an ignored
`.env` stays out), runs the gate on base → snapshot, and answers `{"decision": "block", "reason": ...}`
with the gate's reasons, or nothing to let it stop. The reason is worded as the fleet's workers are told
(`hilbert.judge.rounds`): the reasons, the failing step's output (never the held-out tests'), and the
`git checkout BASE -- ...` that puts back protected files (tests, their configuration) it changed —
defanged here, since the agent reading it is not in hilbert's loop (`hilbert.security.envelope.defang`).

Per session, a state file beside the gate file (locked while read and written) keeps the round count
and the base: without `base:` in the gate file, the base is the HEAD at the session's first stop, kept
for later rounds (an agent that commits its test edits does not move it). A stop with
`stop_hook_active` false starts a new count (the person spoke since). Each stop the hook gates counts
as a round, an error included: at most `max_rounds` blocks, then the stop is allowed — whoever started
the agent still gates its final work. An error is one line on stderr with exit status 2, which Claude
Code treats as a block with that line as the reason (the gate fails closed within the same bound). The
line never says `No such file` or `can't open` (`as_block`): Claude Code reads such an exit 2 as a hook
script gone missing, lets the agent stop and reports "Stop hook error". A task the judge calls
impossible is not blocked: the agent may stop, and the note says why.

How the agent is sent back depends on who runs it. Claude Code files every `{"decision": "block"}` of a
Stop hook among its hook errors and shows "Stop hook error occurred" (anthropics/claude-code#12667;
read in 2.1.197's own code: a blocking error is pushed to the list the notification is made from),
while `{"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": REASON}}` re-invokes the
model with the reason and raises no notification. So when the session's transcript
(`transcript_path`) says it is a Claude Code version in `CONTEXT_VERSIONS` — seen here to go on after
`additionalContext` and to count the next stop as `stop_hook_active` (tests/interop) — the reason goes
as `additionalContext`; any other client (Codex, an older or newer Claude Code, no transcript) gets the
block every Stop-hook client honours, so an unverified one is never let stop ungated.

The repository is the folder holding the `.git` entry at or above `cwd` (found by the hook, not by
git's discovery, so no `core.worktree` or `GIT_DIR` steers it), and every git call names its git dir
and work tree. Its configuration is the agent's to write, so every filter driver it names is switched
off for the hook's git (`neutral`): `git add` and the gate's `git archive` would run them, outside the
sandbox. The agent runs as the hook's user, so this keeps the snapshot honest more than it keeps
anything out; the fleet's own git never reads a configuration a worker can write.

The checks run in hilbert's sandbox. Whether they may run without one, where the machine has none, is
the gate file's to say (`unsandboxed`), never a `hilbert.toml` in the agent's folder: without it the
checks are refused, each refusal a round like any failed check, and stderr tells the person what to do.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from hilbert.commands import Runner
from hilbert.errors import HilbertError, UserError
from hilbert.judge.change import Allowances
from hilbert.judge.gate import GateResult, Step, run_gate
from hilbert.judge.rounds import BLOCK, Done, Halted, Originals, decide_round
from hilbert.models.types import Model
from hilbert.security.envelope import defang
from hilbert.workspaces.git import Git

GATE_HINT = "a gate file is YAML or JSON with at least `verify: COMMAND` (see `hilbert hook stop --help`)"


@dataclass(frozen=True)
class GateSpec:
    verify: str
    base: str | None = None
    task: str = ""
    heldout: Path | None = None
    allow: Allowances = field(default_factory=Allowances)
    max_rounds: int = 3
    judge_model: str | None = None
    unsandboxed: bool = False


@dataclass(frozen=True)
class HookInput:
    session_id: str
    cwd: Path
    stop_hook_active: bool
    transcript: Path | None = None  # the client's session transcript (Claude Code's JSONL)


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
    known = {
        "verify",
        "base",
        "task",
        "heldout",
        "allow_test_edits",
        "max_rounds",
        "judge_model",
        "unsandboxed",
    }
    if unknown := sorted(set(data) - known):
        raise UserError(
            f"{path}: unknown key(s) {', '.join(unknown)}", hint=f"known keys: {', '.join(sorted(known))}"
        )
    rounds = data.get("max_rounds", 3)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise UserError(f"{path}: max_rounds must be a whole number ≥ 0, not {rounds!r}", hint=GATE_HINT)
    allow = data.get("allow_test_edits") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise UserError(f"{path}: allow_test_edits must be a list of paths", hint=GATE_HINT)
    heldout = data.get("heldout")
    if not isinstance(data.get("unsandboxed", False), bool):
        raise UserError(f"{path}: unsandboxed must be true or false", hint=GATE_HINT)
    return GateSpec(
        verify=data["verify"].strip(),
        base=str(data["base"]) if data.get("base") else None,
        task=str(data.get("task") or ""),
        heldout=(path.parent / str(heldout)).resolve() if heldout else None,  # relative to the gate file
        allow=Allowances(tuple(allow)),
        max_rounds=rounds,
        judge_model=str(data["judge_model"]) if data.get("judge_model") else None,
        unsandboxed=bool(data.get("unsandboxed", False)),
    )


# what Claude Code (2.1.197) takes, in the stderr of an exit 2 with nothing on stdout, for a hook script
# gone missing: it then lets the agent stop instead of blocking
_MISSING_SCRIPT = re.compile(r"no such file(?: or directory)?|can't open", re.IGNORECASE)


def as_block(error: HilbertError | OSError) -> UserError:
    """`error` as the hook's one line, worded so that Claude Code takes its exit 2 for the block it is."""
    if isinstance(error, OSError):
        text = f"{error.strerror or error}" + (f": {error.filename}" if error.filename else "")
    else:
        text = str(error)
    reworded = _MISSING_SCRIPT.sub(lambda m: "cannot open" if "open" in m[0] else "not found", text)
    return UserError(reworded)


def read_hook_input(text: str) -> HookInput:
    hint = "the hook expects the Stop hook's JSON on stdin: {session_id, cwd, stop_hook_active, ...}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"the hook input is not JSON: {error}", hint=hint) from None
    if not isinstance(data, dict) or not isinstance(data.get("cwd"), str):
        raise UserError("the hook input has no `cwd`", hint=hint)
    transcript = data.get("transcript_path")
    return HookInput(
        str(data.get("session_id") or "default"),
        Path(data["cwd"]),
        data.get("stop_hook_active") is True,
        Path(transcript) if isinstance(transcript, str) and transcript else None,
    )


CONTEXT_VERSIONS = frozenset({"2.1.197"})  # Claude Code versions verified to go on after additionalContext


def claude_code_version(transcript: Path | None, lines: int = 200) -> str | None:
    """The Claude Code version its session transcript names (a line with `sessionId` and `version`)."""
    if transcript is None:
        return None
    try:
        with transcript.open(errors="replace") as file:
            for _, line in zip(range(lines), file, strict=False):
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if (
                        isinstance(entry, dict)
                        and "sessionId" in entry
                        and isinstance(entry.get("version"), str)
                    ):
                        return str(entry["version"])
    except OSError:
        return None
    return None


def send_back(hook: HookInput, reason: str) -> dict[str, Any]:
    """The hook's output that keeps the agent working with `reason` (see the module docstring)."""
    if claude_code_version(hook.transcript) in CONTEXT_VERSIONS:
        return {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": reason}}
    return {"decision": "block", "reason": reason}


PERSONS_CONFIG = {"GIT_CONFIG_GLOBAL": None, "HOME": os.environ.get("HOME")}  # their ignore rules apply


@dataclass(frozen=True)
class Repository:
    """The agent's repository: its top folder and its git dir."""

    top: Path
    git_dir: Path

    @property
    def args(self) -> tuple[str, str]:
        return f"--git-dir={self.git_dir}", f"--work-tree={self.top}"


def locate(cwd: Path) -> Repository:
    """The repository holding `cwd`: the nearest folder at or above it with a `.git` folder, or a `.git`
    file naming the git dir (`gitdir: PATH`, a linked worktree's)."""
    here = cwd.resolve()
    for folder in (here, *here.parents):
        entry = folder / ".git"
        if entry.is_dir():
            return Repository(folder, entry)
        if entry.is_file():
            named = entry.read_text(errors="replace").strip()
            if named.startswith("gitdir:"):
                return Repository(folder, (folder / named.removeprefix("gitdir:").strip()).resolve())
    raise UserError(f"{cwd} is not in a git repository", hint="the hook gates work in a git repository")


async def neutral(git: Git, repo: Repository) -> Git:
    """`git` with every filter driver switched off (clean, smudge and process empty, not required)
    that `repo`'s configuration or the person's own global one names (the snapshot reads the latter
    for its ignore rules): they would run as the hook's git adds or archives files. A driver whose name
    a `-c` cannot carry (an `=` in it) is refused."""
    listed = await git.run(
        "--git-dir", repo.git_dir, "config", "--name-only", "--get-regexp", r"^filter\.",
        check=False, extra_env=PERSONS_CONFIG,
    )  # fmt: skip
    names = {
        line[len("filter.") :].rsplit(".", 1)[0] for line in listed.stdout.splitlines() if "." in line[7:]
    }
    if odd := sorted(n for n in names if "=" in n):
        raise UserError(f"the git configuration names a filter driver the hook cannot switch off: {odd[0]!r}")
    off = (f"filter.{n}.{key}=" for n in sorted(names) for key in ("clean", "smudge", "process"))
    return replace(git, config=(*off, *(f"filter.{n}.required=false" for n in sorted(names))))


async def snapshot(repo: Repository, git: Git, scratch: Path) -> str:
    """A commit of everything in `repo`'s work tree (untracked files included; ignored ones not, by
    the person's own ignore rules too) on top of HEAD, or parentless in a repository without commits —
    made through a private index, so no ref, index or file of the agent's changes."""
    own = {"GIT_INDEX_FILE": str(scratch / "snapshot-index"), **PERSONS_CONFIG}
    head = await _head(repo, git)
    await git.run(*repo.args, "read-tree", *(["HEAD"] if head else ["--empty"]), cwd=repo.top, extra_env=own)
    await git.run(*repo.args, "add", "-A", cwd=repo.top, extra_env=own)
    tree = (await git.run(*repo.args, "write-tree", cwd=repo.top, extra_env=own)).stdout.strip()
    message = b"hilbert: snapshot of the work tree for the stop gate"
    parents = ["-p", head] if head else []
    commit = await git.run(*repo.args, "commit-tree", tree, *parents, cwd=repo.top, stdin=message)
    return commit.stdout.strip()


async def _head(repo: Repository, git: Git) -> str | None:
    found = await git.run(*repo.args, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    return found.stdout.strip() if found.returncode == 0 else None


async def _base(spec: GateSpec, repo: Repository, git: Git) -> str:
    """The gate file's base, else HEAD, else (no commits yet) an empty commit."""
    if spec.base:
        return spec.base
    if head := await _head(repo, git):
        return head
    empty = (
        await git.run(*repo.args, "hash-object", "-t", "tree", "--stdin", "-w", stdin=b"")
    ).stdout.strip()
    return (await git.run(*repo.args, "commit-tree", empty, stdin=b"hilbert: empty base")).stdout.strip()


async def stop_hook(
    hook: HookInput,
    spec: GateSpec,
    *,
    rounds_file: Path,
    scratch: Path,
    git: Git,
    runner: Runner,
    judge: Model | None = None,
    on_step: Callable[[Step], None] = lambda step: None,
) -> HookAnswer:
    with _sessions(rounds_file) as sessions:
        entry = sessions.get(hook.session_id) if hook.stop_hook_active else None
        used = _count(entry)
        if used >= spec.max_rounds:
            note = f"sent back {used} time(s) already (max_rounds {spec.max_rounds}); stop allowed"
            return HookAnswer(None, None, note)
        repo = locate(hook.cwd)
        git = await neutral(git, repo)
        top = repo.top
        base = str(entry["base"]) if entry else await _base(spec, repo, git)
        sessions[hook.session_id] = {"rounds": used + 1, "base": base}  # counted now: an error is a round
    if spec.heldout is not None and spec.heldout.is_relative_to(top.resolve()):
        raise UserError(f"heldout folder {spec.heldout} is inside the repository", hint="keep it outside")
    head = await snapshot(repo, git, scratch)
    result = await run_gate(
        repo.git_dir,  # the gate's git runs in it: nothing from the work tree steers it
        base,
        head,
        verify=spec.verify,
        scratch=scratch / "gate",
        git=git,
        runner=runner,
        heldout=spec.heldout,
        allow=spec.allow,
        judge=judge,
        task=spec.task,
        on_step=on_step,
    )
    # the hook's max_rounds counts blocks: the stop after the last one is let through ungated (above),
    # so in the shared decision that is the round that would halt
    decision = await decide_round(
        used + 1,
        spec.max_rounds + 1,
        result,
        commit=head,
        verify=spec.verify,
        template=BLOCK,
        originals=Originals(read=functools.partial(_original, git, repo, base), base=base, root=str(top)),
    )
    if isinstance(decision, Done | Halted):  # passed, or impossible: the agent may stop
        with _sessions(rounds_file) as sessions:
            sessions.pop(hook.session_id, None)
        note = decision.reason if isinstance(decision, Halted) else "the gate passed; stop allowed"
        return HookAnswer(None, result, note)
    return HookAnswer(
        send_back(hook, defang(decision.text)),  # the agent reads it: no envelope in it
        result,
        f"sent back (round {used + 1} of {spec.max_rounds})",
    )


def _count(entry: Mapping[str, Any] | None) -> int:
    try:
        return int(entry["rounds"]) if entry else 0
    except (KeyError, TypeError, ValueError):
        return 0


async def _original(git: Git, repo: Repository, base: str, path: str) -> bytes | None:
    """The bytes of `path` at `base`, None where the base did not have it (for the restore hint)."""
    found = await git.run(*repo.args, "cat-file", "blob", f"{base}:{path}", check=False)
    return found.raw if found.returncode == 0 else None


@contextlib.contextmanager
def _sessions(path: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """The per-session state (rounds, base) in `path`, under an exclusive lock; written back on exit."""
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        sessions = {
            str(k): v for k, v in (data.items() if isinstance(data, dict) else []) if isinstance(v, dict)
        }
        yield sessions
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
            json.dump(sessions, out)
        Path(out.name).replace(path)


__all__ = [
    "GateSpec",
    "HookAnswer",
    "HookInput",
    "Repository",
    "as_block",
    "locate",
    "neutral",
    "read_gate_spec",
    "read_hook_input",
    "snapshot",
    "stop_hook",
]
