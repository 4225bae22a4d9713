"""The harness's rules for a worker's shell command, checked before it runs, whatever the model decided.

`check_shell(command, workspace)` reads the command as the shell would split it (simple commands
joined by `;`, `&&`, `||`, `|`, `&`; redirections) and refuses, with a rule name and a reason the model
reads as a tool error:

- `outside_workspace`: a command that writes, moves or deletes (`rm`, `mv`, `cp`, `chmod`, `ln`,
  `tee`, `>` ...) names a path outside the workspace, or any command names one under another folder
  the worker must not read (absolute paths outside the workspace and the system's own folders); a
  device other than the harmless ones (`/dev/null`, `/dev/urandom`, `/dev/fd/N` ...) is outside;
- `git_internals`: `git config`, `core.hooksPath`, `.git/hooks`, `.git/config`; configuration set for
  one git command that hides its verb (`-c alias.*`: refused, never resolved) or makes git run a program
  or read elsewhere (`core.fsmonitor`, `core.worktree`, `include.path`, `includeIf.*.path`); a global
  git option this policy does not know;
- `git_refs`: `git push` (force or not: workers never push; the merge queue lands work), and ref
  changes (`update-ref`, `symbolic-ref`, `branch -f/-D/-M`, `tag -d`);
- `network`: `curl`, `wget`, `nc`, `ssh`, `scp`, ... (there is no network by default), and bash's
  `/dev/tcp/` and `/dev/udp/` anywhere in the command's text (a quoted mention too: better a false
  refusal than a connection).

git is read as git reads it (`hilbert.security.git_grammar`): global options and their values come
before the verb (`git -c k=v -C dir push` pushes); config keys compare as git compares them (section
and name case-insensitive, `Core.HooksPath` is `core.hooksPath`; the subsection case-sensitive); git
is a writer, so every path it is pointed at (`-C`, `--git-dir`, `--work-tree`, `--exec-path`, `GIT_DIR=`
and git's other path variables) and every path argument of its verb (after `--`, or looking like one,
`--output=PATH` included) must lie inside the workspace, relative ones resolved from where the `-C`s
lead.

This is the legible layer: it says no, and why, in the log. The guarantee is the sandbox's
(`hilbert.security.sandbox`): a command that slips past this parser (built at run time, in a script)
still cannot write outside the workspace or reach the network.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hilbert.security.git_grammar import GitCommand, read_git

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
DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
)
NETWORK_DEVICES = re.compile(r"/dev/(?:tcp|udp)/")
# Configuration a worker may not set for one git command, as `ConfigKey.matches` reads a pattern.
DENIED_CONFIG = {
    "alias.*": "an alias set for one command hides the verb git runs",
    "core.hooksPath": "core.hooksPath is not a worker's to set",
    "core.fsmonitor": "core.fsmonitor makes git run a program",
    "core.worktree": "core.worktree points git at another work tree",
    "include.path": "an included configuration file is not a worker's to choose",
    "includeIf.*.path": "an included configuration file is not a worker's to choose",
}
# A git verb's options whose value is a text, not a path (`commit -m`, `grep -e`, `log --grep`).
TEXT_OPTIONS = frozenset({"-m", "--message", "-e", "--grep", "--author", "--committer", "-S", "-G"})
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
    if NETWORK_DEVICES.search(command):
        return Refusal("network", "bash's /dev/tcp and /dev/udp open connections; workers have no network")
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
    environment: dict[str, str] = {}
    while args and (("=" in args[0] and not args[0].startswith("-")) or args[0] in WRAPPERS):
        name, equals, value = args[0].partition("=")
        if equals:
            environment[name] = value
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
        return _check_git(read_git(args[1:], environment, root), root)
    if ".git/hooks" in text or ".git/config" in text or "core.hookspath" in text.lower():
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


def _check_git(git: GitCommand, root: Path) -> Refusal | None:
    if git.unknown:
        return Refusal("git_internals", f"`git {git.unknown[0]}` is not an option this policy knows")
    for key in git.config:
        for pattern, why in DENIED_CONFIG.items():
            if key.matches(pattern):
                return Refusal("git_internals", f"{why} (`{key}`)")
    for where, path in git.paths:
        if not _within(path, root):
            return Refusal("outside_workspace", f"`{where}` points git at {path}, outside your workspace")
    verb = git.verb
    options = [a for a in git.arguments if a.startswith("-")]
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
    for word in _git_paths(git.arguments):
        if not _inside(word, root, git.cwd):
            return Refusal("outside_workspace", f"`git {verb}` names {word}, outside your workspace")
    return None


def _git_paths(arguments: tuple[str, ...]) -> list[str]:
    """The words of a git verb's arguments that name paths: every word after `--`, and before it the
    words and `--option=` values that look like one (a commit message or a pattern is not one)."""
    paths: list[str] = []
    words = iter(arguments)
    for word in words:
        if word == "--":
            paths.extend(words)
        elif word in TEXT_OPTIONS:
            next(words, None)
        elif word.startswith("--") and "=" in word:
            option, _, value = word.partition("=")
            if option not in TEXT_OPTIONS and _looks_like_path(value):
                paths.append(value)
        elif _looks_like_path(word):
            paths.append(word)
    return paths


def _looks_like_path(word: str) -> bool:
    return word.startswith(("/", "~")) or word == ".." or word.startswith("../") or "/../" in word


def _inside(word: str, root: Path, cwd: Path | None = None) -> bool:
    """Whether `word`, a path relative to `cwd` (default `root`), lies in `root`; the harmless
    devices (`/dev/null`, `2>&1`) count as inside, no other device does."""
    if word in DEVICES or word.startswith(("/dev/fd/", "&")):
        return True
    path = Path(word).expanduser()
    return _within(path if path.is_absolute() else (cwd or root) / path, root)


def _within(path: Path, root: Path) -> bool:
    resolved = path.resolve()
    return resolved == root or resolved.is_relative_to(root)


def _system(word: str) -> bool:
    resolved = str(Path(word).expanduser().resolve())
    return resolved.startswith(SYSTEM)


__all__ = ["Refusal", "check_shell"]
