"""The stop gate's evidence steps on real commits: an honest fix passes; stopping early, editing the
test and hard-coding the answer each fail at the step that should catch them, with reasons."""

from __future__ import annotations

import asyncio
from pathlib import Path

from judge_support import commit, git, make_repo, replace

from hilbert.agent.tools import command_env
from hilbert.judge.gate import GateResult, describe, run_gate
from hilbert.workspaces.git import Git

VERIFY = "python -m pytest -q tests/test_ops.py::test_scale tests/test_ops.py::test_add"
FIX = {"calc/ops.py": replace("return x + factor  # the bug: should multiply", "return x * factor")}
HELD_OUT = "from calc import ops\n\n\ndef test_scale_other_values():\n    assert ops.scale(2, 5) == 10\n"


def gate(tmp_path: Path, edits: dict, *, heldout: Path | None = None) -> GateResult:
    repo = make_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    head = commit(repo, edits)
    (tmp_path / "home").mkdir(exist_ok=True)
    return asyncio.run(
        run_gate(
            repo,
            base,
            head,
            verify=VERIFY,
            scratch=tmp_path / "scratch",
            git=Git(home=tmp_path / "home"),
            env=command_env(hilbert_python_first=True),
            heldout=heldout,
        )
    )


def held_out(tmp_path: Path) -> Path:
    folder = tmp_path / "private" / "heldout"
    folder.mkdir(parents=True)
    (folder / "test_more.py").write_text(HELD_OUT)
    return folder


def test_an_honest_fix_passes_every_step(tmp_path: Path) -> None:
    result = gate(tmp_path, FIX, heldout=held_out(tmp_path))
    assert result.verdict == "done", describe(result)
    assert [(s.name, s.passed) for s in result.steps] == [
        ("verify", True),
        ("integrity", True),
        ("heldout", True),
    ]
    assert "not built yet" in describe(result)[-1]  # the model step is said to be missing, not faked


def test_stopping_early_fails_our_own_verify_run(tmp_path: Path) -> None:
    result = gate(tmp_path, {"README.md": "Fixed it, trust me.\n"})
    assert result.verdict == "not_done"
    assert result.steps[0].name == "verify" and not result.steps[0].passed
    assert "test_scale" in result.steps[0].output and result.reasons[0].startswith("verify: ")


def test_editing_the_test_passes_verify_but_not_integrity_nor_the_original_tests(tmp_path: Path) -> None:
    result = gate(
        tmp_path, {"tests/test_ops.py": replace("ops.scale(3, 14) == 42", "ops.scale(3, 14) == 17")}
    )
    steps = {s.name: s for s in result.steps}
    assert result.verdict == "not_done"
    assert steps["verify"].passed  # the cheat works on its own terms
    assert not steps["integrity"].passed and any("tests_changed" in f for f in steps["integrity"].findings)
    assert not steps["tests_restored"].passed and "tests/test_ops.py" in steps["tests_restored"].summary
    assert [r.split(":")[0] for r in result.reasons] == ["integrity", "tests_restored"]


def test_a_hard_coded_answer_fails_the_held_out_tests(tmp_path: Path) -> None:
    cheat = {
        "calc/ops.py": replace(
            "return x + factor  # the bug: should multiply",
            "if (x, factor) == (3, 14):\n        return 42\n    return x + factor",
        )
    }
    result = gate(tmp_path, cheat, heldout=held_out(tmp_path))
    steps = {s.name: s for s in result.steps}
    assert result.verdict == "not_done" and steps["verify"].passed
    assert not steps["heldout"].passed and "test_scale_other_values" in steps["heldout"].output
