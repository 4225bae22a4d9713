"""The client quirks that the end-to-end runs do not reach on their seeds, on conversations shaped like
the ones the real clients sent (see tools/README.md): Claude Code's `Wasted call` answer to a second
Read, mini-swe-agent's long-output observation, and aider's history (examples, listings, "Ok."
acknowledgements, the test output sent twice) read back as the engineer's own turns."""

from __future__ import annotations

import json

from hilbert.models.types import Message, ToolCall, ToolSpec
from hilbert.sim.engineer.actions import Grep, Read, Run
from hilbert.sim.engineer.dialects.aider import detect as detect_aider
from hilbert.sim.engineer.dialects.external import detect_claude_code, detect_mini_swe_agent
from hilbert.testing.fake_server.responder import Conversation

SOURCE = "def add(a, b):\n    return a - b\n"


def _tool(name: str, *params: str) -> ToolSpec:
    properties = {p: {"type": "string"} for p in params}
    return ToolSpec(name, name, {"type": "object", "properties": properties})


def test_claude_code_second_read_is_answered_from_the_first() -> None:
    read = ToolCall("t1", "Read", {"file_path": "/p/calc.py"})
    again = ToolCall("t2", "Read", {"file_path": "calc.py"})
    listing = "1\tdef add(a, b):\n2\t    return a - b\n3\t"
    wasted = "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."
    messages = (
        Message("user", "fix it"),
        Message("assistant", tool_calls=(read,)),
        Message("tool", listing, tool_call_id="t1", name="Read"),
        Message("assistant", tool_calls=(again,)),
        Message("tool", wasted, tool_call_id="t2", name="Read"),
    )
    tools = (_tool("Bash", "command"), _tool("Read", "file_path"), _tool("Edit", "file_path"))
    system = "Environment\n - Primary working directory: /p\n"
    dialect = detect_claude_code(Conversation("anthropic", "m", system, messages, tools))
    assert dialect is not None
    assert dialect.observe(messages[-1:], ()).text == listing
    failed = Message("tool", "Exit code 1\nF\n1 failed", tool_call_id="t3", name="Bash", is_error=True)
    assert (dialect.observe([failed], ()).exit_code, dialect.observe([failed], ()).text) == (1, "F\n1 failed")


def test_mini_swe_agent_long_output_keeps_head_and_tail() -> None:
    conversation = Conversation(
        "openai-chat",
        "m",
        "",
        (Message("user", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),),
        (_tool("bash", "command"),),
    )
    dialect = detect_mini_swe_agent(conversation)
    assert dialect is not None
    answer = {"returncode": 1, "output_head": "FAILED a", "output_tail": "1 failed", "elided_chars": 9}
    observation = dialect.observe([Message("tool", json.dumps(answer))], ())
    assert observation.exit_code == 1
    assert observation.text.startswith("FAILED a") and observation.text.endswith("1 failed")


def test_aider_history_becomes_the_engineers_turns() -> None:
    ran = "I ran this command:\n\npython -m pytest -q\n\nAnd got this output:\n\n"
    ran += "FAILED tests/t.py::test_add - x\n"
    edit = "Trying.\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n"
    edit += "    return a + b\n>>>>>>> REPLACE\n```\n"
    fixed = SOURCE.replace("a - b", "a + b")
    listing = "I have *added these files to the chat* so you can go ahead and edit them.\n\n"
    listing += f"calc.py\n```\n{fixed}```\n"
    messages = (
        Message("user", "Change get_factorial() to use math.factorial"),
        Message("assistant", "To make this change ... (an example)"),
        Message("user", "I switched to a new code base. Please don't consider the above files."),
        Message("assistant", "Ok."),
        Message("user", listing),
        Message("assistant", "Ok, any changes I propose will be to those files."),
        Message("user", "The tests fail (`python -m pytest -q`)."),
        Message("assistant", "Please run `python -m pytest -q` and show me its output."),
        Message("user", ran),
        Message("assistant", "Ok."),
        Message("user", ran + "\n# *SEARCH/REPLACE block* Rules:\n..."),
        Message("assistant", edit),
        Message("user", ran),
    )
    dialect = detect_aider(Conversation("openai-chat", "m", "Use *SEARCH/REPLACE* blocks.", messages, ()))
    assert dialect is not None
    view = dialect.transcript(Conversation("openai-chat", "m", "s", messages, ()))
    assert [m.role for m in view.messages] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert view.messages[0].content == "The tests fail (`python -m pytest -q`)."
    assert dialect.observe(view.messages[2:3], ()).exit_code == 1  # the asked-for test run
    before_edit = dialect.answer(Read("calc.py"), turn=1)
    assert before_edit is not None and "return a - b" in before_edit.text  # later edit undone
    after_edit = dialect.answer(Grep("a \\+ b"), turn=2)
    assert after_edit is not None and after_edit.text == "calc.py:2:    return a + b"
    single = dialect.answer(Run("python -m pytest -q -x tests/t.py::test_other"), turn=2)
    assert single is not None and single.exit_code == 0
    assert dialect.answer(Run("python -m pytest -q"), turn=0) is None  # nothing shown yet: ask
