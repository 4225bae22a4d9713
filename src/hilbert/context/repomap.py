"""The repository map: what a fleet's agents are told about the repository before they read a file.

`repository_map(repo, commit, tokenizer=..., git=..., budget=...)` lists the files tracked at `commit`
and, for Python files, their top-level `class` and `def` names (with the methods of each top-level
class, one level down), as one text of at most `budget` tokens by `tokenizer`'s count. It reads only
what git stored at `commit` (`ls-tree`, then `cat-file --batch` for the Python blobs, one process per
few hundred files), never a work tree, so the same commit always gives the same text: the fleet puts
it in every worker's system prompt (`hilbert.agent.prompts.system_prompt`), the prefix a provider's
prompt cache shares between them.

Layout: a header naming the commit; the paths, grouped by folder (sorted), capped so that definitions
have room (`PATH_SHARE` of the budget when there is Python to describe), with "(+N more files ...)"
when some are left out; then the definitions file by file in path order while they fit, and a line
naming what was left out. A Python file that does not parse, is not UTF-8 or is over
`MAX_BLOB_BYTES` is named with the reason instead of its definitions; nothing in the repository makes
the map fail. A path with control characters is shown quoted (one path, one line); one named like a
message's envelope is shown as it is, and the agent loop defangs the prompt it is part of
(`hilbert.agent.defanging`).
"""

from __future__ import annotations

import ast
import json
import secrets
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hilbert.context.tokens import Tokenizer
from hilbert.errors import UserError
from hilbert.settings import MIN_REPOSITORY_MAP_TOKENS
from hilbert.workspaces import Git

MAX_BLOB_BYTES = 200_000  # a Python file larger than this is named, not parsed
PATH_SHARE = 0.6  # of the budget, the most the paths may take when there are definitions to add
MIN_BUDGET = MIN_REPOSITORY_MAP_TOKENS  # tokens: the header and the notes need about half of it
NOTE_RESERVE = 60  # tokens kept back for the lines that say what was left out
BATCH = 256  # Python blobs read per `git cat-file` process
PYTHON = (".py", ".pyi")
_REGULAR = ("100644", "100755")  # file modes git stores content for (not links, not submodules)
DEFINITIONS_TITLE = "Definitions (Python; public top-level classes {their public methods} and functions):"
FOLDER_NAMES = 12  # names per folder line when the whole list does not fit


@dataclass(frozen=True)
class _File:
    """One tracked path at the commit."""

    path: str
    mode: str
    oid: str
    size: int | None  # None for a submodule

    @property
    def python(self) -> bool:
        return self.mode in _REGULAR and self.path.endswith(PYTHON)


@dataclass(frozen=True)
class _Map:
    """What the map holds, before it is written out: enough to say what was left out."""

    header: str
    files: int  # tracked
    folders: tuple[tuple[str, int], ...]  # (line, files on it), in order
    python: tuple[str, ...]  # every Python path, in order
    definitions: tuple[tuple[int, str], ...]  # (index into `python`, line)
    next_python: int  # the first Python file not described (len(python) when all were)

    def text(self, budget: int) -> str:
        listed = sum(count for _, count in self.folders)
        lines = [self.header, *(line for line, _ in self.folders)]
        if listed < self.files:
            lines.append(
                f"(+{self.files - listed} more files not listed, to keep the map within {budget} tokens)"
            )
        if self.definitions:
            lines += ["", DEFINITIONS_TITLE]
            lines += [line for _, line in self.definitions]
        if self.next_python < len(self.python):
            left, first = len(self.python) - self.next_python, self.python[self.next_python]
            start = f", from {first} on" if len(first) <= 80 else ""  # a long path could overrun the reserve
            lines.append(
                f"(definitions of {left} more Python files{start}, "
                f"left out to keep the map within {budget} tokens)"
            )
        return "\n".join(lines)


async def repository_map(
    repo: Path, commit: str, *, tokenizer: Tokenizer, git: Git, budget: int = 1500
) -> str:
    """The map of the files tracked at `commit` in `repo` (a bare repository or one with a work
    tree), at most `budget` tokens by `tokenizer`'s count. A `RunError` when `commit` is not a
    commit of `repo`; a `UserError` for a budget too small to say anything."""
    if budget < MIN_BUDGET:
        raise UserError(
            f"a repository map of {budget} tokens is too small to hold anything",
            hint=f"give it at least {MIN_BUDGET} tokens, or 0 to leave the map out",
        )
    full = (await git.run("-C", repo, "rev-parse", "--verify", f"{commit}^{{commit}}")).stdout.strip()
    listing = await git.run("-C", repo, "ls-tree", "-r", "-l", "-z", "--full-tree", full)
    files = sorted(_parse_listing(listing.stdout), key=lambda f: f.path)
    short = full[:12]
    if not files:
        return f"Repository map of commit {short}: no files are tracked at this commit."
    header = f"Repository map of commit {short} ({len(files)} files tracked; folder: files):"
    python = [f for f in files if f.python]
    spent = _cost(tokenizer, header) + NOTE_RESERVE
    folders = _fit_folders(files, tokenizer, int(budget * PATH_SHARE) if python else budget, spent)
    spent += sum(_cost(tokenizer, line) for line, _ in folders) + _cost(tokenizer, DEFINITIONS_TITLE) + 1
    definitions: list[tuple[int, str]] = []
    index = 0
    while index < len(python):
        batch = python[index : index + BATCH]
        texts = await _read_blobs(
            git, repo, [f for f in batch if f.size is not None and f.size <= MAX_BLOB_BYTES]
        )
        full_up = False
        for file in batch:
            line = _describe(file, texts.get(file.oid))
            if line is not None:
                cost = _cost(tokenizer, line)
                if spent + cost > budget:
                    full_up = True
                    break
                spent += cost
                definitions.append((index, line))
            index += 1
        if full_up:
            break
    shape = _Map(
        header, len(files), tuple(folders), tuple(_shown(f.path) for f in python), tuple(definitions), index
    )
    return _within(shape, tokenizer, budget)


def _within(shape: _Map, tokenizer: Tokenizer, budget: int) -> str:
    """`shape`'s text, with its last lines dropped while the whole text's count is over `budget` (the
    line-by-line sums above are close to the whole's count, not always equal)."""
    text = shape.text(budget)
    while tokenizer.count(text) > budget and (shape.definitions or shape.folders):
        if shape.definitions:
            *kept, (dropped, _) = shape.definitions
            shape = _Map(shape.header, shape.files, shape.folders, shape.python, tuple(kept), dropped)
        else:
            shape = _Map(shape.header, shape.files, shape.folders[:-1], shape.python, (), shape.next_python)
        text = shape.text(budget)
    return text


def _cost(tokenizer: Tokenizer, line: str) -> int:
    return tokenizer.count(line) + 1  # and its newline


def _parse_listing(output: str) -> list[_File]:
    """`git ls-tree -r -l -z`: `<mode> <type> <oid> <size>\\t<path>` records, NUL-terminated."""
    files = []
    for record in output.split("\0"):
        meta, tab, path = record.partition("\t")
        if not tab:
            continue
        mode, _, oid, size = meta.split()
        files.append(_File(path, mode, oid, int(size) if size.isdigit() else None))
    return files


def _shown(path: str) -> str:
    """`path` as written in the map: quoted when it holds a control character (a newline would
    otherwise start a line of its own)."""
    return path if path.isprintable() else json.dumps(path)


def _fit_folders(files: Sequence[_File], tokenizer: Tokenizer, cap: int, spent: int) -> list[tuple[str, int]]:
    """One line per folder (`folder/: a.py, b.py`; the top level is `./`), in order, while the lines
    fit under `cap` tokens with `spent` already used. When not all fit, each folder line names at
    most `FOLDER_NAMES` files, so more folders fit."""
    folders: dict[str, list[str]] = {}
    for file in files:
        posix = PurePosixPath(file.path)
        folder = "./" if str(posix.parent) == "." else f"{posix.parent}/"
        folders.setdefault(_shown(folder), []).append(_shown(posix.name))
    fitted: list[tuple[str, int]] = []
    for per_folder in (None, FOLDER_NAMES):
        fitted, used = [], spent
        for folder in sorted(folders):
            names = folders[folder][:per_folder]
            more = len(folders[folder]) - len(names)
            line = f"{folder}: {', '.join(names)}" + (f" (+{more} more)" if more else "")
            used += _cost(tokenizer, line)
            if used > cap:
                break
            fitted.append((line, len(names)))
        if len(fitted) == len(folders):
            break
    return fitted


async def _read_blobs(git: Git, repo: Path, files: Sequence[_File]) -> dict[str, str | None]:
    """The text of each file's blob (by object id), from one `git cat-file --batch`; None for a blob
    that is not UTF-8 text. Each blob is preceded by a line starting with a fresh random marker, so
    blobs are told apart by text (git's sizes are in bytes, the text is decoded)."""
    if not files:
        return {}
    marker = f"hilbert-{secrets.token_hex(16)}"
    found = await git.run(
        "-C",
        repo,
        "cat-file",
        f"--batch={marker} %(objectname) %(objectsize)",
        stdin="".join(f"{f.oid}\n" for f in files).encode(),
    )
    texts: dict[str, str | None] = {}
    for chunk in found.stdout.split(marker + " ")[1:]:
        head, _, rest = chunk.partition("\n")
        oid, _, size = head.partition(" ")
        content = rest[:-1] if rest.endswith("\n") else rest
        whole = size.isdigit() and len(content.encode()) == int(size)
        texts[oid] = content if whole and "\0" not in content else None
    return texts


def _describe(file: _File, text: str | None) -> str | None:
    """The definitions line of a Python file, a line saying why it has none that could be read, or
    None for a file that defines nothing at top level."""
    path = _shown(file.path)
    if file.size is None or file.size > MAX_BLOB_BYTES:
        return f"{path}: (not read: over {MAX_BLOB_BYTES // 1000} KB)"
    if text is None:
        return f"{path}: (not read: not UTF-8 text)"
    try:
        with warnings.catch_warnings():  # invalid escapes and the like: the file's business, not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=file.path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"{path}: (does not parse at this commit)"
    items = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            if node.name.startswith("_"):
                continue
            methods = [
                m.name
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and not m.name.startswith("_")
            ]
            items.append(f"class {node.name}" + (f" {{{', '.join(methods)}}}" if methods else ""))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            items.append(f"def {node.name}")
    return f"{path}: {'; '.join(items)}" if items else None


__all__ = ["MAX_BLOB_BYTES", "MIN_BUDGET", "repository_map"]
