"""Mutation operators: the *kinds* of one-token bugs, as rewrites of a single source line.

`rewrites(line, "inject")` lists every way one operator can break a line (the sample-project generator
picks one); `rewrites(line, "repair")` lists every single-site rewrite that could undo such a bug (the
engineer responder tries them). Every injected rewrite is undone by some repair rewrite of the mutated
line: most operators are their own inverse; `negation` injects by dropping a `not` and repairs by
adding one back. Lines are read with `tokenize`, so text inside string literals is never touched.

This module knows kinds of bugs only; which bug a project holds is recorded by the generator alone.
"""

from __future__ import annotations

import io
import keyword
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Direction = Literal["inject", "repair"]

OPERATORS: tuple[str, ...] = (
    "boundary",  # <  <->  <=   and   >  <->  >=
    "equality",  # ==  <->  !=
    "arithmetic",  # +  <->  -,  *  <->  //  (also += -= *= //=)
    "off_by_one",  # integer literal n  ->  n + 1 or n - 1
    "boolean",  # and  <->  or
    "negation",  # drop a `not` (repair: add one)
    "min_max",  # min(  <->  max(
    "first_last",  # [0]  <->  [-1]
    "truth",  # True  <->  False
)

_SWAPS: dict[str, tuple[str, dict[str, str]]] = {
    "boundary": ("op", {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}),
    "equality": ("op", {"==": "!=", "!=": "=="}),
    "arithmetic": (
        "op",
        {"+": "-", "-": "+", "*": "//", "//": "*", "+=": "-=", "-=": "+=", "*=": "//=", "//=": "*="},
    ),
    "boolean": ("name", {"and": "or", "or": "and"}),
    "min_max": ("name", {"min": "max", "max": "min"}),
    "truth": ("name", {"True": "False", "False": "True"}),
}
_NOT_AFTER = frozenset({"if", "elif", "return", "and", "or"})  # where a dropped `not` may have stood


@dataclass(frozen=True)
class Rewrite:
    """Replace `line[start:end]` with `text`; `operator` names the kind."""

    operator: str
    start: int
    end: int
    text: str

    def apply(self, line: str) -> str:
        return line[: self.start] + self.text + line[self.end :]


@dataclass(frozen=True)
class _Tok:
    kind: str  # "op", "name", "number", "string", "other"
    text: str
    start: int
    end: int


def rewrites(line: str, direction: Direction) -> list[Rewrite]:
    """All single-site rewrites of one source line, in reading order, without duplicates."""
    tokens = _tokens(line)
    found: list[Rewrite] = []
    for index, token in enumerate(tokens):
        found.extend(_at(tokens, index, token, direction))
    seen: set[str] = set()
    unique = []
    for rewrite in found:
        result = rewrite.apply(line)
        if result != line and result not in seen:
            seen.add(result)
            unique.append(rewrite)
    return unique


def _at(tokens: list[_Tok], i: int, tok: _Tok, direction: Direction) -> Iterator[Rewrite]:
    prev = tokens[i - 1] if i else None
    after_operand = prev is not None and _ends_operand(prev)
    for operator, (kind, table) in _SWAPS.items():
        if tok.kind != kind or tok.text not in table:
            continue
        if operator == "arithmetic" and tok.text in ("+", "-", "*") and not after_operand:
            continue  # unary minus/plus, star-args
        if operator == "min_max" and not _called(tokens, i, prev):
            continue
        yield Rewrite(operator, tok.start, tok.end, table[tok.text])
    if tok.kind == "number" and tok.text.isdigit():
        value = int(tok.text)
        after_sign = prev is not None and prev.text in ("+", "-")
        yield Rewrite("off_by_one", tok.start, tok.end, str(value + 1))
        if value > 1 or (value == 1 and not after_sign):
            yield Rewrite("off_by_one", tok.start, tok.end, str(value - 1))  # never `-0` or `+ 0`
    if tok.text == "[" and after_operand:
        texts = [t.text for t in tokens[i + 1 : i + 4]]
        if texts[:2] == ["0", "]"]:
            yield Rewrite("first_last", tok.end, tokens[i + 1].end, "-1")
        elif texts == ["-", "1", "]"]:
            yield Rewrite("first_last", tok.end, tokens[i + 2].end, "0")
    yield from _negation(tokens, i, tok, direction)


def _negation(tokens: list[_Tok], i: int, tok: _Tok, direction: Direction) -> Iterator[Rewrite]:
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    prev = tokens[i - 1] if i else None
    if tok.kind != "name" or nxt is None:
        return
    if direction == "inject":
        unary = tok.text == "not" and prev is not None and prev.text in _NOT_AFTER
        not_in = tok.text == "not" and nxt.text == "in" and prev is not None and _ends_operand(prev)
        is_not = tok.text == "is" and nxt.text == "not"
        if unary or not_in:
            yield Rewrite("negation", tok.start, nxt.start, "")
        elif is_not:
            yield Rewrite("negation", tok.end, nxt.end, "")
        return
    if tok.text in _NOT_AFTER and nxt.text != "not":
        yield Rewrite("negation", nxt.start, nxt.start, "not ")
    elif tok.text == "in" and _is_comparison_in(tokens, i) and (prev is None or prev.text != "not"):
        yield Rewrite("negation", tok.start, tok.start, "not ")
    elif tok.text == "is" and nxt.text != "not":
        yield Rewrite("negation", tok.end, tok.end, " not")
    if tok.text == "not" and prev is not None and (prev.text in _NOT_AFTER or nxt.text == "in"):
        yield Rewrite("negation", tok.start, nxt.start, "")


def _is_comparison_in(tokens: list[_Tok], i: int) -> bool:
    """`in` after `for TARGET` is a loop's; any other `in` is a membership test."""
    pending_for = False
    for j, tok in enumerate(tokens[: i + 1]):
        if tok.text == "for":
            pending_for = True
        elif tok.text == "in":
            if j == i:
                return not pending_for
            pending_for = False
    return True


def _ends_operand(tok: _Tok) -> bool:
    if tok.kind in ("number", "string"):
        return True
    if tok.kind == "name":
        return not keyword.iskeyword(tok.text) or tok.text in ("True", "False", "None")
    return tok.text in (")", "]", "}")


def _called(tokens: list[_Tok], i: int, prev: _Tok | None) -> bool:
    followed = i + 1 < len(tokens) and tokens[i + 1].text == "("
    return followed and (prev is None or prev.text not in (".", "def"))


def _tokens(line: str) -> list[_Tok]:
    """Tokens of one line with columns into `line`; stops quietly where the line is incomplete."""
    body = line.lstrip()
    offset = len(line) - len(body)
    found: list[_Tok] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(body + "\n").readline):
            if tok.start[0] != 1:
                break
            kind = {
                tokenize.OP: "op",
                tokenize.NAME: "name",
                tokenize.NUMBER: "number",
                tokenize.STRING: "string",
            }.get(tok.type, "other")
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
                continue
            found.append(_Tok(kind, tok.string, tok.start[1] + offset, tok.end[1] + offset))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found
