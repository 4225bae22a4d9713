"""The responder registry of the fake server, and the simple responders shipped with it.

`make_responder("NAME")` or `make_responder("NAME:key=value,key=value", seed=N)` builds a responder
from the factory registered under NAME. Shipped here:

    scripted:file=PATH   replies from a script (YAML or JSON list of turns, see `ScriptedResponder`)
    echo                 answers with the text of the last user or tool message, never calls tools

Other packages add theirs with `register(name, factory)`; the simulation (`hilbert.sim`: engineer,
lead, judge, reviewer, gullible, longhaul) registers its own when imported, as `hilbert fake-server`
does. This package never imports them: the fake server knows only the names it has been given.

Responders decide from the conversation alone (see responder.py), so they hold no state between calls.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hilbert.errors import UserError
from hilbert.models.types import ToolCall
from hilbert.testing.fake_server.responder import Conversation, Reply, Responder

Factory = Callable[[Mapping[str, str], int], Responder]
"""Builds a responder from its spec's options (`key=value` pairs) and the server's seed."""


def register(name: str, factory: Factory) -> None:
    """Make `name` a responder spec: `make_responder("name:k=v")` calls `factory({"k": "v"}, seed)`.
    Registering the same factory again is a no-op; a different one under a taken name is an error."""
    key = name.strip().lower()
    if _REGISTRY.get(key, factory) is not factory:
        raise ValueError(f"responder {key!r} is already registered")
    _REGISTRY[key] = factory


def known_responders() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def _hint() -> str:
    return (
        f"use NAME or NAME:key=value,..., e.g. scripted:file=turns.yaml"
        f" (known: {', '.join(known_responders())})"
    )


def parse_responder_spec(spec: str) -> tuple[str, dict[str, str]]:
    """`"scripted:file=a.yaml"` → `("scripted", {"file": "a.yaml"})`."""
    name, _, rest = spec.strip().partition(":")
    options: dict[str, str] = {}
    for item in (part.strip() for part in rest.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"bad responder option {item!r} in {spec!r}: expected key=value", hint=_hint())
        options[key.strip()] = value.strip()
    return name.strip().lower(), options


def make_responder(spec: str, *, seed: int = 0) -> Responder:
    """Build the responder named by `spec`; raises UserError for an unknown name or bad options."""
    name, options = parse_responder_spec(spec)
    factory = _REGISTRY.get(name)
    if factory is None:
        hint = "known responders: " + ", ".join(known_responders())
        if "engineer" not in _REGISTRY:
            hint += " (the simulation's, e.g. engineer and lead, register when hilbert.sim is imported)"
        raise UserError(f"unknown responder {name!r}", hint=hint)
    return factory(options, seed)


def _no_options(name: str, options: Mapping[str, str]) -> None:
    if options:
        raise UserError(
            f"responder {name!r} takes no options, got {', '.join(options)}", hint=f"use just {name!r}"
        )


@dataclass(frozen=True)
class EchoResponder:
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
class ScriptedResponder:
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
    def from_turns(cls, turns: Sequence[Any], *, seed: int = 0) -> ScriptedResponder:
        return cls(tuple(_turn_from_json(item, f"#{i}") for i, item in enumerate(turns)), seed=seed)

    @classmethod
    def from_file(cls, path: str | Path, *, seed: int = 0) -> ScriptedResponder:
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
    def from_options(cls, options: Mapping[str, str], seed: int) -> ScriptedResponder:
        if set(options) != {"file"}:
            raise UserError(
                "responder 'scripted' needs exactly one option, file=PATH", hint="scripted:file=turns.yaml"
            )
        return cls.from_file(options["file"], seed=seed)

    def reply(self, conversation: Conversation) -> Reply:
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn >= len(self.turns):
            return Reply(
                text=f"[scripted responder: the script has {len(self.turns)} turns; this is turn {turn}]"
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


def _echo(options: Mapping[str, str], seed: int) -> EchoResponder:
    _no_options("echo", options)
    return EchoResponder()


_REGISTRY: dict[str, Factory] = {"scripted": ScriptedResponder.from_options, "echo": _echo}
