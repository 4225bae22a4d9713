"""Text as a model reads it: the skeleton `defang` looks for an envelope's tag in.

A model reads `＜ｍｅｓｓａｇｅ`, `<mеssage` (a Cyrillic е), `<` and `message` with a zero-width space
between, `&lt;message`, `&#x3c;message`, `&amp;lt;message` and `\\u003cmessage` all as `<message`.
`skeleton(text)` folds each of those forms to the plain lower-case ASCII it passes for, and says where in
`text` each of its characters came from, so a match in the skeleton can be made inert in the original:

- each character: case-folded, NFKD-normalised (fullwidth and other compatibility forms become ASCII),
  combining marks and invisible format characters (zero-width spaces and joiners, soft hyphens, byte order
  marks, …) dropped, and the look-alikes NFKD leaves alone (`LOOKALIKES`: angle quotes and brackets, other
  slashes, the Cyrillic and Greek letters of "message") mapped to the ASCII they imitate;
- then HTML/XML character references (named, with or without `;`; decimal; hex) and `\\uXXXX` / `\\xXX`
  escapes decoded, the result folded again, up to `DECODE_ROUNDS` times (`&amp;lt;` is `<` in two).

Pure and deterministic: the same text gives the same skeleton. What must not live here: what counts as a
tag (`hilbert.security.envelope`). Plain ASCII text without `&` or `\\` takes a fast path (lower-casing).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from html.entities import html5

DECODE_ROUNDS = 8  # references inside references: deeper than this, no reader takes it for a character
_DROPPED = frozenset({"Cf", "Mn", "Me"})  # format characters (zero-width, soft hyphen, BOM) and marks
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # blank-looking letters (Hangul fillers, braille)
LOOKALIKES = {
    **dict.fromkeys("‹〈⟨〈ᐸ˂❮⧼≺ᚲ", "<"),
    **dict.fromkeys("⁄∕⧸╱᜵〳", "/"),
    **dict.fromkeys("мᴍ", "m"),
    **dict.fromkeys("еєҽ℮ε", "e"),
    **dict.fromkeys("ѕꜱ", "s"),
    **dict.fromkeys("аɑα⍺", "a"),
    **dict.fromkeys("ɡց", "g"),
}
_REFERENCE = re.compile(
    r"&#x0*([0-9a-f]{1,6});?|&#0*([0-9]{1,7});?|&([a-z][a-z0-9]{0,31})(;?)"
    r"|\\u([0-9a-f]{4})|\\u\{0*([0-9a-f]{1,6})\}|\\x([0-9a-f]{2})|\\(/)"
)


@functools.lru_cache(maxsize=8192)
def fold(char: str) -> str:
    """What one character reads as: "" for an invisible one, else its folded, normalised form."""
    if char in LOOKALIKES:
        return LOOKALIKES[char]
    if char in _FILLERS or unicodedata.category(char) in _DROPPED:
        return ""
    kept = []
    for part in unicodedata.normalize("NFKD", char.casefold()):
        if unicodedata.category(part) not in _DROPPED:
            kept.append(LOOKALIKES.get(part, part))
    return "".join(kept)


def skeleton(text: str) -> tuple[str, list[int], list[int]]:
    """`text` as a model reads it, and for each of its characters where it came from in `text`
    (`starts[i]:ends[i]`)."""
    if text.isascii():
        lowered = text.lower()
        starts, ends = list(range(len(text))), list(range(1, len(text) + 1))
        if "&" not in lowered and "\\" not in lowered:
            return lowered, starts, ends
        chars = list(lowered)
    else:
        chars, starts, ends = [], [], []
        for at, char in enumerate(text):
            for part in fold(char):
                chars.append(part)
                starts.append(at)
                ends.append(at + 1)
    for _ in range(DECODE_ROUNDS):
        decoded = _decode("".join(chars), starts, ends)
        if decoded is None:
            break
        chars, starts, ends = decoded
    return "".join(chars), starts, ends


def _decode(text: str, starts: list[int], ends: list[int]) -> tuple[list[str], list[int], list[int]] | None:
    """One round of decoding references and escapes in a skeleton (None: there was none)."""
    chars: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    done = 0
    for found in _REFERENCE.finditer(text):
        reference = _reference(found)
        if reference is None:
            continue
        decoded, end = reference
        begin = found.start()
        chars.extend(text[done:begin])
        new_starts.extend(starts[done:begin])
        new_ends.extend(ends[done:begin])
        for part in "".join(fold(c) for c in decoded):
            chars.append(part)
            new_starts.append(starts[begin])
            new_ends.append(ends[end - 1])
        done = end
    if not done:
        return None
    chars.extend(text[done:])
    return chars, [*new_starts, *starts[done:]], [*new_ends, *ends[done:]]


def _reference(found: re.Match[str]) -> tuple[str, int] | None:
    """What a matched reference or escape decodes to, and where it ends (None: it is not one)."""
    hexa, decimal, name, semicolon, escaped, braced, byte, slash = found.groups()
    if slash:
        return "/", found.end()
    number = hexa or escaped or braced or byte
    code = int(number, 16) if number else int(decimal) if decimal else None
    if code is not None:
        return (chr(code), found.end()) if 0 < code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else None
    if semicolon and f"{name};" in html5:
        return html5[f"{name};"], found.end()
    for length in range(len(name), 0, -1):  # a legacy reference needs no `;`: `&ltmessage` reads `<message`
        if name[:length] in html5:
            return html5[name[:length]], found.start() + 1 + length
    return None


__all__ = ["DECODE_ROUNDS", "LOOKALIKES", "fold", "skeleton"]
