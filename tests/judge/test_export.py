"""The gate's export of a commit: the committed tree's bytes, whatever the commit's `.gitattributes`,
the repository's filter drivers or its replace refs would make `git archive` write instead."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import subprocess
import tarfile
from pathlib import Path

from git_support import git
from hilbert.judge.export import export_commit
from hilbert.workspaces.git import Git

ATTRIBUTES = "secret.txt export-ignore\nversion.txt export-subst\nops.py filter=evil\n*.md ident\n"


def steered_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose commit `git archive` exports differently from the committed tree: attributes
    that drop, rewrite and filter files, a filter driver in its config, and a replace ref."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    files = {
        ".gitattributes": ATTRIBUTES,
        "secret.txt": "kept\n",
        "version.txt": "$Format:%H$\n",
        "ops.py": "def scale(x, f):\n    return x + f  # honest\n",
        "notes.md": "$Id$\n",
        "calc/data.txt": "original\n",
        "run.sh": "#!/bin/sh\necho run\n",
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "run.sh").chmod(0o755)
    os.symlink("ops.py", repo / "calc" / "link-in")  # calc/ops.py does not exist: dangling, but inside
    os.symlink("../ops.py", repo / "calc" / "up-link")
    os.symlink("../../outside.txt", repo / "calc" / "out-link")
    os.symlink("/etc/hostname", repo / "abs-link")
    os.symlink("..", repo / "calc" / "parent")
    os.symlink("parent/..", repo / "calc" / "chained")  # its text stays inside; through `parent` it leads out
    git(repo, "add", "-A")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendor/sub")
    git(repo, "commit", "-qm", "base")
    git(repo, "config", "filter.evil.smudge", "sed s/honest/evil/")
    (tmp_path / "forged.txt").write_text("forged\n")
    forged = git(repo, "hash-object", "-w", str(tmp_path / "forged.txt"))
    git(repo, "replace", git(repo, "rev-parse", "HEAD:calc/data.txt"), forged)
    return repo, git(repo, "rev-parse", "HEAD")


def archived(repo: Path, commit: str) -> dict[str, bytes]:
    data = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=repo, check=True, capture_output=True
    )
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_git_archive_is_steered_and_the_export_is_not(tmp_path: Path) -> None:
    repo, commit = steered_repo(tmp_path)
    plain = archived(repo, commit)
    assert "secret.txt" not in plain  # export-ignore
    assert plain["version.txt"] == f"{commit}\n".encode()  # export-subst
    assert b"evil" in plain["ops.py"]  # the filter driver
    assert plain["calc/data.txt"] == b"forged\n"  # the replace ref

    (tmp_path / "home").mkdir()
    dest = asyncio.run(export_commit(Git(home=tmp_path / "home"), repo, commit, tmp_path / "export"))
    assert (dest / "secret.txt").read_text() == "kept\n"
    assert (dest / "version.txt").read_text() == "$Format:%H$\n"
    assert (dest / "ops.py").read_text() == "def scale(x, f):\n    return x + f  # honest\n"
    assert (dest / "notes.md").read_text() == "$Id$\n"
    assert (dest / "calc" / "data.txt").read_text() == "original\n"
    assert (dest / ".gitattributes").read_text() == ATTRIBUTES
    assert stat.S_IMODE((dest / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "ops.py").stat().st_mode) == 0o644
    assert not (dest / "vendor").exists()  # the gitlink is skipped


def test_links_stay_links_only_inside_the_export(tmp_path: Path) -> None:
    repo, commit = steered_repo(tmp_path)
    (tmp_path / "home").mkdir()
    dest = asyncio.run(export_commit(Git(home=tmp_path / "home"), repo, commit, tmp_path / "export"))
    calc = dest / "calc"
    assert os.readlink(calc / "up-link") == "../ops.py" and (calc / "up-link").read_text().endswith(
        "honest\n"
    )
    assert os.readlink(calc / "link-in") == "ops.py"  # dangling, but it could only ever name the export
    assert os.readlink(calc / "parent") == ".."
    for path, text in [
        (calc / "out-link", "../../outside.txt"),
        (dest / "abs-link", "/etc/hostname"),
        (calc / "chained", "parent/.."),
    ]:
        assert not path.is_symlink() and path.read_text() == text, path


def test_a_worker_checkout_is_exported_from_its_own_git_dir(tmp_path: Path) -> None:
    repo, commit = steered_repo(tmp_path)
    (tmp_path / "home").mkdir()
    git_dir = repo / ".git"
    dest = asyncio.run(export_commit(Git(home=tmp_path / "home"), git_dir, commit, tmp_path / "export"))
    assert (dest / "calc" / "data.txt").read_text() == "original\n"
