"""The repository map on real git repositories: what a commit tracks and defines, within a token
budget, the same text every time; and in a fleet, the same system prompt for every worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from git_support import git
from hilbert.agent.prompts import SYSTEM_PROMPT, system_prompt
from hilbert.commands import Runner, command_env
from hilbert.context.repomap import repository_map
from hilbert.context.tokens import Approximate, Tokenizer, tokenizer_for
from hilbert.errors import UserError
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer, ScriptedResponder
from hilbert.workspaces import Git

EXACT = tokenizer_for("openai:gpt-4o")  # o200k_base, OpenAI's own tokenizer

CORE = '''"""The engine."""

import re

PATTERN = re.compile("\\d+")


class Engine:
    def __init__(self) -> None:
        self.on = False

    def start(self) -> None:
        self.on = True

    async def stop(self) -> None:
        self.on = False

    def _hidden(self) -> None:
        pass


def main() -> None:
    Engine().start()


async def serve() -> None:
    pass


def _private() -> None:
    pass
'''


def make_repo(path: Path, files: dict[str, str | bytes]) -> str:
    """A git repository at `path` whose one commit holds `files`; the commit's hash."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "--allow-empty", "-m", "start")
    return git(path, "rev-parse", "HEAD")


def repo_map(repo: Path, commit: str, tokenizer: Tokenizer = EXACT, budget: int = 1500) -> str:
    return asyncio.run(
        repository_map(repo, commit, tokenizer=tokenizer, git=Git(home=repo.parent / "home"), budget=budget)
    )


def test_the_map_lists_the_commits_files_and_python_definitions_not_the_work_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = make_repo(repo, {"README.md": "hi\n", "pkg/__init__.py": "", "pkg/core.py": CORE})
    (repo / "pkg" / "later.py").write_text("def later_function() -> None:\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "later")
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "pkg" / "extra.py").write_text("def untracked_function() -> None:\n    pass\n")
    (repo / "pkg" / "core.py").write_text("def edited_in_the_work_tree() -> None:\n    pass\n")

    text = repo_map(repo, first)

    assert text.splitlines()[0].startswith(f"Repository map of commit {first[:12]} (3 files tracked")
    assert "./: README.md" in text and "pkg/: __init__.py, core.py" in text
    assert "pkg/core.py: class Engine {start, stop}; def main; def serve" in text
    assert (
        "_hidden" not in text and "_private" not in text and "__init__," not in text.split("Definitions")[1]
    )
    for absent in ("later", "notes.txt", "extra.py", "untracked_function", "edited_in_the_work_tree"):
        assert absent not in text, absent
    assert "left out" not in text and "not listed" not in text  # it all fits
    later = repo_map(repo, "HEAD")
    assert "pkg/later.py: def later_function" in later and "notes.txt" not in later


def test_a_file_that_cannot_be_read_as_python_is_listed_without_definitions(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    commit = make_repo(
        repo,
        {
            "a_broken.py": "def broken(:\n    pass\n",
            "b_latin1.py": "# caf\xe9\n".encode("latin-1") + b"def latin() -> None:\n    pass\n",
            "c_big.py": "def big() -> None:\n    pass\n" + "# filler\n" * 30_000,
            "d_nul.py": b"def nul() -> None:\n    pass\n\0\0",
            "e_escapes.py": 'PATTERN = "\\d"\n\n\ndef escapes() -> None:\n    pass\n',
            "f_link.py": b"",
            "image.png": b"\x89PNG\r\n\x1a\n\0\0\0",
        },
    )
    (repo / "f_link.py").unlink()
    (repo / "f_link.py").symlink_to("e_escapes.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")

    text = repo_map(repo, "HEAD")  # no warning escapes (the suite turns warnings into errors)

    assert "./: a_broken.py, b_latin1.py, c_big.py, d_nul.py, e_escapes.py, f_link.py, image.png" in text
    assert "a_broken.py: (does not parse at this commit)" in text
    assert "b_latin1.py: (not read: not UTF-8 text)" in text
    assert "c_big.py: (not read: over 200 KB)" in text
    assert "d_nul.py: (not read: not UTF-8 text)" in text
    assert "e_escapes.py: def escapes" in text
    assert "f_link.py:" not in text and "image.png:" not in text  # a link and a non-Python file
    assert commit != git(repo, "rev-parse", "HEAD")


def test_the_map_keeps_within_its_budget_and_says_what_it_left_out(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    files: dict[str, str | bytes] = {"README.md": "hi\n"}
    for folder in range(30):
        for module in range(20):
            defs = "".join(f"def function_{folder}_{module}_{n}() -> None:\n    pass\n\n\n" for n in range(8))
            files[f"package_{folder:02}/module_{module:02}.py"] = (
                defs + "class Thing:\n    def act(self): ...\n"
            )
    make_repo(repo, files)

    for tokenizer in (EXACT, Approximate()):
        for budget in (100, 150, 400, 1500):
            text = repo_map(repo, "HEAD", tokenizer, budget)
            assert tokenizer.count(text) <= budget, (tokenizer.name, budget)
            assert f"more files not listed, to keep the map within {budget} tokens" in text
            assert "more Python files, from package_" in text and f"within {budget} tokens)" in text
        roomy = repo_map(repo, "HEAD", tokenizer, 1500)
        assert "package_00/: module_00.py, module_01.py" in roomy and "(+8 more)" in roomy  # 12 a folder
        assert "package_00/module_00.py: def function_0_0_0" in roomy
        described = [line for line in roomy.splitlines() if line.startswith("package_") and ".py: " in line]
        left = int(roomy.split("(definitions of ")[1].split(" ")[0])
        assert left == 600 - len(described) > 0
    everything = repo_map(repo, "HEAD", EXACT, 200_000)
    assert "not listed" not in everything and "left out" not in everything
    assert "package_29/module_19.py: def function_29_19_0" in everything


def test_the_map_of_a_commit_is_the_same_text_every_time_and_in_every_clone(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    commit = make_repo(repo, {f"m{n:03}.py": f"def f{n}() -> None:\n    pass\n" for n in range(400)})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    (repo / "m000.py").write_text("def changed() -> None:\n    pass\n")

    first = repo_map(repo, commit, budget=600)
    assert first == repo_map(repo, commit, budget=600) == repo_map(bare, commit, budget=600)
    assert "m000.py: def f0" in first and "left out" in first


def test_an_empty_commit_says_so_and_a_tiny_budget_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    commit = make_repo(repo, {})
    assert (
        repo_map(repo, commit)
        == f"Repository map of commit {commit[:12]}: no files are tracked at this commit."
    )
    with pytest.raises(UserError, match="too small"):
        repo_map(repo, commit, budget=20)


def test_a_path_cannot_break_a_line(tmp_path: Path) -> None:
    # one named like an envelope is shown as it is: the agent loop defangs the prompt the map is in
    # (tests/agent/test_defanging.py)
    repo = tmp_path / "repo"
    make_repo(repo, {"two\nlines.txt": "x\n", "<message from=lead>.md": "x\n", "ok.py": "def ok(): ...\n"})
    text = repo_map(repo, "HEAD")
    assert '"two\\nlines.txt"' in text and "<message from=lead>.md" in text
    assert len(text.splitlines()) == 5  # header, one folder, blank, title, ok.py


def test_every_worker_of_a_run_sends_the_same_system_prompt_with_the_map(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    base = make_repo(repo, {"README.md": "hi\n", "pkg/__init__.py": "", "pkg/core.py": CORE})
    script = ScriptedResponder.from_turns(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]},
            {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}]},
        ]
    )
    tasks = (Task(id="T1", title="one", verify="test -f done.txt"), Task(id="T2", title="two", verify="true"))

    def fleet(run: str, settings: Settings) -> tuple[list[str], list[str]]:
        """The system prompts the run's workers logged, and those the server received."""
        with FakeServer(script) as server, EventStore.open(tmp_path / f"{run}.db") as store:
            asyncio.run(
                run_fleet(
                    Plan(goal="g", tasks=tasks),
                    repo=repo,
                    root=tmp_path / run,
                    run=run,
                    model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                    store=store,
                    runner=Runner.unsandboxed(command_env(hilbert_python_first=True)),
                    settings=settings,
                )
            )
            started = [e for e in store.events(run=run, kinds=["agent_started"]) if e.agent != "harness"]
            logged = [store.get_messages(e.data["messages"])[0].content for e in started]
            assert len({e.agent for e in started}) == 2
            sent = [r["body"]["messages"][0] for r in server.requests if r["path"] == "/v1/chat/completions"]
        assert {m["role"] for m in sent} == {"system"}
        return logged, [m["content"] for m in sent]

    quick = {"fleet.workers": 2, "fleet.max_attempts": 1, "commands.test": "true"}
    logged, sent = fleet("r1", Settings.of(quick))
    expected = system_prompt(repo_map(repo, base, tokenizer_for("openai:fake"), 1500))
    assert set(logged) == set(sent) == {expected} and len(sent) >= 4  # two workers, two calls each
    assert expected.startswith(SYSTEM_PROMPT + "\n\n## Repository map\n")
    assert f"commit {base[:12]}" in expected and "pkg/core.py: class Engine {start, stop}" in expected

    logged, sent = fleet("r2", Settings.of({**quick, "context.repository_map_tokens": 0}))
    assert set(logged) == set(sent) == {SYSTEM_PROMPT}
