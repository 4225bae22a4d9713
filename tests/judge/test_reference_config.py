"""The base as the reference for how tests run: its configuration, its cache, and the perturbed step.

Each test here was a hole or a false alarm a review found: a candidate's marker line that wrote a key
of its own into the imposed configuration, a verify script that hid pytest from the reporter, base runs
cached when they had not finished (or read back whatever their shape), `required_plugins` failing
when plugins are loaded by name, an order that moved the tests base and head share, a flip with no
base comparison, a renamed conftest put back at its new path, and a base configuration lost to a
strict reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import iniconfig
from judge_support import replace
from test_outcomes import FIX, gate

from hilbert.judge.evidence import Step
from hilbert.judge.gate import GateResult, describe
from hilbert.judge.pytest_config import base_options, compose_ini, read_options

TESTS = "python -m pytest -q tests"
RIGHT = {"tests/test_ops.py": replace("ops.add(2, 2) == 5", "ops.add(2, 2) == 4")}  # base: all but scale pass
STRICT = replace('testpaths = ["tests"]\n', 'testpaths = ["tests"]\naddopts = "--strict-markers"\n')


def step(result: GateResult, name: str) -> Step:
    return next(s for s in result.steps if s.name == name)


# -- 1. the candidate's markers declare names, nothing else -----------------------------------------


def injected_markers(*lines: str) -> str:
    return "[tool.pytest.ini_options]\nmarkers = [" + ", ".join(json.dumps(line) for line in lines) + "]\n"


def test_a_marker_line_cannot_write_a_key_of_its_own_into_the_imposed_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        injected_markers(
            "arithmetic: plain sums\naddopts = -k nothing",
            "slow: takes a while\u2028python_files = nothing_*.py",  # a break only some readers know
            "integration(kind): talks to the network",
        )
    )
    ini = compose_ini({"testpaths": ["tests"]}, ".", tmp_path)
    parsed = iniconfig.IniConfig("imposed.ini", data=ini)
    assert set(parsed.sections["pytest"]) == {"testpaths", "markers"}, ini
    markers = parsed["pytest"]["markers"].splitlines()
    assert markers == [
        "arithmetic: plain sums",
        "slow: takes a while",
        "integration(kind): talks to the network",
    ]


# -- 4a. required_plugins: the base's plugins are loaded by name ------------------------------------


def test_a_base_that_requires_an_installed_plugin_does_not_fail_an_honest_fix(tmp_path: Path) -> None:
    requires = replace(
        'testpaths = ["tests"]\n', 'testpaths = ["tests"]\nrequired_plugins = ["pytest-timeout"]\n'
    )
    base = {**RIGHT, "pyproject.toml": requires}
    result = gate(tmp_path, FIX, verify=TESTS, heldout=False, base_edits=base)
    assert result.verdict == "done", describe(result)
    assert "5 passed" in step(result, "verify").summary


# -- 4e. the base's configuration read as leniently as the tools that share its file ------------------


def test_a_base_configuration_with_duplicates_or_a_byte_order_mark_keeps_its_options(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = calc\nname = calc-tools\n\n[tool:pytest]\naddopts = --strict-markers\n"
        "[tool:pytest]\ntestpaths = tests\n"
    )
    (tmp_path / "tox.ini").write_text("\ufeff[pytest]\naddopts = -ra\nAddopts = -q\n", encoding="utf-8")
    assert base_options(tmp_path, "setup.cfg") == ({"addopts": "--strict-markers", "testpaths": "tests"}, ".")
    assert read_options(tmp_path / "tox.ini") == {"addopts": "-ra", "Addopts": "-q"}  # keys keep their case
