"""Isolated worker checkouts on real git repositories in tmp_path, for both strategies ("snapshot" and
"clone"), and the automatic fallback from one to the other."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hilbert.errors import ConfigError, RunError, UserError
from hilbert.workspaces import Checkout, Git, Workspaces
from hilbert.workspaces.integration import Integration
from hilbert.workspaces.snapshot import Snapshots


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Plain git as a person would run it (but without their global config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME=str(cwd))
    return subprocess.run(
        ["git", "-c", "user.name=person", "-c", "user.email=person@example.com", *args],
        cwd=cwd,
        env=env,
        check=check,
        capture_output=True,
        text=True,
    )


@pytest.fixture
def person_repo(tmp_path: Path) -> Path:
    """A repository with ~100 files and two commits on main."""
    repo = tmp_path / "person"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    for i in range(100):
        sub = repo / f"pkg{i % 10}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "first")
    (repo / "README.md").write_text("hello again\n")
    git(repo, "commit", "--quiet", "-am", "second")
    return repo


@pytest.fixture(params=["snapshot", "clone"])
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path, person_repo: Path, strategy: str) -> Iterator[Workspaces]:
    spaces = Workspaces(tmp_path / "run", person_repo, strategy=strategy)
    yield spaces
    # no test of a strategy passes by having quietly fallen back to the other one
    assert (spaces.strategy, spaces.fallback_reason) == (strategy, None)


def head(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", rev).stdout.strip()


def wgit(checkout: Checkout, *args: str, check: bool = True):
    return git(
        checkout.work_tree, f"--git-dir={checkout.git_dir}", f"--work-tree={checkout.work_tree}", *args,
        check=check,
    )  # fmt: skip


def test_each_worker_sees_only_its_own_branch_and_no_dot_git(
    tmp_path: Path, person_repo: Path, ws: Workspaces, strategy: str
) -> None:
    refs_before = git(person_repo, "for-each-ref").stdout

    async def go() -> tuple[Checkout, Checkout]:
        return await ws.provision("w1", "main"), await ws.provision("w2", "main")

    a, b = asyncio.run(go())
    base = head(person_repo)
    for c in (a, b):
        refs = wgit(c, "for-each-ref", "--format=%(refname)").stdout.split()
        assert refs == [f"refs/heads/hilbert/{c.worker_id}"]
        assert wgit(c, "rev-parse", "HEAD").stdout.strip() == base == c.base
        assert wgit(c, "remote").stdout == ""
        assert not (c.work_tree / ".git").exists()
        assert not c.git_dir.is_relative_to(c.work_tree)
        assert (c.work_tree / "pkg3" / "mod13.py").read_text() == "VALUE = 13\n"
        assert wgit(c, "status", "--porcelain").stdout == ""
        alternates = c.git_dir / "objects" / "info" / "alternates"
        if strategy == "snapshot":  # borrowed, read-only, from the one pack of the base's history
            assert alternates.read_text() == f"{tmp_path / 'run' / 'objects' / base}\n"
        else:  # a private copy: nothing borrowed
            assert not alternates.exists() and not (tmp_path / "run" / "objects").exists()
    assert a.git_dir != b.git_dir and a.work_tree != b.work_tree
    assert git(person_repo, "for-each-ref").stdout == refs_before  # nothing written to the person's repo
    assert git(person_repo, "status", "--porcelain").stdout == ""


def test_later_commits_and_other_workers_objects_are_unreachable(
    tmp_path: Path, person_repo: Path, ws: Workspaces
) -> None:
    old = head(person_repo, "HEAD~1")
    a = asyncio.run(ws.provision("w1", old))
    b = asyncio.run(ws.provision("w2", old))
    later = head(person_repo)  # the person's "second" commit, after the base
    (person_repo / "new.txt").write_text("after provisioning\n")
    git(person_repo, "add", "-A")
    git(person_repo, "commit", "--quiet", "-m", "third")
    newest = head(person_repo)
    (a.work_tree / "mine.txt").write_text("worker one's secret\n")
    a_commit = asyncio.run(ws.commit(a, "w1 work"))
    assert a_commit is not None
    assert wgit(a, "cat-file", "-e", a_commit).returncode == 0
    for sha in (later, newest):
        assert wgit(a, "cat-file", "-e", sha, check=False).returncode != 0
        assert wgit(b, "cat-file", "-e", sha, check=False).returncode != 0
    assert wgit(b, "cat-file", "-e", a_commit, check=False).returncode != 0
    assert wgit(b, "cat-file", "-e", old).returncode == 0


def test_hooks_never_run_and_person_hooks_untouched(
    tmp_path: Path, person_repo: Path, ws: Workspaces
) -> None:
    def person_hooks() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in (person_repo / ".git" / "hooks").iterdir()}

    hooks_before = person_hooks()
    assert hooks_before  # git init's sample hooks are there to be compared
    a = asyncio.run(ws.provision("w1", "main"))
    b = asyncio.run(ws.provision("w2", "main"))
    fired = tmp_path / "hook-fired"
    for c in (a, b):
        hooks = c.git_dir / "hooks"
        hooks.mkdir(exist_ok=True)
        for name in ("pre-commit", "post-commit", "commit-msg", "reference-transaction"):
            (hooks / name).write_text(f"#!/bin/sh\ntouch {fired}-{c.worker_id}-{name}\n")
            (hooks / name).chmod(0o755)
    # the hook really would run for a plain `git commit` in that repository
    (a.work_tree / "probe.txt").write_text("x\n")
    wgit(a, "add", "probe.txt")
    wgit(a, "commit", "-q", "-m", "probe")
    assert (tmp_path / "hook-fired-w1-post-commit").exists()
    for f in tmp_path.glob("hook-fired-*"):
        f.unlink()

    for c in (b, a):
        (c.work_tree / "change.txt").write_text(c.worker_id)
        assert asyncio.run(ws.commit(c, f"work of {c.worker_id}")) is not None
    assert list(tmp_path.glob("hook-fired-*")) == []
    assert person_hooks() == hooks_before


def test_commit_round_trip_and_fetch_into(tmp_path: Path, person_repo: Path, ws: Workspaces) -> None:
    c = asyncio.run(ws.provision("w1", "main"))
    assert asyncio.run(ws.commit(c, "nothing")) is None
    (c.work_tree / "README.md").write_text("changed\n")
    (c.work_tree / "pkg0" / "mod0.py").unlink()
    (c.work_tree / "added.py").write_text("NEW = 1\n")
    (c.work_tree / ".hilbert").mkdir()
    (c.work_tree / ".hilbert" / "notes.json").write_text("{}")
    sha = asyncio.run(ws.commit(c, "fix the readme"))
    assert sha is not None and sha == wgit(c, "rev-parse", "HEAD").stdout.strip()
    assert (
        wgit(c, "log", "-1", "--format=%s|%an|%P", sha).stdout.strip() == f"fix the readme|hilbert|{c.base}"
    )
    changed = set(wgit(c, "diff", "--name-status", c.base, sha).stdout.splitlines())
    assert changed == {"M\tREADME.md", "D\tpkg0/mod0.py", "A\tadded.py"}
    assert asyncio.run(ws.commit(c, "again")) is None

    integration = tmp_path / "integration"
    git(tmp_path, "clone", "--quiet", "--bare", str(person_repo), str(integration))
    got = asyncio.run(ws.fetch_into(c, Integration(integration, ws.git, "main"), "refs/hilbert/queue/w1"))
    assert got == sha == head(integration, "refs/hilbert/queue/w1")
    assert git(integration, "show", f"{sha}:added.py").stdout == "NEW = 1\n"
    with pytest.raises(UserError):
        asyncio.run(ws.fetch_into(c, Integration(integration, ws.git, "main"), "queue/w1"))


def test_archive_keeps_unfinished_work_and_removes_merged(
    tmp_path: Path, person_repo: Path, ws: Workspaces
) -> None:
    integration = tmp_path / "integration"
    git(tmp_path, "clone", "--quiet", "--bare", str(person_repo), str(integration))

    async def setup() -> list[Checkout]:
        return [await ws.provision(name, "main") for name in ("clean", "merged", "dirty", "unmerged")]

    clean, merged, dirty, unmerged = asyncio.run(setup())
    (merged.work_tree / "m.txt").write_text("merged\n")
    merged_sha = asyncio.run(ws.commit(merged, "merged work"))
    asyncio.run(ws.fetch_into(merged, Integration(integration, ws.git, "main"), "refs/heads/main"))
    assert head(integration, "main") == merged_sha
    (dirty.work_tree / "untracked.txt").write_text("not committed\n")
    (unmerged.work_tree / "u.txt").write_text("committed, never merged\n")
    unmerged_sha = asyncio.run(ws.commit(unmerged, "unmerged work"))

    heard: dict[str, tuple[str, bool]] = {}  # what `closing` heard, and whether the work tree was there

    def closing_for(c: Checkout) -> Callable[[str], None]:
        return lambda kept: heard.setdefault(c.worker_id, (kept, c.work_tree.is_dir()))

    messages = {
        c.worker_id: asyncio.run(
            ws.archive_or_remove(c, Integration(integration, ws.git, "main"), closing=closing_for(c))
        )
        for c in (clean, merged, dirty, unmerged)
    }
    for c in (clean, merged, dirty, unmerged):
        assert not c.work_tree.exists() and not c.git_dir.exists()
        # told before anything was removed (a log written then never misses a workspace that is gone)
        assert heard[c.worker_id] == (messages[c.worker_id], True)
    assert "removed" in messages["clean"] and "archived" not in messages["clean"]
    assert "archived" not in messages["merged"]
    assert "1 uncommitted" in messages["dirty"]
    assert "1 commit(s) not in refs/heads/main" in messages["unmerged"]
    archive = tmp_path / "run" / "archive"
    (tarball,) = archive.glob("dirty-*.tar.gz")
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("dirty/untracked.txt")
        assert member is not None and member.read() == b"not committed\n"
    (bundle,) = archive.glob("unmerged-*.bundle")
    git(person_repo, "fetch", "--quiet", str(bundle), "refs/heads/hilbert/unmerged:refs/recovered")
    assert head(person_repo, "refs/recovered") == unmerged_sha
    assert len(list(archive.glob("*.bundle"))) == 1


def test_sixteen_workers_concurrently(tmp_path: Path, ws: Workspaces, strategy: str) -> None:

    async def go() -> list[Checkout]:
        return await asyncio.gather(*(ws.provision(f"w{i:02d}", "main") for i in range(16)))

    checkouts = asyncio.run(go())
    assert len({c.git_dir for c in checkouts}) == 16
    objects = tmp_path / "run" / "objects"
    if strategy == "snapshot":
        assert len(list(objects.iterdir())) == 1  # one snapshot for the shared base
    else:
        assert not objects.exists()
    for c in checkouts:
        assert wgit(c, "for-each-ref", "--format=%(refname)").stdout.split() == [c.ref]
        assert wgit(c, "status", "--porcelain").stdout == ""
        assert len(wgit(c, "ls-files").stdout.splitlines()) == 101


def test_bad_input_is_a_clear_error(tmp_path: Path, person_repo: Path, ws: Workspaces) -> None:
    with pytest.raises(UserError, match="not a commit"):
        asyncio.run(ws.provision("w1", "no-such-branch"))
    with pytest.raises(UserError, match="bad worker id"):
        asyncio.run(ws.provision("../escape", "main"))
    asyncio.run(ws.provision("w1", "main"))
    with pytest.raises(RunError, match="already has a workspace"):
        asyncio.run(ws.provision("w1", "main"))
    with pytest.raises(RunError, match=r"git .*failed"):
        asyncio.run(ws.git.run("-C", tmp_path, "rev-parse", "--verify", "nothing"))


def test_checkout_needs_nothing_of_the_person_repository(
    tmp_path: Path, person_repo: Path, ws: Workspaces
) -> None:
    c = asyncio.run(ws.provision("w1", "main"))
    shutil.rmtree(person_repo)
    assert wgit(c, "fsck", "--full", "--strict", "--no-dangling").returncode == 0
    (c.work_tree / "README.md").write_text("still works\n")
    sha = asyncio.run(ws.commit(c, "after the person's repository went away"))
    assert sha is not None and asyncio.run(ws.tip(c)) == sha
    exported = asyncio.run(ws.export(c, sha, tmp_path / "exported"))
    assert (exported / "README.md").read_text() == "still works\n"
    assert (exported / "pkg9" / "mod99.py").read_text() == "VALUE = 99\n"


def test_unknown_strategy_is_a_config_error(tmp_path: Path, person_repo: Path) -> None:
    with pytest.raises(ConfigError, match="unknown workspace strategy 'overlay'") as caught:
        Workspaces(tmp_path / "run", person_repo, strategy="overlay")
    assert caught.value.hint is not None and "clone" in caught.value.hint
    assert Workspaces(tmp_path / "run", person_repo).strategy == "snapshot"  # the default


def assert_private_clone(c: Checkout, base: str) -> None:
    assert not (c.git_dir / "objects" / "info" / "alternates").exists()
    assert wgit(c, "for-each-ref", "--format=%(refname)").stdout.split() == [c.ref]
    assert wgit(c, "rev-parse", "HEAD").stdout.strip() == base
    assert wgit(c, "status", "--porcelain").stdout == ""
    assert not (c.work_tree / ".git").exists()
    assert wgit(c, "fsck", "--full", "--no-dangling").returncode == 0


def test_falls_back_to_clones_when_the_snapshot_cannot_be_built(tmp_path: Path, person_repo: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "objects").write_text("a file where the snapshot folder must go\n")  # fails for root too
    ws = Workspaces(run, person_repo)

    async def go() -> list[Checkout]:
        return await asyncio.gather(*(ws.provision(f"w{i}", "main") for i in range(4)))

    checkouts = asyncio.run(go())
    assert ws.strategy == "clone"
    assert ws.fallback_reason is not None and "could not be built" in ws.fallback_reason
    assert str(run / "objects") in ws.fallback_reason  # the reason names what went wrong
    for c in checkouts:
        assert_private_clone(c, head(person_repo))
    (checkouts[0].work_tree / "new.txt").write_text("work\n")
    sha = asyncio.run(ws.commit(checkouts[0], "work after the fallback"))
    assert wgit(checkouts[1], "cat-file", "-e", str(sha), check=False).returncode != 0
    assert (run / "objects").read_text() == "a file where the snapshot folder must go\n"


def test_falls_back_to_clones_when_the_alternates_do_not_hold_the_base(
    tmp_path: Path, person_repo: Path
) -> None:
    base = head(person_repo)
    damaged = tmp_path / "run" / "objects" / base / "pack"
    damaged.mkdir(parents=True)  # a snapshot whose pack files were deleted
    ws = Workspaces(tmp_path / "run", person_repo)
    first = asyncio.run(ws.provision("w1", "main"))
    assert ws.strategy == "clone"
    assert ws.fallback_reason is not None and "not visible through the alternates" in ws.fallback_reason
    reason = ws.fallback_reason
    second = asyncio.run(ws.provision("w2", "main"))
    assert ws.fallback_reason == reason  # the switch is made and explained once
    for c in (first, second):
        assert_private_clone(c, base)
    assert sorted(p.name for p in (tmp_path / "run" / "git").iterdir()) == ["w1.git", "w2.git"]


def test_a_failed_snapshot_build_is_not_repeated(tmp_path: Path, person_repo: Path) -> None:
    objects = tmp_path / "objects"
    objects.write_text("in the way\n")
    snapshots = Snapshots(Git(home=tmp_path), person_repo, objects)
    base = head(person_repo)

    async def twice() -> list[Path | BaseException]:
        return await asyncio.gather(snapshots.ensure(base), snapshots.ensure(base), return_exceptions=True)

    first, second = asyncio.run(twice())
    assert isinstance(first, OSError)
    assert isinstance(second, RunError) and "could not be built" in str(second)
    objects.unlink()  # even once the obstacle is gone, this object does not try again
    with pytest.raises(RunError, match="could not be built"):
        asyncio.run(snapshots.ensure(base))
    assert not objects.exists()
