"""The `bounds` module of a sample project: pairs of constants on adjacent lines, both wrong, each
read through a function of its own and checked by a test of its own.

    def page_range():
        low = 3      # injected: was 2
        high = 10    # injected: was 11
        return low, high

    def page_low():  return page_range()[0]       def test_page_low_value():  assert page_low() == 2
    def page_high(): return page_range()[1]       def test_page_high_value(): assert page_high() == 11

Each half is one off-by-one bug that its own failing test points at, through a different function, so
a lead that plans one task per function under test gives the halves to two workers; each can fix its
half alone, and the two fixes change adjacent lines, which git reports as a merge conflict. Expected
values come from running the correct source, as for the other modules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hilbert.sim.sample.mutations import rewrites

MODULE = "bounds"
_NOUNS = (
    "page", "port", "retry", "batch", "font", "zoom", "volume", "score", "level", "speed", "window",
    "queue", "cache", "timeout", "thread", "buffer", "column", "margin", "indent", "grid", "tile",
    "frame", "sample", "chunk",
)  # fmt: skip
_WORDS = (("low", "high"), ("start", "stop"), ("first", "last"), ("lower", "upper"), ("least", "most"))


@dataclass(frozen=True)
class Half:
    """One wrong constant: its 1-based line in the module, the function it sits in, the line before and
    after, the function that reads it and the test that checks it (names in the test file)."""

    line: int
    function: str
    original: str
    mutated: str
    reader: str
    test: str


@dataclass(frozen=True)
class PairedModule:
    source: str  # the module as written (both halves of every pair broken)
    tests: str  # the test file's text, given the package the module lives in
    pairs: tuple[tuple[Half, Half], ...]


@dataclass(frozen=True)
class _Pair:
    base: str  # page, port, ..., page2 (past the list of nouns)
    words: tuple[str, str]  # the constants' names: low/high, start/stop, ...
    values: tuple[int, int]

    @property
    def function(self) -> str:
        return f"{self.base}_range"

    @property
    def readers(self) -> tuple[str, str]:
        return f"{self.base}_{self.words[0]}", f"{self.base}_{self.words[1]}"

    def source(self) -> str:
        (first, second), (low, high) = self.words, self.values
        noun = self.base.rstrip("0123456789")
        text = (
            f"def {self.function}():\n"
            f'    """The {first} and {second} {noun} limits, as a pair."""\n'
            f"    {first} = {low}\n"
            f"    {second} = {high}\n"
            f"    return {first}, {second}\n"
        )
        for index, (reader, word) in enumerate(zip(self.readers, self.words, strict=True)):
            text += (
                f"\n\ndef {reader}():\n"
                f'    """The {word} {noun} limit."""\n'
                f"    return {self.function}()[{index}]\n"
            )
        return text


def paired_module(rng: random.Random, package: str, count: int) -> PairedModule:
    """`count` pairs of wrong constants on adjacent lines, each half read by a function of its own."""
    pairs = []
    for i in range(count):
        noun = _NOUNS[i % len(_NOUNS)]
        low = rng.randint(2, 9)
        base = noun if i < len(_NOUNS) else f"{noun}{i // len(_NOUNS) + 1}"
        pairs.append(_Pair(base, rng.choice(_WORDS), (low, low + rng.randint(3, 20))))
    header = f'"""{MODULE.capitalize()}: fixed ranges of settings."""\n'
    correct = header + "".join(f"\n\n{pair.source()}" for pair in pairs)
    readers = [reader for pair in pairs for reader in pair.readers]
    expected = _run(correct, readers)
    lines = correct.splitlines()
    halves: list[tuple[Half, Half]] = []
    for pair in pairs:
        start = lines.index(f"def {pair.function}():")
        found = []
        for offset, reader in enumerate(pair.readers):
            index = start + 2 + offset
            original = lines[index]
            options = [r for r in rewrites(original, "inject") if r.operator == "off_by_one"]
            lines[index] = rng.choice(options).apply(original)
            found.append(
                Half(index + 1, pair.function, original, lines[index], reader, f"test_{reader}_value")
            )
        halves.append((found[0], found[1]))
    source = "\n".join(lines) + "\n"
    broken = _run(source, readers)
    if any(broken[reader] == expected[reader] for reader in readers):  # off by one always shows
        raise RuntimeError("a paired constant was left unbroken")
    return PairedModule(source, _tests(package, readers, expected), tuple(halves))


def _tests(package: str, readers: list[str], expected: dict[str, Any]) -> str:
    tests = [
        f"def test_{reader}_value():\n    assert {reader}() == {expected[reader]!r}\n" for reader in readers
    ]
    return f"from {package}.{MODULE} import {', '.join(readers)}\n\n\n" + "\n\n".join(tests)


def _run(source: str, names: list[str]) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sample>", "exec"), namespace)
    return {name: namespace[name]() for name in names}
