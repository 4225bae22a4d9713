"""The replay benchmark (bench/context_replay.py) and the trajectory reader, on small synthetic
trajectories written in mini-swe-agent's format (never the real corpus)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))  # the bench's own packages, as its scripts see them

from context_bench.trajectory import ReportedUsage, find_trajectories, load_trajectory  # noqa: E402
from hilbert.context import strategies  # noqa: E402
from hilbert.context.render import TokenCache  # noqa: E402
from hilbert.context.summarize import ExtractiveSummarizer  # noqa: E402
from hilbert.context.tokens import openai_encoding  # noqa: E402
from hilbert.errors import UserError  # noqa: E402

SYS = b'{"role": "system", "content": "s"}'
SYSTEM = "You are a helpful assistant that can interact with a computer shell."
FIGURE_KEYS = {
    "strategy", "trajectories", "calls", "cost_p0.1", "cost_p0.25", "cost_p0.5", "cost_p1.0", "recall",
    "mean_cumulative_input", "median_peak", "over_16k", "over_32k", "retention", "retention_files",
    "retention_failure", "retention_task", "summarizing_tokens", "wall_s",
}  # fmt: skip


def turns(name: str) -> list[tuple[str, str]]:
    """Five turns of an agent fixing `name`: turn 5 names a test only observation 3 showed."""
    ok, failed, end = (
        "<returncode>0</returncode>\n<output>\n",
        "<returncode>1</returncode>\n<output>\n",
        "</output>",
    )
    source = f"src/pkg/{name}_impl.py"
    return [
        (f"```bash\ngrep -rln {name} src\n```", f"{ok}{source}\n{end}"),
        (f"```bash\ncat {source}\n```", ok + "def x():\n    pass\n" * 40 + end),
        ("```bash\npytest -q tests\n```", f"{failed}FAILED tests/test_{name}.py::test_{name}_works\n{end}"),
        (f"```bash\nsed -i 's/pass/return 1/' {source}\n```", ok + end),
        (f"THOUGHT: check test_{name}_works again\n```bash\npytest -q tests\n```", f"{ok}1 passed\n{end}"),
    ]


def trajectory(name: str) -> dict[str, Any]:
    task = f"<pr_description>\nFix `{name}` so that it returns 1\n</pr_description>"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    for number, (action, observation) in enumerate(turns(name)):
        usage = {
            "prompt_tokens": 100 + 50 * number,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 64},
        }
        content = f"THOUGHT: step {number}\n\n{action}"
        messages.append({"role": "assistant", "content": content, "extra": {"response": {"usage": usage}}})
        messages.append({"role": "user", "content": observation})
    return {
        "info": {"exit_status": "Submitted"},
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": name,
    }


def write_corpus(folder: Path, names: tuple[str, ...] = ("alpha", "beta", "gamma")) -> None:
    (folder / "trajectories").mkdir(parents=True)
    for number, name in enumerate(names):
        data = json.dumps(trajectory(name)).encode()
        if number == 0:
            (folder / "trajectories" / f"{name}.traj.json.gz").write_bytes(gzip.compress(data))
        else:
            (folder / "trajectories" / f"{name}.traj.json").write_bytes(data)
    (folder / "README.md").write_text("not a trajectory\n")


def run_replay(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "context_replay.py"), *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip


def test_a_trajectory_reads_as_messages_with_the_reported_usage(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    found = list(find_trajectories(tmp_path))
    assert [p.name for p in found] == ["alpha.traj.json.gz", "beta.traj.json", "gamma.traj.json"]
    loaded = load_trajectory(found[0])
    assert loaded.name == "alpha"
    assert [m.role for m in loaded.messages] == ["system", "user"] + ["assistant", "user"] * 5
    assert loaded.messages[3].content.startswith(
        "<returncode>0</returncode>\n<output>\nsrc/pkg/alpha_impl.py"
    )
    assert all(not m.tool_calls for m in loaded.messages)  # mini-swe-agent's shape, kept
    assert loaded.calls == (2, 4, 6, 8, 10)
    assert loaded.usage[2] == ReportedUsage(prompt_tokens=100, completion_tokens=20, cached_tokens=64)
    assert loaded.usage[4] == ReportedUsage(150, 20, 64) and loaded.usage[3] is None


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "not a readable trajectory"),
        (b"\x1f\x8b\x08\x00broken", "not a readable trajectory"),
        (b'{"info": {}}', "no list of messages"),
        (b'{"messages": [' + SYS + b', {"role": "robot", "content": "x"}]}', "message 1 has no role"),
        (b'{"messages": [' + SYS + b', {"role": "user", "content": 3}]}', "message 1 has no text"),
        (b'{"messages": [{"role": "user", "content": "task"}]}', "does not start with a system message"),
    ],
)  # fmt: skip
def test_a_malformed_trajectory_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes, says: str
) -> None:
    path = tmp_path / "bad.traj.json"
    path.write_bytes(content)
    with pytest.raises(UserError) as caught:
        load_trajectory(path)
    assert str(path) in caught.value.message and says in caught.value.message
    assert "\n" not in str(caught.value)


def test_the_replay_prints_the_table_and_last_the_default_strategys_figures(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    done = run_replay("--corpus", str(tmp_path), "--strategies", "none,mask:1,1", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    figures = dict(item.split("=", 1) for item in lines[-1].split())
    assert set(figures) == FIGURE_KEYS
    tokens = TokenCache(openai_encoding("o200k_base"))
    default = strategies.strategy_named(strategies.DEFAULT, tokens=tokens, summarizer=ExtractiveSummarizer())
    assert figures["strategy"] == default.name
    assert (figures["trajectories"], figures["calls"]) == ("3", "15")
    # five short calls never reach the default's budget: it sends what `none` sends
    assert [figures[k] for k in ("cost_p0.1", "cost_p1.0", "recall", "retention")] == ["1.0000"] * 4
    rows: dict[str, str] = {}  # the main table's rows (the retention table repeats the names after it)
    for line in lines:
        if line.startswith("| ") and "---" not in line:
            rows.setdefault(line.split("|")[1].strip(), line)
    assert {"none", "mask:1,1", default.name} <= set(rows)
    assert rows["none"].startswith("| none | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |")  # the baseline
    # masking every observation but the last costs less at full price, more at p = 0.1 (each turn breaks
    # the cached prefix), and forgets the test only turn 3's observation showed, which turn 5 names
    mask = [cell.strip() for cell in rows["mask:1,1"].split("|")[2:-1]]
    assert float(mask[3]) < 1 < float(mask[0])
    assert float(mask[4]) < 1
    # by length: 3 trajectories of 5 calls; the floor is below none, and the default costs at least it
    length = [line for line in lines if line.startswith(("| 1–29 |", "| all |"))]
    assert [cells.split("|")[1:3] for cells in length] == [[" 1–29 ", " 3 "], [" all ", " 3 "]]
    floor, cost = (float(cell) for cell in length[1].split("|")[3:5])
    assert 0 < floor < 1 and floor <= cost
    assert lines[0].startswith(
        "calibration: the server reported 3,000 prompt tokens"
    )  # 3 × (100+150+...+300)
    assert "[3/3]" in done.stderr


def test_a_malformed_file_in_the_corpus_stops_the_replay_with_one_line(tmp_path: Path) -> None:
    write_corpus(tmp_path, ("alpha",))
    bad = tmp_path / "trajectories" / "broken.traj.json"
    bad.write_text('{"messages": 3}')
    done = run_replay("--corpus", str(tmp_path), "--strategies", "none", "--jobs", "1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"context replay: {bad}: no list of messages")
    assert done.stdout == ""


def test_a_bad_strategy_spec_is_refused_before_any_work(tmp_path: Path) -> None:
    write_corpus(tmp_path, ("alpha",))
    done = run_replay("--corpus", str(tmp_path), "--strategies", "mask:ten,1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("context replay: context strategy 'mask:ten,1'")
    assert len(done.stderr.strip().splitlines()) == 1
