"""The base commit's pytest configuration, as one ini file the judge imposes on the candidate's runs.

`base_options(base_tree, inifile)` reads the base's configuration (the file pytest chose at base:
`pytest.ini`, `.pytest.ini`, `pyproject.toml`'s `[tool.pytest.ini_options]` or `[tool.pytest]`,
`tox.ini`'s `[pytest]`, `setup.cfg`'s `[tool:pytest]`) and `compose_ini` writes it as a `[pytest]` ini,
with one kind of key taken from the candidate: `markers`, which only declares names. Everything that
decides what runs and how outcomes count (`addopts`, `testpaths`, `python_files`, plugins, ...) stays
the base's, so a configuration the candidate changed or added cannot change it. Paths in `pythonpath`
are made absolute (they are read relative to the ini file, which now lives elsewhere).
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

DECLARATIVE = ("markers",)
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
        text = path.read_text()
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
    parser = configparser.ConfigParser(interpolation=None)
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
    return value if isinstance(value, list) else [line.strip() for line in value.splitlines() if line.strip()]


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
    merged: dict[str, str | list[str]] = dict(options)
    for key in DECLARATIVE:
        lines = _lines(options.get(key, []))
        extra = [line for line in declared(head_tree, key) if line not in lines]
        if lines or extra:
            merged[key] = lines + extra
    if "pythonpath" in merged:
        entries = " ".join(_lines(merged["pythonpath"])).split()
        merged["pythonpath"] = [str(head_tree / where / entry) for entry in entries]
    out = ["[pytest]"]
    for key, value in merged.items():
        lines = _lines(value)
        if isinstance(value, list) or len(lines) > 1:
            out.append(f"{key} =" + "".join(f"\n    {line}" for line in lines))
        else:
            out.append(f"{key} = {value}".rstrip())
    return "\n".join(out) + "\n"


__all__ = ["CANDIDATES", "base_options", "compose_ini", "declared", "read_options"]
