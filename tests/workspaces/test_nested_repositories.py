"""A worker that makes a git repository inside its work tree steers none of the harness's git: the
nested repository's configured commands (an fsmonitor, a clean filter, another work tree) never run when
the harness commits, reads or closes the workspace, and a nested repository is never recorded as a
gitlink, whether it is a `.git` folder, a `.git` file pointing elsewhere, or one without a commit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tarfile
from pathlib import Path

from hilbert.workspaces import Workspaces
from hilbert.workspaces.integration import Integration


def git(cwd: Path, *args: str) -> str:
    """Plain git as a worker inside its sandbox would run it (no global config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME=str(cwd))
    done = subprocess.run(
        ["git", "-c", "user.name=w", "-c", "user.email=w@w", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def person_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "person"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "app.py").write_text("print('hi')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "first")
    return repo


def plant(work_tree: Path, canary: Path) -> None:
    """What the red team planted: `sub/` a repository whose config runs commands that write `canary`
    (fsmonitor, a clean filter on every file, a work tree elsewhere), a `.gitmodules` asking git to
    look into it, `other/.git` a file pointing at sub's repository, `unborn/` a repository with no
    commit (git add refuses those), and ordinary work beside them."""
    sub = work_tree / "sub"
    sub.mkdir()
    git(sub, "init", "--quiet")
    (sub / "lib.py").write_text("X = 1\n")
    (sub / ".gitattributes").write_text("* filter=steal\n")
    git(sub, "add", "-A")
    git(sub, "commit", "--quiet", "-m", "nested")
    git(sub, "config", "core.fsmonitor", f"touch {canary}.fsmonitor; false")
    git(sub, "config", "filter.steal.clean", f"sh -c 'touch {canary}.clean; cat'")
    git(sub, "config", "filter.steal.smudge", f"sh -c 'touch {canary}.smudge; cat'")
    git(sub, "config", "filter.steal.required", "true")
    later = os.stat(sub / "lib.py").st_mtime_ns + 5 * 10**9  # stat-dirty: git must hash it (filter)
    os.utime(sub / "lib.py", ns=(later, later))
    (work_tree / ".gitmodules").write_text(
        '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n'
    )
    other = work_tree / "other"
    other.mkdir()
    (other / ".git").write_text(f"gitdir: {sub / '.git'}\n")
    (other / "notes.txt").write_text("other\n")
    (work_tree / "unborn").mkdir()
    git(work_tree / "unborn", "init", "--quiet")
    (work_tree / "unborn" / "draft.py").write_text("Y = 2\n")
    (work_tree / "fix.py").write_text("FIXED = True\n")


def planted(canary: Path) -> list[str]:
    return sorted(p.name for p in canary.parent.glob(canary.name + ".*"))


def test_a_nested_repository_runs_nothing_and_is_never_a_gitlink(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    spaces = Workspaces(tmp_path / "run", person_repo(tmp_path))

    async def scenario() -> tuple[str | None, list[str], list[str], str]:
        integration = await Integration.create(spaces.repo, tmp_path / "integration.git", spaces.git)
        checkout = await spaces.provision("w1", "main")
        plant(checkout.work_tree, canary)
        commit = await spaces.commit(checkout, "the worker's work")
        after_commit = planted(canary)
        nested = list(await spaces.nested_repositories(checkout))
        for args in (["status", "--porcelain"], ["diff"], ["diff", "HEAD"], ["add", "--all"]):
            await spaces.git.run(  # plain git with the harness's flags (add fails on `unborn/`)
                f"--git-dir={checkout.git_dir}", f"--work-tree={checkout.work_tree}", *args,
                cwd=checkout.work_tree, check=False,
            )  # fmt: skip
        await spaces.git.run(
            f"--git-dir={checkout.git_dir}", "reset", "--quiet", cwd=checkout.work_tree
        )  # the index as the harness left it
        assert commit is not None
        await spaces.export(checkout, commit, tmp_path / "export")
        kept = await spaces.archive_or_remove(checkout, integration)
        return commit, after_commit, nested, kept

    commit, after_commit, nested, kept = asyncio.run(scenario())
    assert after_commit == [] and planted(canary) == [], "a nested repository's command ran as the harness"
    assert nested == ["other", "sub", "unborn"]
    assert commit is not None and "archived" in kept  # the commit is not merged: kept as a bundle
    bundle = next((tmp_path / "run" / "archive").glob("w1-*.bundle"))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(tmp_path / "person"), str(clone))
    git(clone, "fetch", "--quiet", str(bundle), "hilbert/w1:kept")
    entries = git(clone, "ls-tree", "-r", "--full-tree", "kept")
    assert "160000" not in entries and "commit" not in entries.split()  # no gitlink was recorded
    files = {line.split("\t", 1)[1] for line in entries.splitlines()}
    assert {"fix.py", ".gitmodules", "app.py"} <= files and not any(
        f.startswith(("sub", "other", "unborn")) for f in files
    )
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == [".gitmodules", "app.py", "fix.py"]
    tarball = next((tmp_path / "run" / "archive").glob("w1-*.tar.gz"))
    with tarfile.open(tarball) as tar:  # the nested work is not lost: it is in the archive
        assert {"w1/sub/lib.py", "w1/other/notes.txt", "w1/unborn/draft.py"} <= set(tar.getnames())


def test_a_gitlink_already_in_the_index_is_taken_out_before_the_commit(tmp_path: Path) -> None:
    """A repository made while `git add` ran gets in as a gitlink: the commit takes it out again."""
    spaces = Workspaces(tmp_path / "run", person_repo(tmp_path))

    async def scenario() -> str:
        checkout = await spaces.provision("w1", "main")
        late = checkout.work_tree / "late"
        late.mkdir()
        git(late, "init", "--quiet")
        (late / "x.py").write_text("X = 1\n")
        git(late, "add", "-A")
        git(late, "commit", "--quiet", "-m", "late")
        sha = git(late, "rev-parse", "HEAD")
        git(
            checkout.work_tree, f"--git-dir={checkout.git_dir}", f"--work-tree={checkout.work_tree}",
            "update-index", "--add", "--cacheinfo", f"160000,{sha},late",
        )  # fmt: skip
        (checkout.work_tree / "fix.py").write_text("FIXED = True\n")
        commit = await spaces.commit(checkout, "work")
        assert commit is not None
        return git(checkout.work_tree, f"--git-dir={checkout.git_dir}", "ls-tree", "-r", commit)

    entries = asyncio.run(scenario())
    assert "160000" not in entries and "fix.py" in entries and "late" not in entries
