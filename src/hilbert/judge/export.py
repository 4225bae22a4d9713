"""The gate's export of a commit: `export_commit` writes the committed tree from its raw blobs, so no
`.gitattributes`, filter driver or replace ref can change what the checks run on. It lives with the
code that runs git (`hilbert.workspaces.export`, which `Workspaces.export` uses too: workspaces must
not import the judge); the judge names it here."""

from hilbert.workspaces.export import export_commit

__all__ = ["export_commit"]
