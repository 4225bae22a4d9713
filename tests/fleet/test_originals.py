"""The originals of protected files, copied into a worker's workspace so it can put them back: written as
they were (bytes), and never through anything the worker planted there."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from hilbert.fleet.originals import copy_in, original
from hilbert.workspaces.git import Git


def test_the_originals_are_copied_byte_for_byte_into_a_new_folder(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    files = {"tests/test_a.py": b"def test_a():\n    assert 1\n", "tests/data/blob.bin": bytes(range(256))}
    folder = copy_in(work, files)
    assert folder is not None and folder.startswith(".hilbert/base-")
    for path, data in files.items():
        assert (work / folder / path).read_bytes() == data
    assert copy_in(work, files) != folder  # a second round gets a folder of its own


def test_a_symlink_the_worker_planted_is_not_followed(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / ".hilbert").symlink_to(outside)
    assert copy_in(work, {"tests/test_a.py": b"x"}) is None
    assert list(outside.iterdir()) == []


def test_a_path_that_climbs_out_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert copy_in(work, {"../escape.py": b"x"}) is None
    assert not (tmp_path / "escape.py").exists()


def test_the_original_is_read_from_the_workers_git_and_none_for_an_added_file(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.bin").write_bytes(b"\x00\xff binary \n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    git_dir = repo / ".git"
    assert asyncio.run(original(Git(home=tmp_path), git_dir, "HEAD", "a.bin")) == b"\x00\xff binary \n"
    assert asyncio.run(original(Git(home=tmp_path), git_dir, "HEAD", "new.py")) is None
