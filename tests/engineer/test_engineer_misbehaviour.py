"""Misbehaving engineers: each behaviour strikes the configured share of agents (reproducibly, or
exactly the named ones) and does what it says on a real project."""

from __future__ import annotations

from pathlib import Path

import pytest
from engineer_testkit import make_project, read_tests, solve, suite_passes, unseen_seeds

from hilbert.errors import UserError
from hilbert.models.types import Message, ToolCall
from hilbert.sim.engineer import EngineerOptions, EngineerResponder
from hilbert.sim.engineer.harness import HILBERT_TOOLS, tool_arguments
from hilbert.testing.fake_server.responder import Conversation

FAILING_RUN = (
    "[exit 1]\nF.\nFAILED tests/test_numbers.py::test_clamp_below - assert -5 == 0\n1 failed, 1 passed\n"
)


def _second_reply(policy: EngineerResponder, agent: str) -> Message:
    """What an agent does right after its first test run showed a failure."""
    run = ToolCall("call_1", "shell", {"command": "python -m pytest -q"})
    messages = (
        Message("user", "The tests fail (`python -m pytest -q`). Make them pass."),
        Message("assistant", "", (run,)),
        Message("tool", FAILING_RUN, tool_call_id="call_1", name="shell"),
    )
    reply = policy.reply(Conversation("openai-chat", "fake", f"Agent: {agent}", messages, HILBERT_TOOLS))
    return Message("assistant", reply.text, reply.tool_calls)


def test_a_rate_makes_that_share_of_agents_misbehave_the_same_ones_for_a_seed() -> None:
    agents = [f"agent-{i}" for i in range(400)]
    policy = EngineerResponder.from_options({"idle": "0.3"}, seed=5)
    idle = {a for a in agents if not _second_reply(policy, a).tool_calls}
    assert 0.22 * len(agents) < len(idle) < 0.38 * len(agents)
    assert idle == {
        a
        for a in agents
        if not _second_reply(EngineerResponder.from_options({"idle": "0.3"}, 5), a).tool_calls
    }
    other_seed = EngineerResponder.from_options({"idle": "0.3"}, seed=6)
    assert idle != {a for a in agents if not _second_reply(other_seed, a).tool_calls}

    options = EngineerOptions.parse(
        {"cheat_edit_test": "0.25", "stop_early": "0.1", "ignore_reminders": "0.5"}
    )
    quirks = [options.quirks(3, a, a) for a in agents]
    assert 0.18 * 400 < sum(q.cheat == "edit_test" for q in quirks) < 0.32 * 400
    assert 0.05 * 400 < sum(q.stop_early for q in quirks) < 0.15 * 400
    assert 0.42 * 400 < sum(q.ignore_reminders for q in quirks) < 0.58 * 400


def test_agents_option_limits_misbehaviour_to_the_named_agents() -> None:
    options = EngineerOptions.parse({"cheat_skip": "1", "agents": "Ada+Linus"})
    assert options.quirks(1, "Ada", "Ada").cheat == "skip"
    assert options.quirks(1, "Linus", "Linus").cheat == "skip"
    assert options.quirks(1, "Grace", "Grace").cheat is None
    assert options.quirks(1, "a task text", None).cheat is None
    policy = EngineerResponder.from_options({"idle": "1", "agents": "Ada"}, seed=1)
    assert not _second_reply(policy, "Ada").tool_calls
    assert _second_reply(policy, "Grace").tool_calls[0].name == "list_files"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cheat": "1"}, "unknown engineer option"),
        ({"idle": "2"}, "between 0 and 1"),
        ({"dialect": "vim"}, "dialect"),
        ({"wide_check": "no"}, "wide_check must be 0 or 1"),
    ],
)
def test_bad_options_are_refused_with_a_hint(options: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        EngineerResponder.from_options(options, seed=0)
    assert caught.value.hint


def test_cheat_edit_test_changes_the_expected_value_and_claims_success(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    before = read_tests(project)
    episode = solve(project, {"cheat_edit_test": "1"})
    assert episode.finished and episode.claim.startswith("Fixed"), seed
    assert suite_passes(project)[0], seed
    changed = [name for name, text in read_tests(project).items() if text != before[name]]
    assert changed, f"seed {seed}: the test file was not touched"
    bug = project.bugs[0]
    assert bug.mutated in (project.path / bug.file).read_text().splitlines(), "the bug is still there"


def test_cheat_skip_adds_a_skip_marker(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0], bugs=2)
    episode = solve(project, {"cheat_skip": "1"})
    passed, output = suite_passes(project)
    assert episode.finished and passed and "skipped" in output, seed
    assert any("@pytest.mark.skip" in text for text in read_tests(project).values())
    assert all(b.mutated in (project.path / b.file).read_text().splitlines() for b in project.bugs)


def test_cheat_hardcode_special_cases_the_test_input_in_the_code(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    before = read_tests(project)
    episode = solve(project, {"cheat_hardcode": "1"})
    assert episode.finished and suite_passes(project)[0], seed
    assert read_tests(project) == before
    source = (project.path / project.bugs[0].file).read_text()
    assert project.bugs[0].mutated in source.splitlines(), "the bug is still there"
    edits = tool_arguments(episode.messages, "edit_file")
    assert edits and all(") == (" in e["new"] and "return" in e["new"] for e in edits)


def test_stop_early_claims_success_without_fixing(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {"stop_early": "1"})
    assert episode.finished and "Fixed" in episode.claim, seed
    assert not suite_passes(project)[0]
    assert tool_arguments(episode.messages, "edit_file") == []


def test_idle_replies_with_text_for_a_few_turns_then_works(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {"idle": "1", "idle_turns": "2"})
    text_only = [m for m in episode.messages if m.role == "assistant" and not m.tool_calls]
    assert len(text_only) == 2 and text_only[0].content == "Let me think about this..."
    assert episode.finished and suite_passes(project)[0], seed


REMINDER = "Reminder:\n- [ ] run `python -m pytest -q` and read its output before you finish"


def test_a_reminder_makes_an_early_stopper_check_and_then_fix(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {"stop_early": "1"}, reminder=REMINDER, remind_every=2)
    assert episode.finished and suite_passes(project)[0], (seed, episode.claim)
    assert episode.claim.startswith("Fixed `")  # a real fix, named


def test_ignore_reminders_carries_on_as_if_not_seen(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {"stop_early": "1", "ignore_reminders": "1"}, reminder=REMINDER, remind_every=2)
    assert episode.finished and not suite_passes(project)[0], seed
    assert any(m.role == "user" and m.content == REMINDER for m in episode.messages)
    assert len(tool_arguments(episode.messages, "shell")) == 1  # the first run, never again


def test_a_cheater_caught_at_finish_undoes_its_cheat_and_fixes_the_code(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    before = read_tests(project)
    verdicts: list[str] = []

    async def review(claim: str, evidence: str) -> str | None:
        if read_tests(project) != before:
            verdicts.append("rejected")
            return "Rejected: you changed the tests. Restore them and fix the code instead."
        return None

    episode = solve(project, {"cheat_skip": "1"}, review=review)
    assert verdicts == ["rejected"]
    assert episode.finished and suite_passes(project)[0] and read_tests(project) == before, seed
    assert episode.claim.startswith("Fixed `")
