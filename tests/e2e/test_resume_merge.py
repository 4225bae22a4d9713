"""A merge queue's verdict on a candidate that the orchestrator logged but did not live to act on: the
queue logged a conflict, then the process was killed (SIGKILL, `HILBERT_CRASH_AT=merge_conflict:1`).
`hilbert run --resume` sends the task back as the live run would have (a `task_retried` with the
conflict as feedback), its next attempt starts from the new tip, and both tasks are merged — found by
the kill drill (`test_resume.py`), where such a task waited in `verifying` forever."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cli_support import run_cli
from git_support import git
from hilbert.commands import command_env
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.fleet.state import Fold
from hilbert.models.types import ToolCall
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply


class SameFile:
    """Each task's worker writes its own line into notes.txt, then finishes: from the same base, the
    second candidate to merge conflicts with the first; from the new tip, it does not."""

    name = "same-file"

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        found = re.search(r"^Task (\w+):", brief, re.MULTILINE)
        task = found.group(1) if found else "?"
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn == 0:
            call = ToolCall(f"call_{task}_0", "shell", {"command": f"echo {task} >> notes.txt"})
        else:
            call = ToolCall(f"call_{task}_{turn}", "finish", {"claim": "done", "evidence": "grep shows it"})
        return Reply(tool_calls=(call,))


@pytest.mark.timeout(300)
def test_a_conflict_logged_before_the_kill_sends_the_task_back_at_resume(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("notes\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    tasks = tuple(
        Task(id=t, title=f"note {t}", verify=f"grep -qx {t} notes.txt", claims=("notes.txt",),
             allow_shared_claims=True)
        for t in ("T1", "T2")
    )  # fmt: skip
    (tmp_path / "PLAN.md").write_text(write_plan(Plan(goal="notes", tasks=tasks)))
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(tmp_path / "home")}
    with FakeServer(SameFile()) as server:
        model = [
            "--model",
            f"openai:fake@{server.openai_base_url}",
            "--unsandboxed",
            "--test-command",
            "true",
        ]
        killed = run_cli(
            "run", "--plan", "PLAN.md", "--repo", "repo", "--workers", "2", *model,
            cwd=tmp_path, env={**env, "HILBERT_CRASH_AT": "merge_conflict:1"}, timeout=240,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr
        resumed = run_cli("run", "--resume", "--repo", "repo", *model, cwd=tmp_path, env=env, timeout=240)
    with EventStore.open(tmp_path / "home" / "hilbert.db") as store:
        run = store.events(kinds=["fleet_started"])[0].run
        state = Fold(store, run).catch_up()
        conflict = store.events(run=run, kinds=["merge_conflict"])[0].data["task"]
        resume = store.events(run=run, kinds=["fleet_resumed"])[0].id
        retried = [e for e in store.events(run=run, kinds=["task_retried"]) if e.id > resume]
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert [(e.data["task"], e.data["why"][:9]) for e in retried] == [(conflict, "conflict:")]
    assert {t: s.status for t, s in state.states.items()} == {"T1": "done", "T2": "done"}
    tip = subprocess.run(
        ["git", "--git-dir", str(state.started.integration if state.started else ""), "show",
         "hilbert/integration:notes.txt"], capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert sorted(tip.split()) == ["T1", "T2"]
