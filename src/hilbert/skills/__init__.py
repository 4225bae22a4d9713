"""Skills in the Agent Skills format (`NAME/SKILL.md`: YAML front matter with `name` and `description`,
then markdown instructions), the ones hilbert ships, and their parsing. So far one is shipped:
`thermonuclear-review`, the review panel's instructions. A full loader (a skills index in the stable
prompt prefix, bodies loaded when used, the person's own skill folders) is a later issue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import yaml

from hilbert.errors import UserError

_NAME_FORM = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n(.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Skill:
    """An Agent Skills `SKILL.md`: its front matter's name and description, and the body."""

    name: str
    description: str
    body: str


def parse_skill(text: str, folder: str) -> Skill:
    """Parse a SKILL.md and check what the panel relies on: its name (lowercase letters, digits and
    hyphens, at most 64, equal to `folder`) and description (1-1024 characters). The full format's
    other rules are the skills loader's (a later issue)."""
    hint = "SKILL.md starts with YAML front matter between --- lines: name (= folder name), description"
    match = _FRONT_MATTER.match(text)
    try:
        meta = yaml.safe_load(match.group(1)) if match else None
    except yaml.YAMLError:
        meta = None
    if not match or not isinstance(meta, dict):
        raise UserError(f"skill {folder}: SKILL.md has no YAML front matter", hint=hint)
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME_FORM.match(name) or len(name) > 64 or name != folder:
        raise UserError(
            f"skill {folder}: name {name!r} is not its folder's name in the allowed form", hint=hint
        )
    if not isinstance(description, str) or not 0 < len(description.strip()) <= 1024:
        raise UserError(f"skill {folder}: the description must be 1-1024 characters", hint=hint)
    return Skill(name, description.strip(), match.group(2).strip() + "\n")


def load_skill(name: str) -> Skill:
    """A skill shipped with hilbert (`hilbert/skills/NAME/SKILL.md`), checked."""
    path = resources.files("hilbert.skills").joinpath(name).joinpath("SKILL.md")
    if not path.is_file():
        raise UserError(f"no shipped skill {name!r}", hint="the shipped skills are folders of hilbert/skills")
    return parse_skill(path.read_text(encoding="utf-8"), name)


__all__ = ["Skill", "load_skill", "parse_skill"]
