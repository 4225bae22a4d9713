"""Opening beneath a folder: in-tree symlinks work, nothing leads out — with openat2 and with the walk."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hilbert.security.safe_open import make_dirs_beneath, open_beneath, openat2_works

WAYS = [
    pytest.param(
        True,
        id="openat2",
        marks=pytest.mark.skipif(not openat2_works(), reason="this kernel has no openat2"),
    ),
    pytest.param(False, id="walk"),
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ with sub/b.txt and top.txt; outside/secret.txt beside it."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "b.txt").write_text("in b\n")
    (root / "top.txt").write_text("at the top\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("SECRET\n")
    return root


@pytest.fixture
def root_fd(tree: Path) -> Iterator[int]:
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def read(root_fd: int, path: str, use_openat2: bool) -> str:
    fd = open_beneath(root_fd, path, os.O_RDONLY, use_openat2=use_openat2)
    with os.fdopen(fd) as file:
        return file.read()


def refused(root_fd: int, path: str, use_openat2: bool, flags: int = os.O_RDONLY) -> int:
    with pytest.raises(OSError) as failure:
        os.close(open_beneath(root_fd, path, flags, 0o644, use_openat2=use_openat2))
    return failure.value.errno or 0


@pytest.mark.parametrize("use_openat2", WAYS)
def test_symlinks_that_stay_inside_are_followed(tree: Path, root_fd: int, use_openat2: bool) -> None:
    os.symlink("sub/b.txt", tree / "a")
    os.symlink("../top.txt", tree / "sub" / "up")
    os.symlink("sub", tree / "dirlink")
    os.symlink("a", tree / "chain")
    assert read(root_fd, "a", use_openat2) == "in b\n"
    assert read(root_fd, "sub/up", use_openat2) == "at the top\n"
    assert read(root_fd, "dirlink/b.txt", use_openat2) == "in b\n"
    assert read(root_fd, "chain", use_openat2) == "in b\n"
    assert read(root_fd, "sub/../top.txt", use_openat2) == "at the top\n"


@pytest.mark.parametrize("use_openat2", WAYS)
def test_nothing_leads_outside(tree: Path, root_fd: int, use_openat2: bool) -> None:
    outside = tree.parent / "outside"
    os.symlink(outside / "secret.txt", tree / "absolute")
    os.symlink("../outside/secret.txt", tree / "relative")
    os.symlink(outside, tree / "dir")
    os.symlink("relative", tree / "chain")
    os.symlink("/proc/self/root" + str(outside / "secret.txt"), tree / "magic")
    for path in ("absolute", "relative", "dir/secret.txt", "chain", "magic", "../outside/secret.txt"):
        assert refused(root_fd, path, use_openat2) == errno.EXDEV, path
    assert refused(root_fd, str(outside / "secret.txt"), use_openat2) == errno.EXDEV


@pytest.mark.parametrize("use_openat2", WAYS)
def test_creating_through_a_link_out_creates_nothing_outside(
    tree: Path, root_fd: int, use_openat2: bool
) -> None:
    outside = tree.parent / "outside"
    os.symlink(outside / "new.txt", tree / "dangling")
    os.symlink(outside, tree / "dir")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for path in ("dangling", "dir/new.txt", "dir/secret.txt"):
        assert refused(root_fd, path, use_openat2, flags) == errno.EXDEV
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET\n"


@pytest.mark.parametrize("use_openat2", WAYS)
def test_a_dangling_link_inside_is_created_where_it_points(
    tree: Path, root_fd: int, use_openat2: bool
) -> None:
    os.symlink("sub/made.txt", tree / "later")
    fd = open_beneath(root_fd, "later", os.O_WRONLY | os.O_CREAT, 0o644, use_openat2=use_openat2)
    os.write(fd, b"made\n")
    os.close(fd)
    assert (tree / "sub" / "made.txt").read_text() == "made\n"


@pytest.mark.parametrize("use_openat2", WAYS)
def test_a_symlink_loop_fails_with_eloop(tree: Path, root_fd: int, use_openat2: bool) -> None:
    os.symlink("loop2", tree / "loop1")
    os.symlink("loop1", tree / "loop2")
    assert refused(root_fd, "loop1", use_openat2) == errno.ELOOP


@pytest.mark.parametrize("use_openat2", WAYS)
def test_make_dirs_goes_through_inside_links_and_never_out(
    tree: Path, root_fd: int, use_openat2: bool
) -> None:
    os.symlink("sub", tree / "here")
    os.symlink(tree.parent / "outside", tree / "there")
    os.close(make_dirs_beneath(root_fd, "here/x/y", use_openat2=use_openat2))
    assert (tree / "sub" / "x" / "y").is_dir()
    with pytest.raises(OSError) as failure:
        make_dirs_beneath(root_fd, "there/x/y", use_openat2=use_openat2)
    assert failure.value.errno == errno.EXDEV
    assert sorted(p.name for p in (tree.parent / "outside").iterdir()) == ["secret.txt"]
