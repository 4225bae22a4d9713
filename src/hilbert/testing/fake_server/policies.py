"""The policy registry of the fake server, and the simple policies shipped with it.

`make_policy("NAME")` or `make_policy("NAME:key=value,key=value", seed=N)` builds a policy:

    scripted:file=PATH   replies from a script (YAML or JSON list of turns, see `ScriptedPolicy`)
    echo                 answers with the text of the last user or tool message, never calls tools
    engineer             hilbert.testing.engineer.EngineerPolicy (imported only when asked for)
    lead                 hilbert.testing.lead.LeadPolicy (plans and answers escalations)
    judge                hilbert.testing.judge.JudgePolicy (the stop gate's verdict, as JSON)
    gullible             hilbert.testing.gullible.GulliblePolicy (obeys any instruction; an attacker)
    longhaul             hilbert.testing.longhaul.LonghaulPolicy (a task that outgrows its context)
    reviewer             hilbert.testing.reviewer.ReviewerPolicy (the review panel's findings, as JSON)

Policies decide from the conversation alone (see policy.py), so they hold no state between calls.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hilbert.errors import UserError
from hilbert.models.types import ToolCall
from hilbert.testing.fake_server.policy import Conversation, Policy, Reply

KNOWN_POLICIES = ("scripted", "echo", "engineer", "lead", "judge", "gullible", "reviewer", "longhaul")
_SPEC_HINT = (
    f"use NAME or NAME:key=value,..., e.g. scripted:file=turns.yaml (known: {', '.join(KNOWN_POLICIES)})"
)


def parse_policy_spec(spec: str) -> tuple[str, dict[str, str]]:
    """`"scripted:file=a.yaml"` → `("scripted", {"file": "a.yaml"})`."""
    name, _, rest = spec.strip().partition(":")
    options: dict[str, str] = {}
    for item in (part.strip() for part in rest.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"bad policy option {item!r} in {spec!r}: expected key=value", hint=_SPEC_HINT)
        options[key.strip()] = value.strip()
    return name.strip().lower(), options


def make_policy(spec: str, *, seed: int = 0) -> Policy:
    """Build the policy named by `spec`; raises UserError for an unknown name or bad options."""
    name, options = parse_policy_spec(spec)
    if name == "scripted":
        return ScriptedPolicy.from_options(options, seed)
    if name == "echo":
        _no_options(name, options)
        return EchoPolicy()
    if name == "engineer":
        try:
            from hilbert.testing.engineer import EngineerPolicy
        except ModuleNotFoundError as err:
            if err.name not in ("hilbert.testing.engineer", "hilbert.testing"):
                raise
            raise UserError(
                "policy 'engineer' is not available: hilbert.testing.engineer is missing",
                hint="use another policy: " + ", ".join(p for p in KNOWN_POLICIES if p != "engineer"),
            ) from None
        return EngineerPolicy.from_options(options, seed)
    if name == "lead":
        from hilbert.testing.lead import LeadPolicy

        return LeadPolicy.from_options(options, seed)
    if name == "reviewer":
        from hilbert.testing.reviewer import ReviewerPolicy

        return ReviewerPolicy.from_options(options, seed)
    if name == "gullible":
        from hilbert.testing.gullible import GulliblePolicy

        return GulliblePolicy.from_options(options, seed)
    if name == "longhaul":
        from hilbert.testing.longhaul import LonghaulPolicy

        return LonghaulPolicy.from_options(options, seed)
    if name == "judge":
        from hilbert.testing.judge import JudgePolicy

        return JudgePolicy.from_options(options, seed)
    raise UserError(f"unknown policy {name!r}", hint="known policies: " + ", ".join(KNOWN_POLICIES))


def _no_options(name: str, options: Mapping[str, str]) -> None:
    if options:
        raise UserError(
            f"policy {name!r} takes no options, got {', '.join(options)}", hint=f"use just {name!r}"
        )


@dataclass(frozen=True)
class EchoPolicy:
    """Answers with the last user or tool message's text (prefixed `echo: `); never calls a tool."""

    name = "echo"  # a class attribute, not a field

    def reply(self, conversation: Conversation) -> Reply:
        for message in reversed(conversation.messages):
            if message.role in ("user", "tool"):
                return Reply(text=f"echo: {message.content}")
        return Reply(text="echo:")


@dataclass(frozen=True)
class ScriptedTurn:
    text: str = ""
    tool_calls: tuple[tuple[str | None, str, Any], ...] = ()  # (id or None, name, arguments)


def _turn_from_json(item: Any, where: str) -> ScriptedTurn:
    hint = "each turn is a string or {text: ..., tool_calls: [{name: ..., arguments: {...}}]}"
    if isinstance(item, str):
        return ScriptedTurn(text=item)
    if not isinstance(item, Mapping) or set(item) - {"text", "tool_calls"}:
        raise UserError(f"bad script turn {where}: {json.dumps(item, default=str)[:120]}", hint=hint)
    calls = []
    for call in item.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise UserError(f"bad tool call in script turn {where}: {call!r}"[:200], hint=hint)
        arguments = call.get("arguments", {})
        if not isinstance(arguments, (Mapping, str)):
            raise UserError(f"bad arguments in script turn {where}: not an object or a string", hint=hint)
        calls.append((call.get("id"), call["name"], arguments))
    return ScriptedTurn(text=str(item.get("text") or ""), tool_calls=tuple(calls))


@dataclass(frozen=True)
class ScriptedPolicy:
    """Replies from a script: turn i answers the request whose conversation has i assistant turns.

    A turn is text and/or tool calls `{name, arguments}` (arguments an object, or a string that is sent
    as is, which allows invalid JSON on purpose; an optional `id`). Tool call ids are derived from the
    seed, the first user message, the turn and the call's position, so they are stable and distinct.
    Once the script is exhausted the reply is a plain text saying so (no tool call, so agents stop).
    """

    turns: tuple[ScriptedTurn, ...]
    seed: int = 0
    name = "scripted"  # a class attribute, not a field

    @classmethod
    def from_turns(cls, turns: Sequence[Any], *, seed: int = 0) -> ScriptedPolicy:
        return cls(tuple(_turn_from_json(item, f"#{i}") for i, item in enumerate(turns)), seed=seed)

    @classmethod
    def from_file(cls, path: str | Path, *, seed: int = 0) -> ScriptedPolicy:
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as err:
            raise UserError(
                f"cannot read script {path}: {err.strerror}", hint="check the file= path"
            ) from None
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as err:
            raise UserError(f"script {path} is not valid JSON/YAML: {str(err).splitlines()[0]}") from None
        if isinstance(data, Mapping) and "turns" in data:
            data = data["turns"]
        if not isinstance(data, list):
            raise UserError(
                f"script {path} must hold a list of turns", hint="a YAML/JSON list, one item a turn"
            )
        return cls.from_turns(data, seed=seed)

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> ScriptedPolicy:
        if set(options) != {"file"}:
            raise UserError(
                "policy 'scripted' needs exactly one option, file=PATH", hint="scripted:file=turns.yaml"
            )
        return cls.from_file(options["file"], seed=seed)

    def reply(self, conversation: Conversation) -> Reply:
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn >= len(self.turns):
            return Reply(
                text=f"[scripted policy: the script has {len(self.turns)} turns; this is turn {turn}]"
            )
        first_user = next((m.content for m in conversation.messages if m.role == "user"), "")
        prefix = "toolu_" if conversation.protocol == "anthropic" else "call_"
        calls = []
        for index, (call_id, name, arguments) in enumerate(self.turns[turn].tool_calls):
            if call_id is None:
                key = f"{self.seed}\x1f{first_user}\x1f{turn}\x1f{index}".encode()
                call_id = prefix + hashlib.sha256(key).hexdigest()[:24]
            if isinstance(arguments, str):
                calls.append(ToolCall(id=call_id, name=name, raw_arguments=arguments))
            else:
                calls.append(ToolCall(id=call_id, name=name, arguments=dict(arguments)))
        return Reply(text=self.turns[turn].text, tool_calls=tuple(calls))
