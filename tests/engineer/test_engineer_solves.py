"""The engineer really fixes generated projects it has never seen, through the tools it is offered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from engineer_testkit import FAST, make_project, read_tests, solve, suite_passes, unseen_seeds

from hilbert.agent.loop import NOT_RUN_ON_RESUME
from hilbert.models.types import Message, ToolCall
from hilbert.sim.engineer import EngineerResponder
from hilbert.sim.engineer.harness import HILBERT_TOOLS, tool_arguments
from hilbert.testing.fake_server.responder import Conversation


@pytest.mark.parametrize("run", range(8))
def test_fixes_one_bug_through_hilbert_tools(tmp_path: Path, run: int) -> None:
    seed = unseen_seeds(1)[0]
    project = make_project(tmp_path, seed)
    tests_before = read_tests(project)
    episode = solve(project)
    passed, output = suite_passes(project)
    assert episode.finished and passed, f"seed {seed}: {episode.claim}\n{output}"
    assert read_tests(project) == tests_before, f"seed {seed}: the engineer changed the tests"
    assert episode.claim.startswith("Fixed") and "passed" in episode.evidence
    used = {call.name for message in episode.messages for call in message.tool_calls}
    assert {"shell", "read_file", "grep", "edit_file", "finish"} <= used


@pytest.mark.parametrize("run", range(3))
def test_fixes_two_bugs_one_after_the_other(tmp_path: Path, run: int) -> None:
    seed = unseen_seeds(1)[0]
    project = make_project(tmp_path, seed, bugs=2)
    tests_before = read_tests(project)
    episode = solve(project)
    passed, output = suite_passes(project)
    assert episode.finished and passed, f"seed {seed}: {episode.claim}\n{output}"
    assert read_tests(project) == tests_before
    suite_runs = [
        a
        for a in tool_arguments(episode.messages, "shell")
        # after a fix: which fail (-rf)
        if a["command"] in ("python -m pytest -q", "python -m pytest -q --tb=no -rf --disable-warnings")
    ]
    assert len(suite_runs) >= 3, "run, fix one, re-run, fix the next, re-run"


@pytest.mark.parametrize("run", range(3))
def test_fixes_a_bug_through_a_single_bash_tool(tmp_path: Path, run: int) -> None:
    seed = unseen_seeds(1)[0]
    project = make_project(tmp_path, seed)
    tests_before = read_tests(project)
    episode = solve(project, tools="bash")
    passed, output = suite_passes(project)
    assert episode.finished and passed, f"seed {seed}: {episode.claim}\n{output}"
    assert read_tests(project) == tests_before
    commands = [a["command"] for a in tool_arguments(episode.messages, "bash")]
    assert any(c.startswith("cat -n ") for c in commands) and any(
        c.startswith("python3 -c ") for c in commands
    )
    assert (
        episode.claim.startswith("Fixed") and "passed" in episode.claim
    )  # the final message shows the output


def test_ends_mini_swe_agent_style_with_the_submit_command(tmp_path: Path) -> None:
    project = make_project(tmp_path, unseen_seeds(1)[0], bugs=2)
    system = "When done, run `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` on its own."
    episode = solve(project, tools="bash", system=system)
    assert episode.finished and suite_passes(project)[0], episode.claim
    last_call = next(m for m in reversed(episode.messages) if m.tool_calls).tool_calls[0]
    assert last_call.arguments == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}


def test_when_the_output_is_cut_short_it_asks_pytest_for_just_the_failing_tests() -> None:
    cut = "[exit 1]\n..........F.....\n[... 20000 bytes more saved to /tmp/out-1.txt]"
    run = ToolCall("call_1", "shell", {"command": "python -m pytest -q"})
    messages = (
        Message("user", "The tests of this project fail (`python -m pytest -q`). Make them pass."),
        Message("assistant", "", (run,)),
        Message("tool", cut, tool_call_id="call_1", name="shell"),
    )
    policy = EngineerResponder()
    conversation = Conversation("openai-chat", "fake", "", messages, HILBERT_TOOLS)
    listing = policy.reply(conversation).tool_calls[0]
    assert listing.name == "list_files"
    listed = Message("tool", "tests/test_a.py", tool_call_id=listing.id)
    messages += (Message("assistant", "", (listing,)), listed)
    again = policy.reply(Conversation("openai-chat", "fake", "", messages, HILBERT_TOOLS)).tool_calls[0]
    assert again.arguments == {"command": "python -m pytest -q --tb=no -rf --disable-warnings"}


@pytest.mark.parametrize("lose_every", [2, 3])
def test_a_call_a_killed_run_never_answered_is_made_again_and_the_task_still_gets_done(
    tmp_path: Path, lose_every: int
) -> None:
    """A conversation resumed after a kill answers each call whose result the log never got "not run"
    (hilbert's loop): the engineer makes the same call again, and goes on from its real answer. The
    task names one of two bugs, as a fleet's task does: read as a suite run's output, a lost run had
    passed for "no failure left", and the engineer went after the other task's bug until its turns ran
    out (the resume drill, seed 12345)."""
    seed = unseen_seeds(1)[0]
    project = make_project(tmp_path, seed, bugs=2)
    bug = project.bugs[0]
    verify = "python -m pytest -q " + " ".join(bug.tests)
    task = f"Task T3: fix {bug.function} in {bug.file}\nThe task is done when `{verify}` passes."
    episode = solve(project, task=task, lose_every=lose_every, max_replies=80)
    messages = episode.messages
    answers = {m.tool_call_id: m for m in messages if m.role == "tool"}
    calls = [call for m in messages for call in m.tool_calls]
    lost = [n for n, call in enumerate(calls) if answers[call.id].content == NOT_RUN_ON_RESUME]
    assert lost, seed
    for n in lost:  # the very next call is the same one, asked again
        again = calls[n + 1] if n + 1 < len(calls) else None
        assert again and (again.name, again.arguments) == (calls[n].name, calls[n].arguments), (
            seed,
            calls[n],
        )
    assert episode.finished and episode.claim.startswith("Fixed"), (seed, episode.claim)
    command = [sys.executable, *verify.split()[1:]]
    checked = subprocess.run(
        command, cwd=project.path, capture_output=True, text=True, env={**os.environ, **FAST}
    )
    assert checked.returncode == 0, (seed, checked.stdout[-2000:])
