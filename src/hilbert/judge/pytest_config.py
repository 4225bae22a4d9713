"""The base commit's pytest configuration, as one ini file the judge imposes on the candidate's runs.

`base_options(base_tree, inifile)` reads the base's configuration (the file pytest chose at base:
`pytest.ini`, `.pytest.ini`, `pyproject.toml`'s `[tool.pytest.ini_options]` or `[tool.pytest]`,
`tox.ini`'s `[pytest]`, `setup.cfg`'s `[tool:pytest]`) and `compose_ini` writes it as a `[pytest]` ini,
with one kind of key taken from the candidate: `markers`, which only declares names. Everything that
decides what runs and how outcomes count (`addopts`, `testpaths`, `python_files`, plugins, ...) stays
the base's, so a configuration the candidate changed or added cannot change it. Paths in `pythonpath`
are made absolute (they are read relative to the ini file, which now lives elsewhere).

Every value is split at every line break an ini reader knows (not only `\n`) and written one line per
indented continuation, so no value can start a key of its own; a candidate's marker line that is not a
marker declaration (`name`, `name(args)`, either with `: text`) is left out, and `refused_markers`
names it for the evidence. `required_plugins` is not imposed: the base's plugins are loaded by module
name with autoload off, which pytest's check (by distribution name) would not count.
"""

from __future__ import annotations

import configparser
import re
import tomllib
import unicodedata
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

NOT_IMPOSED = ("required_plugins",)  # checked by distribution name: plugins loaded by `-p module` fail it
MARKER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\(.*\))?(\s*:.*)?")  # `name`, `name(args)`, `...: text`
SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}
CANDIDATES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def read_options(path: Path) -> dict[str, str | list[str]] | None:
    """The pytest options in the configuration file at `path` (None: it holds none, or is unreadable)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # as pytest reads it: UTF-8, a byte-order mark dropped
    except (OSError, UnicodeDecodeError):
        return None
    if path.name == "pyproject.toml":
        try:
            tool = tomllib.loads(text).get("tool", {}).get("pytest")
        except tomllib.TOMLDecodeError:
            return None
        if not isinstance(tool, dict):
            return None
        table = tool.get("ini_options", tool)
        return {
            str(k): [str(i) for i in v] if isinstance(v, list) else _scalar(v)
            for k, v in table.items()
            if not isinstance(v, dict)
        }
    # not strict: a duplicate key or section (which other tools reading the same file accept) does not
    # lose the options; keys keep their case, as pytest reads them
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    section = SECTIONS.get(path.name, "pytest")
    if not parser.has_section(section):
        return {} if path.name in ("pytest.ini", ".pytest.ini") else None
    return dict(parser.items(section))


def _scalar(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _lines(value: str | list[str]) -> list[str]:
    """The lines of a value, split at every line break (`str.splitlines`: an ini reader splits there too)."""
    items = value if isinstance(value, list) else [value]
    return [line.strip() for item in items for line in str(item).splitlines() if line.strip()]


def _is_marker(line: str) -> bool:
    return MARKER.fullmatch(line) is not None and not any(
        unicodedata.category(char).startswith("C") for char in line
    )


def _candidate_markers(head_tree: Path) -> tuple[list[str], list[str]]:
    """The candidate's marker lines: (declarations, refused lines)."""
    lines = declared(head_tree, "markers")
    return [line for line in lines if _is_marker(line)], [line for line in lines if not _is_marker(line)]


def refused_markers(head_tree: Path) -> list[str]:
    """The lines of the candidate's `markers` that are not marker declarations (left out of the ini)."""
    return _candidate_markers(head_tree)[1]


def declared(tree: Path, key: str) -> list[str]:
    """Every line of `key` in any pytest configuration at the top of `tree`."""
    found: list[str] = []
    for name in CANDIDATES:
        options = read_options(tree / name)
        if options and key in options:
            found += _lines(options[key])
    return found


def base_options(base_tree: Path, inifile: str | None) -> tuple[dict[str, str | list[str]], str]:
    """The base's pytest options, and the folder of the file they came from (relative to the tree)."""
    if inifile is None:
        return {}, "."
    return read_options(base_tree / inifile) or {}, str(PurePosixPath(inifile).parent)


def compose_ini(options: Mapping[str, str | list[str]], where: str, head_tree: Path) -> str:
    """`options` as the text of a `[pytest]` ini file, with the candidate's markers added."""
    merged = {key: value for key, value in options.items() if key not in NOT_IMPOSED}
    lines = _lines(options.get("markers", []))
    extra = [line for line in _candidate_markers(head_tree)[0] if line not in lines]
    if lines or extra:
        merged["markers"] = lines + extra
    if "pythonpath" in merged:
        entries = " ".join(_lines(merged["pythonpath"])).split()
        merged["pythonpath"] = [str(head_tree / where / entry) for entry in entries]
    out = ["[pytest]"]
    for key, value in merged.items():
        lines = _lines(value)
        if isinstance(value, list) or len(lines) > 1:
            out.append(f"{key} =" + "".join(f"\n    {line}" for line in lines))
        else:
            out.append(f"{key} = {lines[0]}" if lines else f"{key} =")
    return "\n".join(out) + "\n"


__all__ = ["CANDIDATES", "base_options", "compose_ini", "declared", "read_options", "refused_markers"]
