"""Confinement of every path an agent names to its workspace.

A path is resolved against the workspace root, following symlinks; if the result is not inside the
root, the call is refused with a `ToolRefused` that the loop returns to the model as a tool error.
This is the tools' own check; the sandbox (a later issue) enforces the same for shell commands.
"""

from __future__ import annotations

from pathlib import Path


class ToolRefused(Exception):
    """A tool call that cannot run as asked; the message goes back to the model as a tool error."""


def confine(root: Path, path: str) -> Path:
    """Resolve `path` (relative to the workspace, or absolute inside it) and refuse anything that
    leads outside the workspace, whether by `..`, an absolute path or a symlink."""
    if not path or "\x00" in path:
        raise ToolRefused("empty or invalid path")
    root = root.resolve()
    candidate = Path(path)
    joined = candidate if candidate.is_absolute() else root / candidate
    try:
        resolved = joined.resolve()
    except (RuntimeError, OSError) as loop:  # a symlink loop, or a name the OS refuses
        raise ToolRefused(f"refused: {path!r} cannot be resolved ({loop})") from None
    if resolved != root and not resolved.is_relative_to(root):
        how = "a symlink that leads" if _has_symlink_escape(root, joined) else "a path"
        raise ToolRefused(
            f"refused: {path!r} is {how} outside the workspace; use paths relative to the workspace root"
        )
    return resolved


def _has_symlink_escape(root: Path, joined: Path) -> bool:
    """True when the lexical path stays inside `root` but a symlink on the way points outside."""
    try:
        lexical = Path(*joined.parts)
        return lexical.is_relative_to(root) and ".." not in lexical.parts
    except ValueError:
        return False


def relative(root: Path, path: Path) -> str:
    """The workspace-relative spelling of a confined path, for messages to the model."""
    return path.relative_to(root.resolve()).as_posix() or "."
