"""The responder registry, scripts from files, and the request log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
import yaml
from fake_server_support import SCRIPT

from hilbert.errors import UserError
from hilbert.testing.fake_server import Conversation, FakeServer, Reply, make_responder, register
from hilbert.testing.fake_server.responders import EchoResponder, ScriptedResponder


def _conversation(*texts: str, assistant_turns: int = 0) -> Conversation:
    from hilbert.models.types import Message

    messages = [Message(role="user", content=text) for text in texts]
    messages += [Message(role="assistant", content="ok")] * assistant_turns
    return Conversation("openai-chat", "m", "", tuple(messages), ())


def test_unknown_responder_names_the_known_ones() -> None:
    with pytest.raises(UserError, match="unknown responder 'nope'") as error:
        make_responder("nope")
    assert error.value.hint is not None and "scripted" in error.value.hint and "engineer" in error.value.hint


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("scripted", "file=PATH"),
        ("scripted:file", "expected key=value"),
        ("scripted:file=/no/such/script.yaml", "cannot read script"),
        ("echo:loud=yes", "takes no options"),
    ],
)
def test_bad_responder_specs_are_user_errors(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        make_responder(spec)


def test_scripted_responder_from_yaml_answers_by_assistant_turns(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    policy = make_responder(f"scripted:file={script}", seed=3)
    first = policy.reply(_conversation("fix it"))
    assert [c.name for c in first.tool_calls] == ["read_file", "run"]
    assert first.tool_calls[0].id != first.tool_calls[1].id
    assert policy.reply(_conversation("fix it")) == first  # deterministic
    assert policy.reply(_conversation("fix it", assistant_turns=1)).text == "All done: the tests pass."
    exhausted = policy.reply(_conversation("fix it", assistant_turns=2))
    assert exhausted.tool_calls == () and "the script has 2 turns" in exhausted.text


def test_script_file_that_is_not_a_list_is_a_user_error(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"text": "hi"}))
    with pytest.raises(UserError, match="list of turns"):
        ScriptedResponder.from_file(script)
    script.write_text(json.dumps([{"txt": "typo"}]))
    with pytest.raises(UserError, match="bad script turn #0"):
        ScriptedResponder.from_file(script)


@dataclass(frozen=True)
class Shouting:
    """A responder of the test's own, registered by name like the simulation's."""

    word: str
    name = "shouting"

    def reply(self, conversation: Conversation) -> Reply:
        return Reply(text=self.word.upper())


def _shouting(options: Mapping[str, str], seed: int) -> Shouting:
    return Shouting(options.get("word", "hello"))


def test_a_registered_responder_is_served_by_name() -> None:
    register("shouting", _shouting)
    register("shouting", _shouting)  # the same factory again: no-op
    with pytest.raises(ValueError, match="already registered"):
        register("shouting", lambda options, seed: Shouting("other"))
    with (
        FakeServer("shouting:word=ahoy") as server,
        openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0) as client,
    ):
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "AHOY" and server.responder_name == "shouting:word=ahoy"


def test_the_simulations_responders_are_registered_by_importing_hilbert_sim() -> None:
    import hilbert.sim

    for name in hilbert.sim.RESPONDERS:
        assert make_responder(name).name == name


def test_echo_responder_answers_the_last_message() -> None:
    assert EchoResponder().reply(_conversation("one", "two")).text == "echo: two"
    assert make_responder("echo").name == "echo"


def test_every_request_is_recorded_in_memory_and_as_jsonl(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "requests.jsonl"
    messages = [{"role": "user", "content": "Fix the failing test."}]
    with (
        FakeServer(ScriptedResponder.from_turns(SCRIPT), record=log) as server,
        openai.OpenAI(base_url=server.openai_base_url, api_key="sk-secret", max_retries=0) as client,
    ):
        client.chat.completions.create(model="fake-gpt", messages=messages)
        client.chat.completions.create(model="fake-gpt", messages=messages, stream=True).close()
        client.models.list()
        in_memory = server.requests
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == json.loads(json.dumps(in_memory))
    first = lines[0]
    assert (first["method"], first["path"], first["protocol"], first["status"]) == (
        "POST",
        "/v1/chat/completions",
        "openai-chat",
        200,
    )
    assert first["body"]["messages"] == messages and first["stream"] is False and first["fault"] is None
    assert [c["name"] for c in first["reply"]["tool_calls"]] == ["read_file", "run"]
    assert first["usage"]["input_tokens"] > 0 and first["usage"]["output_tokens"] > 0
    assert first["headers"]["authorization"] == "***" and "sk-secret" not in log.read_text()
    assert lines[1]["stream"] is True and lines[2]["path"] == "/v1/models"


def test_a_failing_policy_is_a_500_that_names_it() -> None:
    class Broken:
        name = "broken"

        def reply(self, conversation: Conversation) -> None:
            raise RuntimeError("no reply for you")

    with (
        FakeServer(Broken()) as server,  # type: ignore[arg-type]
        openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(openai.InternalServerError, match="no reply for you"):
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="'messages' is required"):
            client.chat.completions.create(model="fake-gpt", messages=None)  # type: ignore[arg-type]
    assert [r["status"] for r in server.requests] == [500, 400]
