"""Which files a glob names, for the agent's `list_files` and `grep` tools (`hilbert.agent.tools`).

`glob_matcher(glob)` follows ripgrep's rules (those of `.gitignore`), the ones models are trained on:
a glob without `/` matches a file's name at any depth, so `*.py` finds `src/pkg/mod.py`; a glob with
`/` is anchored; `**` spans folders. It matches relative `/`-separated paths and touches no file.
`walk(folder)` lists the files under an open folder for it to match, pruning `SKIP_DIRS` (git's and
hilbert's folders, virtual environments, caches) as it goes rather than listing them and filtering
afterwards, and never entering a symlinked folder (each folder opened from its parent's descriptor with
`O_NOFOLLOW`, so one swapped for a link meanwhile is not entered). Whether a symlinked file leads to a
file inside the workspace is the caller's check (`ToolBox._matching`, which opens it beneath the root).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

SKIP_DIRS = frozenset({".git", ".hilbert", "__pycache__", ".venv", "node_modules"})


def glob_matcher(glob: str) -> Callable[[str], bool]:
    """Whether a `/`-separated relative path matches `glob`, by ripgrep's (and .gitignore's) rules: a
    glob without `/` matches a file's name at any depth (`*.py`); one with `/` is anchored (`src/*.py`);
    `**` spans any number of folders (`src/**/test_*.py`), a trailing `/` means everything below;
    `*` and `?` stay within one name, `[abc]`/`[!abc]` are one character, `{py,pyi}` either, `\\` quotes."""
    if glob.endswith("/"):
        glob += "**"
    if "/" not in glob:
        glob = "**/" + glob
    regex, i, in_braces = [], 0, False
    while i < len(glob):
        char = glob[i]
        at_start = i == 0 or glob[i - 1] == "/"
        if glob.startswith("**", i) and at_start and glob[i + 2 : i + 3] in ("", "/"):
            regex.append(".*" if i + 2 == len(glob) else "(?:.*/)?")
            i += 3
            continue
        if char == "*":
            regex.append("[^/]*")
        elif char == "?":
            regex.append("[^/]")
        elif char == "[" and (end := _class_end(glob, i)) > 0:
            body = glob[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            parts = [c if c == "-" and 0 < k < len(body) - 1 else re.escape(c) for k, c in enumerate(body)]
            regex.append(f"[{'^/' if negate else ''}{''.join(parts)}]")
            i = end
        elif char == "{" and not in_braces and "}" in glob[i:]:
            regex.append("(?:")
            in_braces = True
        elif char == "," and in_braces:
            regex.append("|")
        elif char == "}" and in_braces:
            regex.append(")")
            in_braces = False
        elif char == "\\" and i + 1 < len(glob):
            i += 1
            regex.append(re.escape(glob[i]))
        else:
            regex.append(re.escape(char))
        i += 1
    compiled = re.compile("".join(regex), re.DOTALL)
    return lambda path: compiled.fullmatch(path) is not None


def _class_end(glob: str, start: int) -> int:
    """The index of the `]` closing the character class opened at `start`, or -1 (then `[` is literal)."""
    i = start + 1
    if glob[i : i + 1] in ("!", "^"):
        i += 1
    if glob[i : i + 1] == "]":  # a `]` first in the class is one of its characters
        i += 1
    end = glob.find("]", i)
    return -1 if end < 0 or "/" in glob[start:end] else end


def walk(folder: int) -> Iterator[str]:
    """Every file and every symlink (unfollowed: the caller decides) under the open folder `folder`, as
    `/`-separated paths relative to it, without entering symlinked folders or `SKIP_DIRS`; a folder
    that cannot be read is passed over. Each folder is opened relative to its parent's descriptor with
    `O_NOFOLLOW`, so a folder swapped for a symlink meanwhile is not entered either; at most one
    descriptor per level is open at a time."""
    first = os.dup(folder)
    stack = [("", first, _entries(first))]
    try:
        while stack:
            prefix, fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(fd)
                stack.pop()
                continue
            name, is_dir, is_file = entry
            if is_dir:
                if name in SKIP_DIRS:
                    continue
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                stack.append((f"{prefix}{name}/", child, _entries(child)))
            elif is_file:
                yield prefix + name
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def _entries(folder: int) -> Iterator[tuple[str, bool, bool]]:
    """(name, a folder?, a file or symlink?) for each entry of the open `folder`; none if unreadable."""
    try:
        with os.scandir(folder) as listing:
            found = [
                (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False) or e.is_symlink())
                for e in listing
            ]
    except OSError:
        found = []
    return iter(found)
