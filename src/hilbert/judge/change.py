"""What a commit changed, and the records the integrity checks take and give.

`Change` holds, per changed file, its path, status and the old and new text (None where the side is
absent or binary), plus the text of every Python test file at the head, so that a check can ask "which
values do the tests expect?" of tests the change did not touch. Build one from git
(`change_between`, through `hilbert.workspaces.git.Git`) or from two directory trees
(`change_between_trees`). `Finding` and `Allowances` are the checks' output and their one knob.
Path classification (`is_test_path`) lives here too, as every check shares it. No check logic here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import fnmatch
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from hilbert.workspaces.git import Git

Status = Literal["added", "modified", "deleted", "renamed"]
TEST_FOLDERS = frozenset({"tests", "test", "testing"})
_GIT_STATUS: dict[str, Status] = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "T": "modified",
}


@dataclass(frozen=True)
class FileChange:
    """One changed file: `old_text`/`new_text` are None for an absent side or a binary file."""

    path: str
    status: Status
    old_text: str | None
    new_text: str | None
    old_path: str | None = None
    gitlink: bool = False  # the new side is a gitlink (mode 160000: a submodule or nested repository)

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")


@dataclass(frozen=True)
class Change:
    """Every file a commit changed; `head_tests`: (path, text) of each Python test file at the head;
    `project_modules`: the top-level importable names of the project's own code at the head."""

    files: tuple[FileChange, ...]
    head_tests: tuple[tuple[str, str], ...] = ()
    project_modules: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Finding:
    """One integrity finding: which check, where, and what it saw, in one line. `blocking`: the
    finding alone fails the integrity step; an advisory one (False) is only shown to the judge model
    and the panel, and its text says so. `covered`: what it flags is something the gate's own test
    runs make powerless when they gather pytest's outcomes (the base's configuration imposed, the
    candidate's conftests removed once, every base test required to run): the gate then makes it
    advisory (`uncovered_only`), and keeps it blocking for a verify that starts no pytest."""

    check: str
    path: str
    line: int | None
    message: str
    blocking: bool = True
    covered: bool = False

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        mark = "" if self.blocking else " (advisory)"
        return f"[{self.check}]{mark} {where}: {self.message}"


def covered_advisory(findings: list[Finding]) -> list[Finding]:
    """`findings` with each covered one made advisory: for a gate whose runs gathered pytest's outcomes."""
    return [dataclasses.replace(f, blocking=False) if f.covered else f for f in findings]


@dataclass(frozen=True)
class Allowances:
    """Test paths (exact or glob patterns) the task allows a worker to edit."""

    test_edits: tuple[str, ...] = ()

    def allows(self, path: str) -> bool:
        return any(path == pattern or fnmatch.fnmatchcase(path, pattern) for pattern in self.test_edits)


def is_test_path(path: str) -> bool:
    """`tests/`, `test/`, `testing/` folders, `test_*.py`, `*_test.py` and `conftest.py`."""
    pure = PurePosixPath(path)
    name = pure.name
    if any(part in TEST_FOLDERS for part in pure.parts[:-1]):
        return True
    return name == "conftest.py" or (
        name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    )


def project_modules(paths: Iterable[str]) -> frozenset[str]:
    """Top-level module names of the project's own (non-test) Python code; a `src/` layout is looked into."""
    names: set[str] = set()
    for path in paths:
        parts = PurePosixPath(path).parts
        if not path.endswith(".py") or is_test_path(path):
            continue
        if parts[0] == "src" and len(parts) > 1:
            parts = parts[1:]
        top = parts[0].removesuffix(".py")
        if top.isidentifier() and top not in ("setup", "noxfile", "conftest", "docs"):
            names.add(top)
    return frozenset(names)


def added_lines(old: str | None, new: str | None) -> list[tuple[int, str]]:
    """(1-based line number in `new`, text) of every line the change added."""
    if new is None:
        return []
    old_lines = (old or "").splitlines()
    new_lines = new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    added: list[tuple[int, str]] = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added += [(j + 1, new_lines[j]) for j in range(j1, j2)]
    return added


def new_occurrences(fc: FileChange, old: Counter[str], new: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (key, line) occurrences in `new` beyond what `old` counted, preferring those on lines the
    change added: what a file newly does, however much of it the file did before."""
    added = {line for line, _text in added_lines(fc.old_text, fc.new_text)}
    counts = Counter(key for key, _line in new)
    extra: list[tuple[str, int]] = []
    for key, count in counts.items():
        surplus = count - old[key]
        if surplus > 0:
            found = [(k, line) for k, line in new if k == key]
            found.sort(key=lambda item: item[1] not in added)
            extra += found[:surplus]
    return sorted(extra, key=lambda item: item[1])


def decode(data: bytes) -> str | None:
    """Text of a file, or None when it looks binary."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def change_between(repo: Path, base: str, head: str, git: Git) -> Change:
    """What `head` changed relative to `base` in the repository at `repo` (renames detected; a
    gitlink is a change like any other, flagged `gitlink`)."""
    # `diff-tree`, not `diff`: two trees, no work tree, and gitlinks listed although the harness's git
    # says diff.ignoreSubmodules=all (which only porcelain `diff` honours)
    listing = await git.run("diff-tree", "-r", "--raw", "-z", "-M", base, head, "--", cwd=repo)
    fields = [f for f in listing.stdout.split("\0") if f]
    files: list[FileChange] = []
    i = 0
    while i < len(fields):
        new_mode, code = fields[i].split(" ")[1], fields[i].split(" ")[4][0]
        status = _GIT_STATUS.get(code, "modified")
        if code in ("R", "C"):
            old_path, path = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old_path, path = fields[i + 1], fields[i + 1]
            i += 2
        if code == "C":
            status = "added"
        old_text = None if status == "added" else await _blob(repo, base, old_path, git)
        new_text = None if status == "deleted" else await _blob(repo, head, path, git)
        renamed = old_path if status == "renamed" else None
        files.append(FileChange(path, status, old_text, new_text, renamed, gitlink=new_mode == "160000"))
    tree = await git.run("ls-tree", "-r", "-z", "--name-only", head, cwd=repo)
    paths = [p for p in tree.stdout.split("\0") if p]
    tests = [p for p in paths if p.endswith(".py") and is_test_path(p)]
    texts = await asyncio.gather(*(_blob(repo, head, path, git) for path in tests))
    head_tests = [(path, text) for path, text in zip(tests, texts, strict=True) if text is not None]
    return Change(files=tuple(files), head_tests=tuple(head_tests), project_modules=project_modules(paths))


async def _blob(repo: Path, rev: str, path: str, git: Git) -> str | None:
    result = await git.run("show", f"{rev}:{path}", cwd=repo, check=False)
    text = result.stdout
    if result.returncode != 0:  # a submodule or another entry that is not a file
        return None
    return None if "\0" in text[:8192] or "\ufffd" in text else text


def change_between_trees(old_root: Path, new_root: Path) -> Change:
    """What changed from the tree at `old_root` to the tree at `new_root` (`.git` folders skipped;
    a moved file shows as deleted plus added)."""
    old, new = _read_tree(old_root), _read_tree(new_root)
    files: list[FileChange] = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        status: Status = "added" if before is None else "deleted" if after is None else "modified"
        files.append(
            FileChange(
                path,
                status,
                None if before is None else decode(before),
                None if after is None else decode(after),
            )
        )
    head_tests = tuple(
        (path, text)
        for path, data in sorted(new.items())
        if path.endswith(".py") and is_test_path(path) and (text := decode(data)) is not None
    )
    return Change(files=tuple(files), head_tests=head_tests, project_modules=project_modules(new))


def _read_tree(root: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            full = Path(folder, name)
            if name == ".git":
                continue
            if full.is_file() and not full.is_symlink():
                found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found
