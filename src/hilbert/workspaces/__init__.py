"""Workspaces: the only code in hilbert that runs git.

`Workspaces(root, repo)` gives each worker an isolated checkout (`Checkout`): its own work tree, its own
git dir outside it, objects borrowed read-only from a per-base snapshot. See `workspaces` for the layout,
`snapshot` for the object store and `git` for how git is run.
"""

from hilbert.workspaces.git import Git, GitResult
from hilbert.workspaces.workspaces import Checkout, Workspaces

__all__ = ["Checkout", "Git", "GitResult", "Workspaces"]
