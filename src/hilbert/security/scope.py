"""A task's tool scope: which tools a task may call and, per argument, which values — fixed before the agent
reads any untrusted text, checked before every call, whatever the model decided.

A scope is written as a plain mapping (a plan's task block, YAML, JSON):

    tools:
      read_file: any                      # any arguments
      send_money:
        recipient: UK12345678901234567890 # exactly this value (a bare value, or a list: one of these)
        amount: any
        subject: {glob: "Car Rental*"}     # a text matching a glob (fnmatch, case-sensitive)
        date: {regex: "2022-\\d\\d-\\d\\d"} # a text the regular expression matches in full
        "*": any                          # arguments not named above (without "*": refused)

`ToolScope.from_mapping(data)` reads it (a `UserError` with a hint on anything it cannot read);
`scope.check(name, arguments)` answers None or a `Refusal` (rule `tool_scope`) whose text the model reads as
the tool error. An argument a call leaves out is not checked: the tool's own default applies. Values are
compared as JSON values: `1 == 1.0`, but `true` is not `1`.

What lives here is only the rule and its reading; the shell command itself is checked by
`hilbert.security.policy`, and a scope is only as narrow as whoever wrote it (the lead's plan, before any
worker read a file).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hilbert.errors import UserError
from hilbert.security.policy import Refusal

RULE = "tool_scope"
OTHERS = "*"
HINT = (
    "write `tools:` as a mapping from tool name to `any` or to a mapping from argument name to `any`, "
    "a value, a list of values, {one_of: [...]}, {glob: PATTERN} or {regex: PATTERN}"
)


@dataclass(frozen=True)
class ArgumentRule:
    """What one argument may be: `any` value, `one_of` the `values`, or a text matching a `glob` or a
    `regex` (in full). A pattern speaks for one plain value: a text holding a shell control character
    (`;`, `&`, `|`, a backtick, `$(`, a redirection, a newline) or a `..` path segment never matches
    one, so `python -m pytest*` cannot let `python -m pytest; rm -rf src` through, nor `src/*` reach
    `src/../secret`."""

    kind: Literal["any", "one_of", "glob", "regex"]
    values: tuple[Any, ...] = ()
    pattern: str = ""

    def allows(self, value: Any) -> bool:
        if self.kind == "any":
            return True
        if self.kind == "one_of":
            return any(_same(value, allowed) for allowed in self.values)
        if not isinstance(value, str) or _SMUGGLES.search(value):
            return False
        if self.kind == "glob":
            return fnmatch.fnmatchcase(value, self.pattern)
        return re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        if self.kind == "any":
            return "any value"
        if self.kind == "one_of":
            return "one of " + ", ".join(_show(v) for v in self.values)
        return f"a text matching the {self.kind} {self.pattern!r}"

    def to_data(self) -> Any:
        if self.kind == "any":
            return "any"
        if self.kind == "one_of":
            return {"one_of": list(self.values)}
        return {self.kind: self.pattern}


ANY = ArgumentRule("any")
_SMUGGLES = re.compile(r"[;&|`<>\n\r]|\$\(|(?:^|/)\.\.(?:/|$)")


@dataclass(frozen=True)
class ToolRule:
    """One tool a task may call; `arguments` None: with any arguments. Otherwise each named argument follows
    its rule and the others follow `others` (None: an argument not named is refused)."""

    name: str
    arguments: tuple[tuple[str, ArgumentRule], ...] | None = None
    others: ArgumentRule | None = None

    def check(self, arguments: Mapping[str, Any]) -> Refusal | None:
        if self.arguments is None:
            return None
        rules = dict(self.arguments)
        for argument, value in arguments.items():
            rule = rules.get(argument, self.others)
            if rule is None:
                named = ", ".join(rules) or "none"
                return Refusal(
                    RULE, f"`{self.name}` takes no argument `{argument}` in this task (only {named})"
                )
            if not rule.allows(value):
                return Refusal(
                    RULE,
                    f"argument `{argument}` of `{self.name}` is {_show(value)}; "
                    f"this task allows {rule.describe()}",
                )
        return None


@dataclass(frozen=True)
class ToolScope:
    """The tools a task may call, in the order written."""

    tools: tuple[ToolRule, ...]

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(rule.name for rule in self.tools)

    def allows_tool(self, name: str) -> bool:
        return name in self.tool_names

    def check(self, name: str, arguments: Mapping[str, Any]) -> Refusal | None:
        """Why this task may not call `name` with `arguments`, or None."""
        for rule in self.tools:
            if rule.name == name:
                return rule.check(arguments)
        allowed = ", ".join(self.tool_names) or "none"
        return Refusal(RULE, f"`{name}` is not among this task's tools ({allowed})")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ToolScope:
        """Read a scope written as `{"tools": ...}` (see the module docstring); a list of names allows those
        tools with any arguments."""
        if not isinstance(data, Mapping) or set(data) != {"tools"}:
            keys = sorted(map(str, data)) if isinstance(data, Mapping) else type(data).__name__
            raise UserError(f"a tool scope is a mapping with the one key `tools`, not {keys}", hint=HINT)
        tools = data["tools"]
        if isinstance(tools, list):
            tools = {name: "any" for name in tools} if all(isinstance(n, str) for n in tools) else None
            if tools is None:
                raise UserError("a list of tools holds tool names only", hint=HINT)
        if not isinstance(tools, Mapping):
            raise UserError(f"`tools` is a mapping or a list of names, not {type(tools).__name__}", hint=HINT)
        return cls(tuple(_tool(name, spec) for name, spec in tools.items()))

    def to_mapping(self) -> dict[str, Any]:
        """The scope as `from_mapping` reads it."""
        tools: dict[str, Any] = {}
        for rule in self.tools:
            if rule.arguments is None:
                tools[rule.name] = "any"
                continue
            arguments = {name: argument.to_data() for name, argument in rule.arguments}
            if rule.others is not None:
                arguments[OTHERS] = rule.others.to_data()
            tools[rule.name] = arguments
        return {"tools": tools}


def _tool(name: Any, spec: Any) -> ToolRule:
    if not isinstance(name, str) or not name:
        raise UserError(f"a tool name is a non-empty text, not {name!r}", hint=HINT)
    if spec == "any" or spec is None:
        return ToolRule(name)
    if not isinstance(spec, Mapping):
        raise UserError(f"tool `{name}`: write `any` or a mapping of its arguments, not {spec!r}", hint=HINT)
    rules: list[tuple[str, ArgumentRule]] = []
    others = None
    for argument, rule in spec.items():
        if not isinstance(argument, str) or not argument:
            raise UserError(
                f"tool `{name}`: an argument name is a non-empty text, not {argument!r}", hint=HINT
            )
        parsed = _argument(f"{name}.{argument}", rule)
        if argument == OTHERS:
            others = parsed
        else:
            rules.append((argument, parsed))
    return ToolRule(name, tuple(rules), others)


def _argument(where: str, rule: Any) -> ArgumentRule:
    if rule == "any":
        return ANY
    if isinstance(rule, list):
        return _one_of(where, rule)
    if not isinstance(rule, Mapping):
        _json(where, rule)
        return ArgumentRule("one_of", (rule,))
    if len(rule) != 1 or next(iter(rule)) not in ("one_of", "glob", "regex"):
        raise UserError(
            f"`{where}`: a rule mapping has one key, one_of, glob or regex, not {dict(rule)}", hint=HINT
        )
    kind, value = next(iter(rule.items()))
    if kind == "one_of":
        if not isinstance(value, list):
            raise UserError(f"`{where}`: one_of takes a list of values, not {value!r}", hint=HINT)
        return _one_of(where, value)
    if not isinstance(value, str):
        raise UserError(f"`{where}`: a {kind} is a text, not {value!r}", hint=HINT)
    if kind == "regex":
        try:
            re.compile(value)
        except re.error as bad:
            raise UserError(f"`{where}`: the regex {value!r} does not compile: {bad}", hint=HINT) from None
    return ArgumentRule(kind, pattern=value)


def _one_of(where: str, values: list[Any]) -> ArgumentRule:
    if not values:
        raise UserError(f"`{where}`: an empty list allows nothing; leave the argument out instead", hint=HINT)
    for value in values:
        _json(where, value)
    return ArgumentRule("one_of", tuple(values))


def _json(where: str, value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise UserError(f"`{where}`: {value!r} is not a JSON value", hint=HINT) from None


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: numbers by value, booleans only to booleans, containers element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = ["ANY", "RULE", "ArgumentRule", "ToolRule", "ToolScope"]
