"""`hilbert plan`, `hilbert run` and `hilbert status` as a person uses them, against the fake lead and
engineer: the plan is written outside the repository, the run merges verified work onto
hilbert/integration (green), the person's repository is untouched, and status shows each worker."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.fleet.names import to_id
from hilbert.fleet.plan import parse_plan
from hilbert.sim.sample import generate_sample_project
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply, Responder
from hilbert.testing.fake_server.responders import make_responder


def hilbert(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(cwd / "home")}
    return run_cli(*args, cwd=cwd, env=env, timeout=300)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_plan_then_run_then_status(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "repo", 5, bugs=3)
    commit_all(project.path)
    with FakeServer("lead") as lead, FakeServer("engineer") as engineer:
        planned = hilbert(
            "plan",
            "make the tests pass",
            "--repo",
            "repo",
            "--model",
            f"anthropic:fake@{lead.base_url}",
            cwd=tmp_path,
        )
        assert planned.returncode == 0, planned.stderr + planned.stdout[-2000:]
        plan = parse_plan((tmp_path / "PLAN.md").read_text())
        assert len(plan.tasks) >= 2 and all(t.verify and t.claims for t in plan.tasks)
        ran = hilbert(
            "run",
            "--plan",
            "PLAN.md",
            "--repo",
            "repo",
            "--workers",
            "3",
            "--model",
            f"openai:fake@{engineer.openai_base_url}",
            cwd=tmp_path,
        )
        assert ran.returncode == 0, ran.stderr + ran.stdout[-3000:]
    assert f"{len(plan.tasks)} of {len(plan.tasks)} tasks merged onto hilbert/integration" in ran.stdout
    integration = next((tmp_path / "home" / "runs").glob("*/integration.git"))
    check = tmp_path / "check"
    subprocess.run(
        ["git", "clone", "-q", "-b", "hilbert/integration", str(integration), str(check)], check=True
    )
    suite = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    assert subprocess.run(suite, cwd=check, env=command_env(hilbert_python_first=True)).returncode == 0
    assert git(project.path, "status", "--porcelain") == ""
    n = len(plan.tasks)
    # the result is a branch of the person's repository (the only write there), with a PR description
    run = next((tmp_path / "home" / "runs").iterdir()).name
    tip = git(integration, "rev-parse", "refs/heads/hilbert/integration")
    assert git(project.path, "rev-parse", f"refs/heads/hilbert/{run}") == tip
    assert git(project.path, "branch", "--show-current") == "main"
    assert f"the result is the branch hilbert/{run} in your repository" in ran.stdout
    assert f"  merge: git merge hilbert/{run}" in ran.stdout and "git fetch" not in ran.stdout
    described = (tmp_path / "home" / "runs" / run / "PR.md").read_text()
    assert f"{n} of {n} tasks merged" in described and "The stop gate's evidence:" in described, described
    assert all(f"## {t.id} — {t.title} (done)" in described for t in plan.tasks), described
    assert "- verify: passed" in described and "changed" in described, described
    status = hilbert("status", cwd=tmp_path)
    # the run's line and its details, the agents, then the machine's governor for the run's model
    head, *rest = status.stdout.strip().splitlines()
    agents = [line for line in rest if not line.startswith(("  ", "governor "))]
    assert "governor (this machine's, shared by every run on the same key; now):" in rest
    assert (
        f"  final check: the whole suite (`python -m pytest -q`) on a clean checkout of {tip[:12]}: green"
        in rest
    )
    assert status.returncode == 0 and head.startswith("run ") and f": {n} tasks ({n} done)" in head, head
    assert len(agents) >= n and all(" T" in line and " done " in line for line in agents), agents
    # the fake model has no price: said as the run starts, and its spend shows as $?, not $0.0000
    assert f"note: no price known for openai:fake@{engineer.openai_base_url}" in ran.stdout
    assert all("$?" in line and "$0.0000" not in line for line in agents), agents


def test_run_with_a_goal_plans_then_runs_with_yes_and_refuses_without_a_terminal_to_ask_on(
    tmp_path: Path,
) -> None:
    project = generate_sample_project(tmp_path / "repo", 11, bugs=2)
    commit_all(project.path)
    with FakeServer("lead") as lead, FakeServer("engineer") as engineer:
        models = [
            "--model",
            f"openai:fake@{engineer.openai_base_url}",
            "--lead-model",
            f"anthropic:lead@{lead.base_url}",
        ]
        asked = hilbert("run", "make the tests pass", "--repo", "repo", *models, cwd=tmp_path)
        # no terminal to confirm on: refused before the lead spends anything
        assert (
            asked.returncode == 2 and "nobody is at the terminal" in asked.stderr and "--yes" in asked.stderr
        )
        assert not (tmp_path / "PLAN.md").exists() and not lead.requests
        ran = hilbert("run", "make the tests pass", "--yes", "--repo", "repo", *models, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr + ran.stdout[-3000:]
    plan = parse_plan((tmp_path / "PLAN.md").read_text())
    assert "the lead plans on anthropic:lead" in ran.stdout and "the lead on anthropic:lead" in ran.stdout
    assert f"{len(plan.tasks)} of {len(plan.tasks)} tasks merged onto hilbert/integration" in ran.stdout


def test_fleet_commands_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notgit").mkdir()
    (tmp_path / "bad.md").write_text("# goal\n\n## T1 — no block\n")
    for args, expected in [
        (
            ["run", "--plan", "missing.md", "--repo", "notgit", "--model", "openai:m@http://127.0.0.1:9/v1"],
            "not a git repository",
        ),
        (
            ["plan", "g", "--repo", "notgit", "--model", "openai:m@http://127.0.0.1:9/v1"],
            "not a git repository",
        ),
        (["status"], "no event log"),
        (["run", "--repo", "notgit"], "give either a GOAL or --plan PLAN.md"),
        (["run", "goal", "--plan", "bad.md"], "give either a GOAL or --plan PLAN.md, not both"),
        (["run", "--plan", "bad.md", "--yes"], "--yes goes with a GOAL"),
    ]:
        done = hilbert(*args, cwd=tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], (args, done.stderr)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    (tmp_path / "one.md").write_text("# goal\n\n## T1 — t\n\n```yaml hilbert-task\nverify: 'true'\n```\n")
    model = ["--model", "openai:m@http://127.0.0.1:9/v1"]
    done = hilbert("run", "--plan", "one.md", "--repo", "repo", *model, "--context", "forget:2", cwd=tmp_path)
    lines = done.stderr.strip().splitlines()  # a bad compaction spec, before anything runs
    assert done.returncode == 2 and len(lines) == 1 and "'forget:2'" in lines[0], done.stderr
    (tmp_path / "hilbert.toml").write_text("repository_map_tokens = 50\n")
    done = hilbert("run", "--plan", "one.md", "--repo", "repo", *model, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()  # a map budget too small to say anything, before anything runs
    assert done.returncode == 2 and len(lines) == 1 and "repository_map_tokens = 50" in lines[0], done.stderr
    (tmp_path / "hilbert.toml").unlink()
    done = hilbert(
        "run", "--plan", "bad.md", "--repo", "repo", "--model", "openai:m@http://127.0.0.1:9/v1", cwd=tmp_path
    )
    assert done.returncode == 2 and "bad.md:3:" in done.stderr, done.stderr
    good = tmp_path / "good.md"
    good.write_text("# goal\n\n## T1 — t\n\n```yaml hilbert-task\nverify: 'true'\n```\n")
    same_family = [
        "--model",
        "openai:m@http://127.0.0.1:9/v1",
        "--judge-model",
        "openai-responses:j@http://127.0.0.1:9/v1",
    ]
    done = hilbert("run", "--plan", "good.md", "--repo", "repo", *same_family, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "of the workers' family (openai)" in lines[0], (
        done.stderr
    )


class HeldAtSecondCall:
    """A responder whose second answer waits until `release` is set (at most 100 s: under the client's
    120 s timeout), so that what a test does between an agent's model calls lands while it works."""

    def __init__(self, inner: Responder) -> None:
        self.inner, self.calls, self.release = inner, 0, threading.Event()

    @property
    def name(self) -> str:
        return self.inner.name

    def reply(self, conversation: Conversation) -> Reply:
        self.calls += 1
        if self.calls == 2:
            self.release.wait(timeout=100)
        return self.inner.reply(conversation)


def test_send_ask_logs_and_stop_on_a_running_fleet(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "repo", 5, bugs=3)
    commit_all(project.path)
    (tmp_path / "PLAN.md").write_text(
        "# fix it\n\n## T1 — listops\n\n```yaml hilbert-task\n"
        "verify: python -m pytest -q tests/test_listops.py\n"
        "claims: [quickbits/listops.py]\n```\n\n## T2 — numbers\n\n```yaml hilbert-task\n"
        "verify: python -m pytest -q tests/test_numbers.py\nclaims: [quickbits/numbers.py]\n```\n"
    )
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(tmp_path / "home")}
    # the engineer's second answer waits for the person's send, ask and stop: on a loaded machine each
    # command takes seconds, and a fixed latency let the task finish first (seen at load 15)
    held = HeldAtSecondCall(make_responder("engineer"))
    with FakeServer(held, latency="ttft=0.2,tps=inf") as engineer:
        fleet = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hilbert.ui.cli",
                "run",
                "--plan",
                "PLAN.md",
                "--repo",
                "repo",
                "--workers",
                "1",
                "--model",
                f"openai:fake@{engineer.openai_base_url}",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while "model call 1:" not in (hilbert("logs", "poincare", cwd=tmp_path).stdout):
                assert fleet.poll() is None, fleet.communicate()
            sent = hilbert("send", "POINCARE", "please also add a comment", cwd=tmp_path)
            assert sent.returncode == 0 and "sent to Poincaré" in sent.stdout
            asked = hilbert("ask", "Poincaré", cwd=tmp_path)
            assert asked.returncode == 0 and "Poincaré is on task T1" in asked.stdout
            assert "no agent" in hilbert("ask", "nobody", cwd=tmp_path).stderr
            stopped = hilbert("stop", cwd=tmp_path)
            assert stopped.returncode == 0 and "stop requested" in stopped.stdout
            held.release.set()
            out, err = fleet.communicate(timeout=120)
        finally:
            held.release.set()
            if fleet.poll() is None:
                fleet.kill()
                fleet.communicate()
    assert fleet.returncode == 1, out[-2000:] + err  # stopped before finishing: not all merged
    log = hilbert("logs", "poincare", cwd=tmp_path).stdout
    assert "please also add a comment" in log and "stopped (halted)" in log
    assert "the person asked this agent to stop" in log
    assert "T2: pending" in out  # no new task started after the stop
    late = hilbert("send", "poincare", "are you still there?", cwd=tmp_path)  # nobody reads it now
    assert late.returncode == 0 and "not read now: Poincaré is halted" in late.stdout, late.stdout
    assert "sent to" not in late.stdout and "hilbert run --resume" in late.stdout


def test_status_watch_refreshes_until_the_run_ends(tmp_path: Path) -> None:
    from hilbert.store import EventStore

    db = tmp_path / "log.db"
    with EventStore.open(db) as store:
        store.append("r1", "harness", "fleet_started", {"tasks": ["T1"], "workers": 1, "model": "m"})
        store.append(
            "r1",
            "Noether",
            "agent_started",
            {"task": "Task T1: x", "model": "m", "workspace": "w", "tools": [], "messages": []},
        )
    env = {**command_env(), "HILBERT_HOME": str(tmp_path / "home")}
    watching = subprocess.Popen(
        [sys.executable, "-m", "hilbert.ui.cli", "status", "--watch", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert watching.stdout is not None
    seen: list[str] = []
    while sum(line.startswith("Noether") for line in seen) < 2:  # it refreshed a run that is going
        line = watching.stdout.readline()
        assert line, watching.communicate(timeout=20)  # it stopped watching before the run ended
        seen.append(line)
    assert watching.poll() is None  # still watching a run that is going
    with EventStore.open(db) as store:
        store.append("r1", "harness", "fleet_finished", {"states": {"T1": "done"}, "tip": "x", "stuck": {}})
    rest, err = watching.communicate(timeout=20)
    out = "".join(seen) + rest
    assert watching.returncode == 0, err
    headers = [line for line in out.splitlines() if line.startswith("run r1 at ")]
    assert len(headers) >= 3 and "running" in headers[0] and headers[-1].endswith("ended"), out
    assert out.count("Noether") == len(headers)


def test_status_says_what_each_worker_is_doing_from_the_log(tmp_path: Path) -> None:
    from hilbert.fleet.state import Fold
    from hilbert.store import EventStore
    from hilbert.ui.fleet_views import worker_states

    def attempt(task: str, worker: str) -> tuple[str, str, dict]:
        return ("harness", "task_started", {"task": task, "worker": worker, "worker_id": to_id(worker)})

    def checked(task: str, worker: str) -> tuple[str, str, dict]:  # its work passed and was fetched
        return ("harness", "task_attempted", {"task": task, "worker": worker, "candidate": ref(task, worker)})

    def ref(task: str, worker: str) -> str:
        return f"refs/hilbert/candidates/{task}/{to_id(worker)}"

    started = {"task": "x", "model": "m", "workspace": "w", "tools": [], "messages": []}
    stopped = {"status": "finished", "turns": 1, "usage": {}, "cost_usd": 0.0}
    finish = {
        "call_id": "c",
        "name": "finish",
        "arguments": {},
        "message": "h",
        "is_error": False,
        "duration_s": 0,
    }
    with EventStore.open(tmp_path / "log.db") as store:
        log = [
            attempt("T1", "Poincaré"),
            ("Poincaré", "agent_started", started),  # still working
            attempt("T2", "Noether"),
            ("Noether", "agent_started", started),  # called finish; the harness is checking
            ("Noether", "tool_result", finish),
            attempt("T3", "Euler"),
            ("Euler", "agent_started", started),  # checked; waits in the merge queue
            ("Euler", "agent_stopped", stopped),
            checked("T3", "Euler"),
            ("harness", "task_state", {"task": "T3", "status": "verifying", "worker": "Euler"}),
            attempt("T4", "Gauß"),
            ("Gauß", "agent_started", started),  # merged
            ("Gauß", "agent_stopped", stopped),
            checked("T4", "Gauß"),
            ("harness", "merged", {"task": "T4", "ref": ref("T4", "Gauß")}),
            attempt("T5", "Riemann"),
            ("Riemann", "agent_started", started),  # its work conflicted and the task went back
            ("Riemann", "agent_stopped", stopped),
            checked("T5", "Riemann"),
            ("harness", "merge_conflict", {"task": "T5", "ref": ref("T5", "Riemann"), "files": ["a.py"]}),
            ("harness", "task_state", {"task": "T5", "status": "pending", "worker": None}),
            attempt("T6", "Turing"),
            ("Turing", "agent_started", started),  # halted by its turn limit: no candidate
            ("Turing", "agent_stopped", {**stopped, "status": "halted"}),
        ]
        for agent, kind, data in log:
            store.append("r", agent, kind, data)
        states = worker_states(Fold(store, "r").catch_up())
    assert states == {
        "Poincaré": "working",
        "Noether": "judged",
        "Euler": "waiting",
        "Gauß": "done",
        "Riemann": "sent back",
        "Turing": "halted",
    }


def test_a_worker_with_no_event_for_long_is_stuck_and_one_whose_run_process_died_is_dead(
    tmp_path: Path,
) -> None:
    import os
    import socket
    import time

    from hilbert.fleet.state import Fold
    from hilbert.store import EventStore
    from hilbert.ui.fleet_views import STUCK_AFTER_S, run_ended, worker_states

    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    started = {"task": "x", "model": "m", "workspace": "w", "tools": [], "messages": []}
    with EventStore.open(tmp_path / "log.db") as store:
        for run, pid in (("alive", os.getpid()), ("died", dead_pid.pid)):
            store.append(
                run, "harness", "fleet_started", {"tasks": [], "pid": pid, "host": socket.gethostname()}
            )
            attempt = {"task": "T1", "worker": "Poincaré", "worker_id": "poincare"}
            store.append(run, "harness", "task_started", attempt)
            store.append(run, "Poincaré", "agent_started", started)
        alive, died = Fold(store, "alive").catch_up(), Fold(store, "died").catch_up()
        assert worker_states(alive) == {"Poincaré": "working"} and not run_ended(alive)
        later = time.time() + STUCK_AFTER_S + 1
        # its first model call is in flight: money is being spent, it is not stuck
        assert worker_states(alive, now=later) == {"Poincaré": "thinking"}
        store.append("alive", "Poincaré", "model_call", {"usage": {}, "cost_usd": 0.0})  # its tools run
        assert worker_states(Fold(store, "alive").catch_up(), now=later) == {"Poincaré": "stuck"}
        assert worker_states(died) == {"Poincaré": "dead"} and run_ended(died)


def test_run_refuses_a_repository_with_submodules_in_one_line(tmp_path: Path) -> None:
    """The base's own submodules are not materialised: `hilbert run` refuses the repository before
    anything starts, in one line naming them."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "app.py").write_text("X = 1\n")
    (repo / ".gitmodules").write_text('[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ./lib\n')
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "base"], cwd=repo, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True)
    gitlink = f"160000,{sha.stdout.strip()},vendor/lib"
    subprocess.run(["git", "update-index", "--add", "--cacheinfo", gitlink], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "submodule"], cwd=repo, check=True)
    (tmp_path / "one.md").write_text("# goal\n\n## T1 — t\n\n```yaml hilbert-task\nverify: 'true'\n```\n")
    done = hilbert(
        "run", "--plan", "one.md", "--repo", "repo", "--model", "openai:m@http://127.0.0.1:9/v1", cwd=tmp_path
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "submodule" in lines[0] and "vendor/lib" in lines[0] and "Traceback" not in done.stderr


def test_into_refuses_a_checked_out_branch_and_a_run_that_merged_nothing_writes_nothing(
    tmp_path: Path,
) -> None:
    project = generate_sample_project(tmp_path / "repo", 5, bugs=1)
    commit_all(project.path)
    bug = project.bugs[0].file
    (tmp_path / "PLAN.md").write_text(
        f"# fix it\n\n## T1 — fix {bug}\n\n```yaml hilbert-task\nclaims: [{bug}]\n"
        "verify: python -m pytest -q -p no:cacheprovider\n```\n"
    )
    refs = git(project.path, "for-each-ref")
    with FakeServer("echo") as idle:  # answers in words, never calls a tool: no work is ever claimed
        model = ["--model", f"openai:fake@{idle.openai_base_url}"]
        refused = hilbert(
            "run", "--plan", "PLAN.md", "--repo", "repo", "--into", "main", *model, cwd=tmp_path
        )
        assert refused.returncode == 2 and "the branch main is checked out" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and not idle.requests
        ran = hilbert("run", "--plan", "PLAN.md", "--repo", "repo", "--into", "result", *model, cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr + ran.stdout[-3000:]
    assert (
        "0 of 1 tasks merged" in ran.stdout
        and "no task merged: nothing was written to your repository" in ran.stdout
    )
    assert "the result is" not in ran.stdout and "git fetch" not in ran.stdout
    assert git(project.path, "for-each-ref") == refs  # no branch, nothing moved


def test_runs_lists_each_run_and_commands_refuse_to_guess_between_two_live_ones(tmp_path: Path) -> None:
    """Two live runs on one repository (this test's own process stands for their orchestrators): `hilbert
    runs` lists both, and `status` without --run names them instead of silently picking the newer."""
    import os
    import socket

    from hilbert.fleet.events import FleetStarted
    from hilbert.store import EventStore

    repo = tmp_path / "repo"
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid stands for an orchestrator that died
    with EventStore.open(tmp_path / "home" / "hilbert.db") as store:
        for run, pid in (("run-a", os.getpid()), ("run-b", os.getpid()), ("run-c", dead.pid)):
            started = FleetStarted(
                tasks=["T1"], repo=str(repo), base="0" * 40, pid=pid, host=socket.gethostname()
            )
            store.append(run, "harness", "fleet_started", started.data())
    listed = hilbert("runs", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.strip().splitlines()
    assert header.split() == ["RUN", "STATE", "AGE", "DONE", "NEEDS", "YOU", "SPENT", "REPOSITORY"]
    assert [row.split()[:2] for row in rows] == [
        ["run-a", "live"],
        ["run-b", "live"],
        ["run-c", "interrupted"],
    ]
    assert all(row.endswith(str(repo)) for row in rows), rows
    ambiguous = hilbert("status", cwd=tmp_path)
    assert ambiguous.returncode == 2 and "2 runs may be live: run-a, run-b" in ambiguous.stderr, (
        ambiguous.stderr
    )
    assert "--run" in ambiguous.stderr and len(ambiguous.stderr.strip().splitlines()) == 1
    named = hilbert("status", "--run", "run-b", cwd=tmp_path)
    assert named.returncode == 0 and named.stdout.startswith("run run-b: "), named.stdout


def test_answering_no_keeps_the_plan_and_prints_a_command_that_runs_as_printed(tmp_path: Path) -> None:
    """At a terminal, "n" to "Run this plan now?" is not an error: the plan stays, and the command
    printed to run it later carries the models it was given (it used to stop at "no model given")."""
    import os
    import pty
    import shlex

    project = generate_sample_project(tmp_path / "repo", 7, bugs=1)
    commit_all(project.path)
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(tmp_path / "home")}
    with FakeServer("lead") as lead, FakeServer("engineer") as engineer:
        models = [
            "--model",
            f"openai:fake@{engineer.openai_base_url}",
            "--lead-model",
            f"anthropic:lead@{lead.base_url}",
        ]
        controller, terminal = pty.openpty()  # the person's terminal: stdin only
        os.write(controller, b"n\n")
        try:
            asked = subprocess.run(
                [sys.executable, "-m", "hilbert.ui.cli", "run", "fix the tests", "--repo", "repo", *models],
                cwd=tmp_path, env=env, stdin=terminal, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        finally:
            os.close(terminal)
            os.close(controller)
        assert asked.returncode == 0 and not asked.stderr, asked.stderr + asked.stdout[-2000:]
        assert "not run: the plan is in" in asked.stdout and (tmp_path / "PLAN.md").is_file()
        printed = asked.stdout.strip().splitlines()[-1].strip()
        assert printed.startswith("hilbert run --plan ") and "--model" in printed, printed
        again = run_cli(*shlex.split(printed)[1:], cwd=tmp_path, env=env, timeout=300)
    assert again.returncode == 0, again.stderr + again.stdout[-2000:]
    assert re.search(r"\b(\d+) of \1 tasks merged", again.stdout), again.stdout[-2000:]
