"""The governor visible in a run (`hilbert.views.governor`): `hilbert status` through the real CLI shows
what the machine's governor does for the run's models — calls at once, the limits it learned from the
headers, a fleet-wide pause, the circuit breaker and its notice — read from the governor's real file,
written by a real `Governor`; a bucket of a model the run does not use is left out."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sqlite3
import time
from pathlib import Path

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.fleet.events import FleetStarted
from hilbert.fleet.plan import Plan, Task
from hilbert.models.governor import Governor, GovernorStore, Knobs, Outcome, bucket_key
from hilbert.store import EventStore
from hilbert.ui.top_view import governor_lines
from hilbert.views.governor import for_run, governor_view

URL = "http://127.0.0.1:9"
MODEL = "anthropic:fake-claude"
KEY = bucket_key("secret", URL, MODEL)


async def _calls(governor: Governor) -> None:
    """What a run's calls taught the governor: limits from the headers, a 429 with Retry-After, then
    failures enough to open the circuit breaker; and a call of another model."""
    headers = {(1200, 1100): "rpm", (270000, 260000): "itpm"}
    async with governor.admit(KEY, 100) as slot:
        slot.report(Outcome("ok", 100, 10, readings={name: pair for pair, name in headers.items()}))
    async with governor.admit(KEY, 100) as slot:
        slot.report(Outcome("throttled", retry_after_s=600))
    store = governor.store  # the pause would hold the next calls: lift it as the file's own writer would
    store.update(KEY, governor.knobs, lambda state: setattr(state, "paused_until", 0.0))
    for _ in range(2):
        async with governor.admit(KEY, 100) as slot:
            slot.report(Outcome("failed"))
    again = time.time() + 600  # paused again, as the 429 had it
    store.update(KEY, governor.knobs, lambda state: setattr(state, "paused_until", again))
    async with governor.admit(bucket_key("secret", URL, "openai:other"), 100) as slot:
        slot.report(Outcome("ok", 100, 10))


def test_status_shows_the_governors_window_limits_pause_and_breaker_for_the_runs_models(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    knobs = Knobs(breaker_failures=2, breaker_cooldown_s=900)
    governor = Governor(GovernorStore(home / "governor.db"), knobs)
    governor.store.notice(KEY, "governor_throttled", "before the run started: not its notice")
    plan = Plan(goal="g", tasks=(Task(id="T1", title="one", verify="true"),))
    with EventStore.open(home / "hilbert.db") as store:
        started = FleetStarted(
            plan=plan.model_dump(mode="json"), settings={"model": f"{MODEL}@{URL}"}, host=socket.gethostname()
        )
        store.append("r", "harness", started.kind, started.data())
        store.append("r", "Poincaré", "agent_started", {"task": "T1", "model": f"{MODEL}@{URL}"})
    asyncio.run(_calls(governor))
    governor.close()

    shown = run_cli("status", "--run", "r", cwd=tmp_path, env={**command_env(), "HILBERT_HOME": str(home)})
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "governor (this machine's, shared by every run on the same key; now):" in out, out
    line = next(line for line in out.splitlines() if line.startswith(f"  {MODEL} (key {KEY[:8]})"))
    assert "0 of 2 calls at once" in line, line  # the window of 4 halved by the 429
    assert "limits 270,000 input tokens/min (learned," in line and "1,200 requests/min (learned," in line
    assert re.search(r"every caller paused \d+ s more: rate limited \(429\): Retry-After 600 s", line), line
    assert "circuit breaker open: a probe call in" in line, line
    assert "governor_paused: circuit breaker open for 900 s after 2 consecutive failures" in out, out
    assert "openai:other" not in out and "before the run started" not in out  # not the run's

    with EventStore.open(home / "hilbert.db") as store:  # the view `top` renders is the same
        from hilbert.fleet.state import Fold
        from hilbert.settings import Settings

        state = Fold(store, "r").catch_up()
        view = for_run(state, Settings.of({"home": str(home)}), 0.0)
    assert [b.model for b in view.buckets] == [MODEL]
    assert [n.kind for n in view.notices] == ["governor_throttled", "governor_paused"]
    assert governor_lines(view, 0.0)[0].startswith(f"{MODEL} (key {KEY[:8]}): 0 of 2 calls at once")
    nothing = governor_view(tmp_path / "no-such.db", [MODEL], 0.0)  # no file: nothing, nothing created
    assert not nothing.buckets and not nothing.notices and not (tmp_path / "no-such.db").exists()


def test_a_busy_run_on_another_model_never_crowds_this_runs_notices_out_and_a_look_creates_no_file(
    tmp_path: Path,
) -> None:
    """The governor's file is the machine's: another run's model may write many notices after this
    run's one (a notice per 429 it met); the view still shows this run's. And a look leaves the
    file's folder as it found it: no `-wal` or `-shm` beside a file no process has open."""
    path = tmp_path / "governor.db"
    store = GovernorStore(path)
    store.update(KEY, Knobs(), lambda state: None)
    store.notice(KEY, "governor_paused", "this run's breaker opened")
    other = bucket_key("other secret", URL, "openai:other")
    for n in range(60):
        store.notice(other, "governor_throttled", f"another run's 429 number {n}")
    store.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    view = governor_view(path, [MODEL], time.time())
    assert [n.why for n in view.notices] == ["this run's breaker opened"], view.notices
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["governor.db"]
    # a bucket of the run's model under another key, idle since before the run began, never paced it
    assert [b.key for b in view.buckets] == [KEY]
    assert governor_view(path, [MODEL], time.time(), since=time.time() + 60).buckets == ()


def test_a_run_shows_the_governor_file_it_ran_with_and_nothing_when_it_ran_without_one(
    tmp_path: Path,
) -> None:
    """`status` may be asked from elsewhere (another hilbert home, no `[governor] path`): the run's view
    reads the file the run's calls went through, as its log records it; and a run that ran with the
    governor off shows no other run's bucket of its model as if it paced this one."""
    from hilbert.fleet.context import Models
    from hilbert.fleet.setup import resumable
    from hilbert.fleet.state import FleetState, Fold
    from hilbert.settings import Settings
    from hilbert.ui.edge import models

    def ran_with(run: str, **governor: object) -> FleetState:
        settings = Settings.of(
            {"home": str(tmp_path / "home"), "model": f"{MODEL}@{URL}"}
            | {f"governor.{key}": value for key, value in governor.items()}
        )
        ran = models(settings)
        recorded = resumable(settings, Models(worker=ran.named(f"{MODEL}@{URL}")))
        if ran.governor is not None:
            ran.governor.store.update(KEY, Knobs(), lambda state: None)  # a call of the run's model
            ran.governor.close()
        plan = Plan(goal="g", tasks=(Task(id="T1", title="one", verify="true"),))
        with EventStore.open(tmp_path / "hilbert.db") as store:
            started = FleetStarted(plan=plan.model_dump(mode="json"), settings=recorded)
            store.append(run, "harness", started.kind, started.data())
            return Fold(store, run).catch_up()

    shared = ran_with("on", path=str(tmp_path / "elsewhere" / "governor.db"))
    off = ran_with("off", enabled=False)
    other = GovernorStore(tmp_path / "now" / "governor.db")  # another run's, in the home status is asked from
    other.update(KEY, Knobs(), lambda state: None)
    other.close()
    asked_from = Settings.of({"home": str(tmp_path / "now")})  # status with a home of its own
    assert [b.model for b in for_run(shared, asked_from, time.time()).buckets] == [MODEL]
    assert for_run(shared, asked_from, time.time()).path == tmp_path / "elsewhere" / "governor.db"
    assert for_run(off, asked_from, time.time()).buckets == ()


def test_a_bucket_saved_in_a_shape_this_hilbert_cannot_read_is_left_out_never_a_traceback(
    tmp_path: Path,
) -> None:
    path = tmp_path / "governor.db"
    store = GovernorStore(path)
    store.update(KEY, Knobs(), lambda state: None)
    store.close()
    with (
        contextlib.closing(sqlite3.connect(path)) as db,
        db,
    ):  # as another hilbert, or a damaged file, left it
        for shape in ("null", '"full"', "[]", "{}", "not json"):
            db.execute(
                "INSERT INTO buckets (key, state) VALUES (?, ?)", (bucket_key(shape, URL, MODEL), shape)
            )
    assert [bucket.key for bucket in governor_view(path, [MODEL], time.time()).buckets] == [KEY]
