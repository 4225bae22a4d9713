"""Near-duplicate tries, rejected before they are measured (a measurement is the costly part).

A try's fingerprint is the set of hashed 4-token shingles of the lines its diff adds and removes (each
prefixed with its sign, tokens split on non-word characters, so spacing and line wrapping do not
matter). Two tries are near-duplicates when the Jaccard similarity of their fingerprints is at least
`THRESHOLD`, or when their trees are equal.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

THRESHOLD = 0.9
SHINGLE = 4
_TOKEN = re.compile(r"\w+|[^\w\s]")


def fingerprint(diff: str) -> frozenset[int]:
    """The hashed shingles of a unified diff's changed lines (file headers left out)."""
    tokens: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        tokens += [line[0] + token for token in _TOKEN.findall(line[1:])]
    if len(tokens) < SHINGLE:
        return frozenset([_hash(" ".join(tokens))]) if tokens else frozenset()
    return frozenset(_hash(" ".join(tokens[i : i + SHINGLE])) for i in range(len(tokens) - SHINGLE + 1))


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "big")


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def duplicate_of(
    shingles: frozenset[int], tree: str, earlier: Iterable[tuple[int, frozenset[int], str]]
) -> tuple[int, float] | None:
    """The earlier try (number, similarity) this one nearly duplicates, or None. `earlier`: (number,
    fingerprint, tree) of the tries the gate let through (measured, or failing their measurement)."""
    for number, other, other_tree in earlier:
        if tree and tree == other_tree:
            return number, 1.0
        similarity = jaccard(shingles, other)
        if similarity >= THRESHOLD:
            return number, similarity
    return None


__all__ = ["THRESHOLD", "duplicate_of", "fingerprint", "jaccard"]
