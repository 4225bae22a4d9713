"""Every benchmark in bench/ runs, at a tiny size, as a real subprocess, so the benchmarks cannot rot.

Each script prints its figures as `key=value` pairs on its last line(s); a smoke run checks that it
exits 0 and that the figures are complete and sane (every agent or stream completed, nothing failed).
Speed itself is not asserted here: that is what the benchmarks are for.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

Figures = dict[str, str]


def figures(line: str) -> Figures:
    return dict(item.split("=", 1) for item in line.split())


def number(value: str) -> float:
    result = float(value)
    assert math.isfinite(result), value
    return result


def run_bench(script: str, *args: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    # in its own session, so that a timeout also ends the fake server the script started
    bench = subprocess.Popen(
        [sys.executable, str(BENCH / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.returncode is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
    assert bench.returncode == 0, f"{script} exited {bench.returncode}\n{out}\n{err}"
    lines = out.strip().splitlines()
    assert lines, f"{script} printed nothing\n{err}"
    return lines


LOOP_KEYS = {
    "agents", "latency", "protocol", "steps", "completed", "cpu_ms_per_step", "rss_mb_per_agent",
    "ttft_p50_ms", "ttft_p99_ms", "server_cpu_ms_per_step", "retries", "wall_s", "failed",
}  # fmt: skip


def smoke_loop_overhead(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    lines = run_bench("loop_overhead.py", "--agents", "2", "--steps", "4", "--keep", str(keep))
    runs = [figures(line) for line in lines[-2:]]
    assert [run["latency"] for run in runs] == ["none", "realistic"]  # the last line: realistic
    for run in runs:
        assert set(run) == LOOP_KEYS, run
        assert (run["agents"], run["completed"], run["failed"]) == ("2", "2", "0"), run
        assert run["steps"] == "8" and run["protocol"] == "openai", run
        assert number(run["cpu_ms_per_step"]) > 0 and number(run["rss_mb_per_agent"]) >= 0, run
        assert 0 < number(run["ttft_p50_ms"]) <= number(run["ttft_p99_ms"]), run
        assert number(run["wall_s"]) > 0, run
        # the agents really ran their tools, each in its own workspace: step 3 wrote then edited a note
        for agent in ("a0000", "a0001"):
            note = keep / run["latency"] / f"bench-{run['latency']}" / agent / "notes" / "step-2.md"
            assert note.read_text().startswith("step 2 (checked):"), note
    assert number(runs[1]["ttft_p50_ms"]) >= 100  # the realistic profile's first tokens take ~0.6 s


def smoke_fake_server_streams(tmp_path: Path) -> None:
    lines = run_bench("fake_server_streams.py", "--streams", "8", "--latency", "ttft=0.2,tps=1000")
    run = figures(lines[-1])
    assert (run["streams"], run["completed"]) == ("8", "8"), run
    assert 0 < int(run["max_open"]) <= 8, run
    assert 190 <= number(run["ttft_p50_ms"]) <= number(run["ttft_p99_ms"]), run
    assert number(run["total_p50_ms"]) <= number(run["total_p99_ms"]), run


def smoke_workspaces(tmp_path: Path) -> None:
    strategies = "worktree,clone-shared,clone-local,clone-no-local,hilbert"  # overlay needs root: skipped
    lines = run_bench(
        "workspaces.py", "--workers", "3", "--files", "50", "--mb", "1", "--strategies", strategies
    )
    run = figures(lines[-1])
    assert (run["workers"], run["files"], run["mb"], run["default"]) == ("3", "50", "1", "hilbert"), run
    for key in ("hilbert_s", "hilbert_mb", "worktree_s", "worktree_mb", "time_ratio", "disk_ratio"):
        assert number(run[key]) > 0, run
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"strategy", *strategies.split(",")}, rows
    # the isolation probe really ran: a hook written from worktree 1 ran in worktree 2, not in any clone
    assert "| reachable | runs | yes |" in rows["worktree"], rows["worktree"]
    assert "| none | no | no | 1 |" in rows["hilbert"], rows["hilbert"]
    assert "| no | no |" in rows["clone-shared"], rows["clone-shared"]


FLEET_KEYS = {
    "workers", "steps", "tasks_done", "merged", "files_done", "wall_s", "provisioned_s", "agents_done_s",
    "agent_steps", "orchestrator_cpu_ms_per_step", "model_cpu_ms_per_step", "children_cpu_s",
    "rss_mb_per_worker", "events", "events_per_s", "append_per_s", "failed",
}  # fmt: skip


def smoke_fleet_scale(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    lines = run_bench("fleet_scale.py", "--workers", "3", "--steps", "3", "--keep", str(keep))
    run = figures(lines[-1])
    assert set(run) == FLEET_KEYS, run
    assert (run["workers"], run["tasks_done"], run["merged"], run["files_done"]) == ("3", "3", "3", "3"), run
    assert (run["agent_steps"], run["failed"]) == ("9", "0"), run
    for key in ("wall_s", "orchestrator_cpu_ms_per_step", "children_cpu_s", "events_per_s", "append_per_s"):
        assert number(run[key]) > 0, run
    assert number(run["rss_mb_per_worker"]) >= 0 and int(run["events"]) >= 3 * 2 * 3, run
    # the real orchestrator ran: each worker's edit reached the integration branch through the merge queue
    integration = keep / "run" / "integration.git"
    for i in range(3):
        show = ["git", "-C", str(integration), "show", f"hilbert/integration:tasks/f_{i:04d}.txt"]
        assert subprocess.run(show, capture_output=True, text=True, check=True).stdout == "done\n"


def smoke_judge(tmp_path: Path) -> None:
    # one project, three cases; the pinned sdist comes from PyPI once (~/.cache/hilbert/bench-sdists)
    keep = tmp_path / "keep"
    cases = ("plain-fix", "expect-the-buggy-suffix", "xfail-the-ordinal-tests")
    selection = [arg for case in cases for arg in ("--case", f"inflection/ordinal-teens/{case}")]
    lines = run_bench("judge.py", "--project", "inflection", *selection, "--markdown", "--keep", str(keep))
    run = figures(lines[-1])
    keys = "projects cases cheats effective caught catch_rate catch_ci95 honest false_alarms false_alarm_rate"
    keys += " false_alarm_ci95 perturbed_caught_alone perturbed_false_alarms gate_s_per_call"
    assert set(run) == {*keys.split(), "ineffective", "broken", "bad_bugs", "gated", "wall_s"}, run
    assert (run["projects"], run["cases"], run["cheats"], run["honest"]) == ("1", "3", "2", "1"), run
    # both cheats fool a verify-only harness; the honest fix passes verify and the held-out tests
    assert (run["effective"], run["ineffective"], run["broken"], run["bad_bugs"]) == ("2", "0", "0", "0"), run
    assert run["gated"] == "yes" and 0 <= int(run["caught"]) <= 2 and 0 <= int(run["false_alarms"]) <= 1, run
    assert 0 <= number(run["catch_rate"]) <= 1 and number(run["wall_s"]) > 0, run
    assert "| group | technique | cheats | effective | caught | catch rate |" in lines
    assert "| test selection | `select-xfail` | 1 | 1 | " in "\n".join(lines)
    assert (keep / "cases" / "inflection" / "ordinal-teens" / "plain-fix" / "repo" / ".git").is_dir()


def smoke_sandbox(tmp_path: Path) -> None:
    lines = run_bench("sandbox.py", "--runs", "3")
    run = figures(lines[-1])
    assert (run["runs"], run["sandbox"]) == ("3", "bubblewrap"), run
    for key in ("true_direct_ms", "true_sandbox_ms", "python_direct_ms", "python_sandbox_ms", "ratio_true"):
        assert number(run[key]) > 0, run
    assert any(line.startswith("| `true` |") for line in lines), lines


def smoke_agentdojo_compare(tmp_path: Path) -> None:
    args = ("--suites", "banking", "--attacks", "direct", "--limit", "2", "--jobs", "1")
    run = figures(run_bench("agentdojo_compare.py", *args)[-1])
    assert (run["asr_none"], run["asr_scope_oracle_args"]) == ("1.000", "0.000"), run


def smoke_security(tmp_path: Path) -> None:
    lines = run_bench("security.py", "--only", "delete_outside--p*", "--keep", str(tmp_path))
    run = figures(lines[-1])
    assert (run["mode"], run["cases"], run["succeeded"]) == ("hilbert", "2", "0"), run
    # the victim of the peer's message passed the gate; its candidate waits for a decision (no lead here)
    assert (run["benign_completed"], run["landed"], run["held"]) == ("4/4", "3", "1"), run
    assert run["outside_changes"] == "0", run
    assert any(line.startswith("delete_outside--peer_message") and " stopped " in line for line in lines)


def smoke_context_replay(tmp_path: Path) -> None:
    # two tiny synthetic mini-swe-agent trajectories (tests never read the real corpus)
    for name in ("alpha", "beta"):
        messages = [
            {"role": "system", "content": "You are an agent."},
            {
                "role": "user",
                "content": f"<pr_description>\nFix `{name}` in src/{name}.py\n</pr_description>",
            },
        ]
        for step in range(4):
            response = {"usage": {"prompt_tokens": 100 * (step + 1), "completion_tokens": 10}}
            command = f"cat src/{name}_{step - 1}.py" if step else "ls src"  # a file the last output named
            action = f"THOUGHT: step {step}\n\n```bash\n{command}\n```"
            messages.append({"role": "assistant", "content": action, "extra": {"response": response}})
            output = f"<returncode>0</returncode>\n<output>\nsrc/{name}_{step}.py\n</output>"
            messages.append({"role": "user", "content": output})
        trajectory = {"info": {}, "messages": messages, "instance_id": name}
        (tmp_path / f"{name}.traj.json").write_text(json.dumps(trajectory))
    args = ("--corpus", str(tmp_path), "--strategies", "none,mask:1,1", "--jobs", "1")
    lines = run_bench("context_replay.py", *args)
    run = figures(lines[-1])
    assert (run["trajectories"], run["calls"]) == ("2", "8"), run
    for key in ("cost_p0.1", "cost_p0.25", "cost_p0.5", "cost_p1.0", "mean_cumulative_input", "median_peak"):
        assert number(run[key]) > 0, run
    assert number(run["recall"]) == 1 and number(run["retention"]) == 1, run  # nothing is cut this small
    assert any(line.startswith("| none | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |") for line in lines), lines
    assert any(line.startswith("| mask:1,1 | ") for line in lines), lines
    assert lines[0].startswith("calibration: the server reported 2,000 prompt tokens"), lines[0]


RESUME_KEYS = {
    "workers", "bugs", "kills", "lives", "tasks_done", "restart_to_call_p50_s", "restart_to_call_max_s",
    "resumed_to_call_p50_s", "calls", "unlogged_calls", "restarted_attempts", "tokens", "respent_tokens",
    "respent_share", "cache_read", "respent_cache_read", "wall_s", "failed",
}  # fmt: skip


def smoke_resume(tmp_path: Path) -> None:
    lines = run_bench("resume.py", "--bugs", "2", "--workers", "2", "--kills", "2", "--keep", str(tmp_path))
    run = figures(lines[-1])
    assert set(run) == RESUME_KEYS, run
    assert (run["tasks_done"], run["failed"]) == ("2", "0") and int(run["lives"]) == int(run["kills"]) + 1, (
        run
    )
    assert 1 <= int(run["kills"]) <= 2, run  # a kill drawn past the run's end lets that life finish it
    assert int(run["calls"]) > 0 and int(run["tokens"]) > 0, run
    assert 0 <= number(run["respent_share"]) < 1 and number(run["wall_s"]) > 0, run


def smoke_governor(tmp_path: Path) -> None:
    assert "--quick" in "\n".join(run_bench("governor.py", "--help"))
    lines = run_bench("governor.py", "--quick")
    run = figures(lines[-1])
    assert set(run) == {"ratio_rpm", "goodput_rpm", "refused_rpm", "p99_task_s_rpm"}, run
    assert number(run["ratio_rpm"]) > 0 and 0 <= number(run["refused_rpm"]) <= 1, run
    assert number(run["goodput_rpm"]) > 0 and number(run["p99_task_s_rpm"]) > 0, run
    rows = [line for line in lines if line.startswith("| rpm |")]
    assert [row.split("|")[2].strip() for row in rows] == ["fixed 16", "governor"], rows
    # both rows really called the rate-limited server (requests seen, calls completed) and did the same
    # work: every task done, no call given up on (a refused call is retried until it completes)
    cells = [[cell.strip() for cell in row.split("|")] for row in rows]
    assert all(int(c[6]) > 0 and float(c[3]) > 0 and (c[9], c[10]) == ("0", "0") for c in cells), rows


def smoke_first_run(tmp_path: Path) -> None:
    # the run itself needs PyPI and minutes (see bench/README.md); its pure parts are tested in
    # tests/test_bench_first_run.py, and here only that the script starts and explains itself
    lines = run_bench("first_run.py", "--help")
    text = "\n".join(lines)
    assert "--seed" in text and "--libraries" in text and "--keep" in text and "--workers" in text, text


SMOKE: dict[str, Callable[[Path], None]] = {
    "governor.py": smoke_governor,
    "resume.py": smoke_resume,
    "context_replay.py": smoke_context_replay,
    "security.py": smoke_security,
    "agentdojo_compare.py": smoke_agentdojo_compare,
    "loop_overhead.py": smoke_loop_overhead,
    "fake_server_streams.py": smoke_fake_server_streams,
    "workspaces.py": smoke_workspaces,
    "fleet_scale.py": smoke_fleet_scale,
    "judge.py": smoke_judge,
    "first_run.py": smoke_first_run,
    "sandbox.py": smoke_sandbox,
}


def test_every_bench_script_has_a_smoke_run() -> None:
    assert sorted(p.name for p in BENCH.glob("*.py")) == sorted(SMOKE)


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_bench_runs_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    SMOKE[script](tmp_path)
