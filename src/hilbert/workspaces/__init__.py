"""Workspaces: the only code in hilbert that runs git.

`Workspaces(root, repo, strategy="snapshot"|"clone")` gives each worker an isolated checkout
(`Checkout`): its own work tree, its own git dir outside it, objects borrowed read-only from a per-base
snapshot ("snapshot", the default) or a private copy of the base's history ("clone", the portable
fallback, also taken automatically when the snapshot cannot be used). See `workspaces` for the layout
and strategies, `snapshot` for the object store, `git` for how git is run and `export` for a
commit's tree written from its raw blobs (no attribute, filter or replace ref applies).
"""

from hilbert.workspaces.git import Git, GitResult
from hilbert.workspaces.workspaces import Checkout, Workspaces

__all__ = ["Checkout", "Git", "GitResult", "Workspaces"]
