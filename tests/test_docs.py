"""Docs that cannot drift: the README's set-up commands, command table and flags match the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hilbert.ui.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_exactly_the_two_setup_commands() -> None:
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert README.index("```sh") < README.index("\n## ")


def readme_commands() -> list[tuple[str, list[str]]]:
    """(command, flags named for it) per row of the README's command table; a subcommand (`hook stop`)
    is named with its group, space-separated."""
    rows = re.findall(r"^\| `hilbert ([a-z-]+)((?: [a-z][a-z-]*)?)([^`]*)`[^|]*\|(.*)\|$", README, flags=re.M)
    return [
        ((name + sub).strip(), re.findall(r"--[a-z-]+", usage + " " + described))
        for name, sub, usage, described in rows
    ]


def test_every_cli_command_is_in_the_readme_and_the_other_way_round() -> None:
    documented = {name.split()[0] for name, _ in readme_commands()}
    assert documented == set(cli.commands)


@pytest.mark.parametrize(("name", "flags"), readme_commands())
def test_flags_named_in_the_readme_exist(name: str, flags: list[str]) -> None:
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    for flag in flags:
        assert flag in result.output, f"README names {flag} for `hilbert {name}`, but --help does not"


def test_makefile_targets_named_in_docs_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "tools"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text()
