"""Reading PLAN.md's markdown: code fences (the CommonMark way: up to three spaces of indent, backticks or
tildes, a closing fence at least as long), `## ID — Title` task headings, and each task's
`yaml hilbert-task` blocks, with 1-based line numbers for error messages. `plan` turns the result
into a validated `Plan`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hilbert.errors import UserError

_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_HEADING = re.compile(r" {0,3}##(?:[ \t]|$)")
_TASK_HEADING = re.compile(r" {0,3}##[ \t]+(\S+)[ \t]+[—–-][ \t]+(.*?)[ \t]*")


@dataclass
class Section:
    """One task's lines as found in the file (line numbers are 1-based)."""

    heading_line: int
    task_id: str
    title: str
    text: list[str] = field(default_factory=list)
    blocks: list[tuple[int, str]] = field(default_factory=list)  # (fence line, yaml text)


@dataclass(frozen=True)
class _Markdown:
    intro: list[str]
    sections: list[Section]
    stray_block: int | None  # a task block before the first heading
    unclosed_fence: int | None


def read_markdown(lines: list[str], *, source: str) -> _Markdown:
    intro: list[str] = []
    sections: list[Section] = []
    stray: int | None = None
    number = 0
    while number < len(lines):
        line, number = lines[number], number + 1
        opening = _FENCE_OPEN.fullmatch(line)
        if opening and not (opening[2][0] == "`" and "`" in opening[3]):
            indent, fence, info = len(opening[1]), opening[2], opening[3]
            start, body = number, []
            closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
            while number < len(lines) and not closing.fullmatch(lines[number]):
                body.append(lines[number])
                number += 1
            if number == len(lines):
                return _Markdown(intro, sections, stray, start)
            number += 1
            if info.split() == ["yaml", "hilbert-task"]:
                text = "\n".join(_dedent(row, indent) for row in body)
                if sections:
                    sections[-1].blocks.append((start, text))
                elif stray is None:
                    stray = start
            else:
                (sections[-1].text if sections else intro).extend([line, *body, lines[number - 1]])
        elif _HEADING.match(line):
            heading = _TASK_HEADING.fullmatch(line)
            if not heading:
                raise UserError(
                    f"{source}:{number}: a '## ' heading starts a task and must read '## ID — Title'",
                    hint="use '###' for a sub-heading inside a task's description",
                )
            sections.append(Section(number, heading[1], heading[2]))
        else:
            (sections[-1].text if sections else intro).append(line)
    return _Markdown(intro, sections, stray, None)


def _dedent(line: str, indent: int) -> str:
    return line[min(indent, len(line) - len(line.lstrip(" "))) :]


def reads_back_as_text(text: str) -> bool:
    """Whether `text` reads back as plain markdown: no task heading, no task block, fences closed."""
    try:
        markdown = read_markdown(text.split("\n"), source="")
    except UserError:
        return False
    return not markdown.sections and markdown.stray_block is None and markdown.unclosed_fence is None
