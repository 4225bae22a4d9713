"""The harness's rules for a worker's shell command, checked before it runs, whatever the model decided.

`check_shell(command, workspace)` reads the command as the shell would split it (simple commands
joined by `;`, `&&`, `||`, `|`, `&`; redirections) and refuses, with a rule name and a reason the model
reads as a tool error:

- `outside_workspace`: a command that writes, moves or deletes (`rm`, `mv`, `cp`, `chmod`, `ln`,
  `tee`, `>` ...) names a path outside the workspace, or any command names one under another folder
  the worker must not read (absolute paths outside the workspace and the system's own folders);
- `git_internals`: `git config`, `core.hooksPath`, `.git/hooks`, `.git/config`;
- `git_refs`: `git push` (force or not: workers never push; the merge queue lands work), and ref
  changes (`update-ref`, `symbolic-ref`, `branch -f/-D/-M`, `tag -d`);
- `network`: `curl`, `wget`, `nc`, `ssh`, `scp`, ... (there is no network by default).

This is the legible layer: it says no, and why, in the log. The guarantee is the sandbox's
(`hilbert.security.sandbox`): a command that slips past this parser (built at run time, in a script)
still cannot write outside the workspace or reach the network.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

WRITERS = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "chmod",
        "chown",
        "chgrp",
        "ln",
        "tee",
        "truncate",
        "dd",
        "shred",
        "unlink",
        "install",
        "rsync",
        "touch",
        "mkdir",
        "sed",
        "patch",
    }
)
NETWORK = frozenset({"curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "telnet", "ftp", "socat"})
WRAPPERS = frozenset({"sudo", "command", "exec", "nohup", "env", "time", "nice", "xargs", "builtin"})
SYSTEM = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/etc",
    "/opt",
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/proc/self",
)
SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
REDIRECTS = frozenset({">", ">>", "&>", "1>", "2>", ">|"})


@dataclass(frozen=True)
class Refusal:
    rule: str
    why: str

    def __str__(self) -> str:
        return f"refused by policy ({self.rule}): {self.why}"


def check_shell(command: str, workspace: Path) -> Refusal | None:
    """Why `command` may not run in `workspace`, or None."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None  # unbalanced quotes: bash will refuse it itself
    root = workspace.resolve()
    for simple in _simple_commands(words):
        refusal = _check(simple, root)
        if refusal is not None:
            return refusal
    return None


def _simple_commands(words: list[str]) -> list[list[str]]:
    commands: list[list[str]] = []
    current: list[str] = []
    for word in words:
        if word in SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(word)
    if current:
        commands.append(current)
    return commands


def _check(words: list[str], root: Path) -> Refusal | None:
    redirected = [words[i + 1] for i, w in enumerate(words[:-1]) if w in REDIRECTS or w.endswith(">")]
    args = [w for i, w in enumerate(words) if w not in REDIRECTS and not (i and words[i - 1] in REDIRECTS)]
    while args and (("=" in args[0] and not args[0].startswith("-")) or args[0] in WRAPPERS):
        args = args[1:]  # VAR=value, sudo, env ...: the command is what follows
    for target in redirected:
        if not _inside(target, root):
            return Refusal("outside_workspace", f"it writes to {target}, outside your workspace")
    if not args:
        return None
    program = PurePosixPath(args[0]).name
    text = " ".join(args)
    if program in NETWORK:
        return Refusal("network", f"`{program}` reaches the network; workers have none")
    if program == "git":
        return _check_git(args[1:])
    if ".git/hooks" in text or ".git/config" in text or "core.hooksPath" in text:
        return Refusal("git_internals", "git hooks and configuration are not a worker's to touch")
    for word in args[1:]:
        if _looks_like_path(word) and not _inside(word, root):
            if program in WRITERS:
                return Refusal(
                    "outside_workspace", f"`{program}` would change {word}, outside your workspace"
                )
            if not _system(word):
                return Refusal("outside_workspace", f"{word} is outside your workspace")
    return None


def _check_git(args: list[str]) -> Refusal | None:
    options = [a for a in args if a.startswith("-")]
    if any("hooksPath" in a or "core.hooks" in a for a in args):
        return Refusal("git_internals", "core.hooksPath is not a worker's to set")
    verb = _git_verb(args)
    if verb == "config":
        return Refusal("git_internals", "git configuration is not a worker's to change")
    if verb == "push":
        return Refusal(
            "git_refs", "workers never push: the harness commits your work and the merge queue lands it"
        )
    if verb in ("update-ref", "symbolic-ref") or (verb == "tag" and "-d" in options):
        return Refusal("git_refs", f"`git {verb}` changes refs outside your branch")
    if verb == "branch" and set(options) & {"-f", "-D", "-M", "--force", "--delete", "--move"}:
        return Refusal("git_refs", "changing or deleting branches is the harness's work")
    return None


GIT_OPTIONS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})


def _git_verb(args: list[str]) -> str:
    """The subcommand of `git ARGS`: the first word that is neither a global option nor its value
    (`git -C . push` pushes)."""
    words = iter(args)
    for word in words:
        if word in GIT_OPTIONS_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def _looks_like_path(word: str) -> bool:
    return word.startswith(("/", "~")) or word == ".." or word.startswith("../") or "/../" in word


def _inside(word: str, root: Path) -> bool:
    if word.startswith("/dev/") or word.startswith("&"):  # /dev/null, 2>&1
        return True
    path = Path(word).expanduser()
    resolved = (path if path.is_absolute() else root / path).resolve()
    return resolved == root or resolved.is_relative_to(root)


def _system(word: str) -> bool:
    resolved = str(Path(word).expanduser().resolve())
    return resolved.startswith(SYSTEM)


__all__ = ["Refusal", "check_shell"]
