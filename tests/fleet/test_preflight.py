"""What `hilbert run` checks before any model is called, through the real command line: a model whose
server does not answer is one line at once (not minutes of retries blamed on the provider); a working
tree with uncommitted changes is refused, or with --allow-dirty run on a snapshot made in the run's own
clone (the person's repository is not changed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.sim.sample import generate_sample_project
from hilbert.testing.fake_server import FakeServer


def hilbert(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **command_env(hilbert_python_first=True),
        "HILBERT_HOME": str(cwd / "home"),
        "XDG_CONFIG_HOME": str(cwd / "xdg"),  # the person's global git ignore file: xdg/git/ignore
    }
    return run_cli(*args, cwd=cwd, env=env, timeout=300)


def dot_git(repo: Path) -> dict[str, bytes]:
    """Every file under the repository's .git but its objects (a fetch adds those), by content."""
    root = repo / ".git"
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.relative_to(root).parts[0] != "objects"
    }


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def project(tmp_path: Path) -> Path:
    """A one-bug sample project, committed, and a plan fixing it (outside the repository)."""
    sample = generate_sample_project(tmp_path / "repo", 5, bugs=1)
    (sample.path / ".gitignore").write_text("*.log\n")
    commit_all(sample.path)
    bug = sample.bugs[0].file
    (tmp_path / "PLAN.md").write_text(
        f"# fix it\n\n## T1 — fix {bug}\n\n```yaml hilbert-task\nclaims: [{bug}]\n"
        f"verify: python -m pytest -q -p no:cacheprovider tests/test_{Path(bug).stem}.py\n```\n"
    )
    return sample.path


def test_a_model_that_does_not_answer_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    project(tmp_path)
    done = hilbert(
        "run",
        "--plan",
        "PLAN.md",
        "--repo",
        "repo",
        "--model",
        "openai:m@http://127.0.0.1:9/v1",
        cwd=tmp_path,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "the model openai:m at http://127.0.0.1:9/v1 does not answer: connection error" in lines[0]
    assert "overloaded" not in lines[0]  # not blamed on the provider
    assert not (tmp_path / "home" / "runs").exists() or not any((tmp_path / "home" / "runs").iterdir())


def test_a_dirty_tree_is_refused_and_allow_dirty_runs_on_a_snapshot(tmp_path: Path) -> None:
    repo = project(tmp_path)
    (repo / "notes.log").write_text("ignored: not a change\n")
    (repo / "NEW.txt").write_text("an untracked file the workers would not see\n")
    (tmp_path / "xdg" / "git").mkdir(parents=True)
    (tmp_path / "xdg" / "git" / "ignore").write_text(".env\n")  # the person ignores it everywhere
    (repo / ".env").write_text("SECRET=never-to-a-model\n")
    with FakeServer("engineer", seed=5) as engineer:
        model = ["--model", f"openai:fake@{engineer.openai_base_url}"]
        refused = hilbert("run", "--plan", "PLAN.md", "--repo", "repo", *model, cwd=tmp_path)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "has uncommitted changes the workers would not see: NEW.txt" in refused.stderr
        assert "--allow-dirty" in refused.stderr and "notes.log" not in refused.stderr
        assert ".env" not in refused.stderr
        nested = repo / "vendor" / "lib"  # a repository of its own inside the tree: not carried
        nested.mkdir(parents=True)
        (nested / "lib.py").write_text("X = 1\n")
        commit_all(nested)
        kept = hilbert("run", "--plan", "PLAN.md", "--repo", "repo", "--allow-dirty", *model, cwd=tmp_path)
        assert kept.returncode == 2 and "nested git repository (vendor/lib)" in kept.stderr, kept.stderr
        shutil.rmtree(repo / "vendor")
        assert not [r for r in engineer.requests if r.get("path", "").endswith("/chat/completions")]
        (repo / "README.md").write_text((repo / "README.md").read_text() + "\nchanged, not committed\n")
        status, refs, before = git(repo, "status", "--porcelain"), git(repo, "for-each-ref"), dot_git(repo)
        ran = hilbert("run", "--plan", "PLAN.md", "--repo", "repo", "--allow-dirty", *model, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr + ran.stdout[-3000:]
    assert "the run starts from a snapshot of the uncommitted changes" in ran.stdout
    found = re.search(r"the result is the branch (hilbert/\S+) in your repository", ran.stdout)
    assert found, ran.stdout[-3000:]  # (the refused run above left a folder of its own under runs/)
    branch = found.group(1)
    # the result holds the snapshot (the untracked file, the README change) and the fix on top of it
    assert "an untracked file" in git(repo, "show", f"{branch}:NEW.txt")
    assert "changed, not committed" in git(repo, "show", f"{branch}:README.md")
    assert "notes.log" not in git(repo, "ls-tree", "-r", "--name-only", branch)
    assert ".env" not in git(repo, "ls-tree", "-r", "--name-only", branch)
    # its changes are still in the person's tree: the merge line says to put them aside first
    assert f"  merge: git stash -u && git merge {branch} && git stash drop" in ran.stdout
    after = dot_git(repo)  # .git as it was, but the new branch (its ref and its log): no index, no FETCH_HEAD
    new_files = {f"refs/heads/{branch}", f"logs/refs/heads/{branch}"}
    assert set(after) - set(before) <= new_files and all(after[f] == before[f] for f in before), (
        sorted(set(after) ^ set(before)),
        [f for f in before if f in after and after[f] != before[f]],
    )
    assert git(repo, "status", "--porcelain") == status  # the person's tree and refs as they were,
    assert git(repo, "for-each-ref").replace(git(repo, "for-each-ref", f"refs/heads/{branch}"), "") == refs
