"""Dialects: the engineer picks its tool set from the tools offered, speaks each correctly, and is
stateless: any prefix of a conversation it had gets the same next turn from a fresh policy."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from engineer_testkit import make_project, solve, unseen_seeds

from hilbert.models.types import Message, ToolSpec
from hilbert.sim.engineer import EngineerResponder
from hilbert.sim.engineer.actions import Edit, Finish, Read
from hilbert.sim.engineer.dialects import choose
from hilbert.sim.engineer.dialects.bash import BashDialect
from hilbert.sim.engineer.harness import BASH_TOOL, HILBERT_TOOLS
from hilbert.testing.fake_server.responder import Conversation

TASK = Message("user", "The tests of this project fail (`python -m pytest -q`). Make them pass.")


def _conversation(tools: tuple[ToolSpec, ...], system: str = "") -> Conversation:
    return Conversation("openai-chat", "fake", system, (TASK,), tools)


def test_the_dialect_follows_the_offered_tools() -> None:
    assert choose(_conversation(HILBERT_TOOLS)).name == "hilbert"
    assert choose(_conversation((BASH_TOOL,))).name == "bash"
    policy = EngineerResponder()
    first = policy.reply(_conversation(HILBERT_TOOLS)).tool_calls[0]
    assert (first.name, first.arguments) == ("shell", {"command": "python -m pytest -q"})
    first = policy.reply(_conversation((BASH_TOOL,))).tool_calls[0]
    assert (first.name, first.arguments) == ("bash", {"command": "python -m pytest -q"})


def test_unknown_tools_get_a_clear_text_answer_instead_of_a_guess() -> None:
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    claude_like = tuple(ToolSpec(name, "", schema) for name in ("Read", "Edit", "Glob"))
    reply = EngineerResponder().reply(_conversation(claude_like))
    assert not reply.tool_calls
    assert "Read, Edit, Glob" in reply.text and "command" in reply.text
    forced = EngineerResponder.from_options({"dialect": "bash"}, seed=0).reply(_conversation(HILBERT_TOOLS))
    assert not forced.tool_calls and "shell" in forced.text


def test_bash_edit_replaces_exactly_one_occurrence_whatever_the_quoting(tmp_path: Path) -> None:
    original = "a = 'it''s'\nb = \"$HOME\\n\" + `x`\nc = 1\nc = 1\n"
    (tmp_path / "f.py").write_text(original)
    dialect = BashDialect("bash")
    edit = dialect.command(Edit("f.py", 'b = "$HOME\\n" + `x`\n', "b = '$PATH' \\\\ \"ok\"\n"))
    done = subprocess.run(["bash", "-c", edit], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "f.py").read_text() == "a = 'it''s'\nb = '$PATH' \\\\ \"ok\"\nc = 1\nc = 1\n"
    twice = subprocess.run(["bash", "-c", dialect.command(Edit("f.py", "c = 1", "c = 2"))], cwd=tmp_path)
    assert twice.returncode != 0 and "c = 2" not in (tmp_path / "f.py").read_text()
    listing = subprocess.run(
        ["bash", "-c", dialect.command(Read("f.py", 2, 3))], cwd=tmp_path, capture_output=True
    )
    assert listing.stdout.decode().splitlines()[0] == "     2\tb = '$PATH' \\\\ \"ok\""


def test_bash_results_are_read_in_the_common_shapes() -> None:
    dialect = BashDialect("bash")
    tool = Message("tool", "<returncode>1</returncode>\n<output>\nF\n1 failed\n</output>", tool_call_id="c")
    seen = dialect.observe([tool], [Message("user", "note")])
    assert (seen.exit_code, seen.text, seen.notes) == (1, "F\n1 failed", ("note",))
    assert dialect.observe([Message("tool", "[exit 0]\nok\n")], []).exit_code == 0
    finish = Finish("Fixed it.", "3 passed")
    assert (
        dialect.render(finish, "c1").text.startswith("Fixed it.")
        and not dialect.render(finish, "c1").tool_calls
    )


def test_a_fresh_policy_replays_every_turn_of_a_finished_run(tmp_path: Path) -> None:
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {"idle": "1", "idle_turns": "1"}, agent="Grace")
    assert episode.finished, seed
    system = "You are a careful software engineer.\nAgent: Grace\n"
    for index, message in enumerate(episode.messages):
        if message.role != "assistant":
            continue
        fresh = EngineerResponder.from_options({"idle": "1", "idle_turns": "1"}, seed=project.seed)
        conversation = Conversation("anthropic", "fake", system, episode.messages[:index], HILBERT_TOOLS)
        reply = fresh.reply(conversation)
        assert (reply.text, reply.tool_calls) == (message.content, message.tool_calls), (seed, index)


def test_a_call_the_client_recorded_with_a_default_it_filled_in_is_still_the_engineers_own(
    tmp_path: Path,
) -> None:
    """Claude Code sends back every Edit with `replace_all: false` added. A fresh policy must still
    take those turns as its own and go on, not start the task over (as after a compaction): starting
    over after a send-back repeated the early stop it had already been sent back for."""
    project = make_project(tmp_path, seed := unseen_seeds(1)[0])
    episode = solve(project, {}, agent="Grace")
    assert episode.finished, seed
    system = "You are a careful software engineer.\nAgent: Grace\n"
    recorded = [
        replace(
            m,
            tool_calls=tuple(
                replace(c, arguments={**c.arguments, "replace_all": False}) for c in m.tool_calls
            ),
        )
        for m in episode.messages
    ]
    for index, message in enumerate(episode.messages):
        if message.role != "assistant":
            continue
        fresh = EngineerResponder.from_options({}, seed=project.seed)
        reply = fresh.reply(Conversation("anthropic", "fake", system, tuple(recorded[:index]), HILBERT_TOOLS))
        assert (reply.text, reply.tool_calls) == (message.content, message.tool_calls), (seed, index)
