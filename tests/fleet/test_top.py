"""`hilbert top` over a real fleet run's log (`top_support`): headless through Textual's pilot — the
agents table holds the log's numbers, the selected agent's transcript follows the cursor, events
appended by another writer appear within a poll, and its keys record exactly what `hilbert send`,
`stop` and `approve` record — then once as a person runs it, in tmux."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, RichLog, Static
from top_support import RUN, copy_log, make_fleet_run

from hilbert.commands import command_env
from hilbert.fleet.events import MERGE_HELD, BudgetAsked, FleetResumed
from hilbert.fleet.inbox import send
from hilbert.models.governor import Governor, GovernorStore, Knobs, Outcome, bucket_key
from hilbert.models.types import Message
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.ui.cli import cli
from hilbert.ui.top import EMPTY, TopApp

WAIT_S = 30.0  # generous: a loaded 2-core machine


@pytest.fixture(scope="module")
def fleet_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fleet_run(tmp_path_factory.mktemp("fleet"))


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


def text_of(app: TopApp, panel: str) -> str:
    return str(app.query_one(f"#{panel}", Static).content)


def transcript(app: TopApp) -> str:
    return "\n".join(line.text for line in app.query_one("#transcript", RichLog).lines)


def table_rows(app: TopApp) -> dict[str, list[str]]:
    table = app.query_one("#agents", DataTable)
    return {str(key.value): [str(cell) for cell in table.get_row(key)] for key in table.rows}


def agents_in_order(store: EventStore) -> list[str]:
    return [e.agent for e in store.events(run=RUN, kinds=["agent_started"])]


def test_the_table_holds_the_logs_numbers_and_the_transcript_follows_the_selection(
    tmp_path: Path, fleet_log: Path
) -> None:
    with EventStore.open(copy_log(fleet_log, tmp_path / "log.db")) as store:
        calls = store.events(run=RUN, kinds=["model_call"])
        expected = {}
        for agent in agents_in_order(store):  # counted here from the raw events, not by the fold
            mine = [e.data["usage"] for e in calls if e.agent == agent]
            tokens = sum(u["input_tokens"] + u["output_tokens"] for u in mine)
            expected[agent] = [str(len(mine)), f"{tokens:,}"]
        tasks = {e.data["worker"]: e.data["task"] for e in store.events(run=RUN, kinds=["task_started"])}
        first, second = agents_in_order(store)

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({"home": str(tmp_path)}), poll_s=0.2)  # no governor file
            async with app.run_test(size=(160, 48)) as pilot:
                await until(pilot, lambda: len(table_rows(app)) == 2, "two agents in the table")
                rows = table_rows(app)
                assert {name: row[3:5] for name, row in rows.items()} == expected
                assert {name: row[1] for name, row in rows.items()} == tasks
                assert all(row[2] == "done" and row[5] == "$?" for row in rows.values()), rows
                await until(pilot, lambda: "write_file done.txt" in transcript(app), "the first transcript")
                assert app.selected == first and f" {first} " in transcript(app)
                await pilot.press("down")
                await until(pilot, lambda: app.selected == second, "the second agent selected")
                await until(pilot, lambda: f" {second} " in transcript(app), "the second transcript")
                shown = transcript(app)
                assert f" {first} " not in shown and "finish claim: done" in shown
                verdicts = text_of(app, "verdicts")
                for agent, task in tasks.items():
                    assert f"{task} {agent}: round 2: DONE (1 send-back before)" in verdicts, verdicts
                    assert f"{task} {agent}: merged" in verdicts
                assert "run r — finished — 2 tasks (2 done)" in str(app.query_one("#run", Static).content)
                assert "of its $50 cap" in text_of(app, "budgets")
                assert text_of(app, "governor") == EMPTY["governor"]
                assert text_of(app, "proposals") == EMPTY["proposals"]

        asyncio.run(drive())


def test_events_another_writer_appends_appear_within_a_poll(tmp_path: Path, fleet_log: Path) -> None:
    log = copy_log(fleet_log, tmp_path / "log.db")
    with EventStore.open(log) as store, EventStore.open(log) as writer:
        first = agents_in_order(store)[0]

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({}), poll_s=0.2)
            async with app.run_test(size=(160, 48)) as pilot:
                await until(pilot, lambda: len(table_rows(app)) == 2, "two agents in the table")
                turns, tokens = table_rows(app)[first][3:5]
                (reply,) = writer.put_messages([Message("assistant", "looking again at done.txt")])
                usage = {"input_tokens": 1_000_000, "output_tokens": 7}  # a wider number than before
                writer.append(RUN, first, "model_call", {"usage": usage, "cost_usd": 0.0, "response": reply})
                writer.append(RUN, "Hypatia", "agent_started", {"task": "T3", "model": "m", "tools": []})
                send(writer, RUN, first, "one more thing")
                await until(pilot, lambda: "Hypatia" in table_rows(app), "the new agent's row")
                now = table_rows(app)[first]
                assert now[3] == str(int(turns) + 1)
                assert now[4] == f"{int(tokens.replace(',', '')) + 1_000_007:,}"
                column = app.query_one("#agents", DataTable).columns["tokens"]
                # shown whole, not cut at the old width: the table measures its columns on its next refresh
                await until(pilot, lambda: column.content_width >= len(now[4]), "the tokens column widened")
                await until(pilot, lambda: "looking again at done.txt" in transcript(app), "the new reply")
                await until(pilot, lambda: "one more thing" in text_of(app, "messages"), "the message")

        asyncio.run(drive())


def proposal(store: EventStore, worker: str) -> None:
    """A held candidate waiting for the person, as the fleet records one (`hilbert.fleet.tainted`)."""
    detail = {"task": "T1", "worker": worker, "diffstat": " 1 file changed, 1 insertion(+)"}
    messages = [{"sender": "Someone", "id": 1}]
    data = {"id": "P1", "action": MERGE_HELD, "detail": detail, "arguments": {}, "worker_messages": messages}
    store.append(RUN, "harness", "proposal_held", data)


def new_events(log: Path, after: int) -> list[tuple[str, str, dict[str, Any]]]:
    with EventStore.open(log) as store:
        return [(e.agent, e.kind, e.data) for e in store.events(run=RUN, after_id=after)]


def test_the_keys_record_exactly_what_the_commands_record(tmp_path: Path, fleet_log: Path) -> None:
    by_keys, by_commands = (copy_log(fleet_log, tmp_path / name) for name in ("keys.db", "commands.db"))
    for log in (by_keys, by_commands):
        with EventStore.open(log) as store:
            first = agents_in_order(store)[0]
            proposal(store, first)
            after = store.last_id()
    text = "look at T2"

    commands = [["send", first, text], ["stop", first], ["stop"], ["approve", "P1"]]
    said = []
    for args in commands:
        result = CliRunner().invoke(cli, [*args, "--db", str(by_commands), "--run", RUN])
        assert result.exit_code == 0, result.output
        said.append(result.output.strip())

    notices = []
    with EventStore.open(by_keys) as store:

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({}), poll_s=0.2)
            async with app.run_test(size=(160, 48)) as pilot:
                await until(pilot, lambda: app.selected == first, "the first agent selected")
                notice = lambda: text_of(app, "notice")  # noqa: E731
                await pilot.press("s", *("space" if c == " " else c for c in text), "enter")
                await until(pilot, lambda: notice().startswith("not read now"), "the send's answer")
                notices.append(notice())
                await pilot.press("x", "n")  # not confirmed: nothing recorded
                await pilot.press("x", "y")
                await until(pilot, lambda: notice().startswith(f"stop requested for {first}"), "the stop")
                notices.append(notice())
                await pilot.press("X", "y")
                await until(pilot, lambda: "every agent" in notice(), "the run's stop")
                notices.append(notice())
                await until(pilot, lambda: "waiting: P1" in text_of(app, "proposals"), "the proposal shown")
                await pilot.press("p", "enter")  # the first waiting proposal is offered
                await until(pilot, lambda: notice().startswith("approved P1"), "the approval")
                notices.append(notice())
                await pilot.press("a", "enter")  # no model given: the facts themselves answer
                await until(pilot, lambda: f"{first} is on task" in text_of(app, "answer"), "the answer")

        asyncio.run(drive())
    assert notices == said
    recorded = new_events(by_keys, after)
    assert recorded == new_events(by_commands, after)
    assert [kind for _, kind, _ in recorded] == [
        "person_message",
        "stop_requested",
        "stop_requested",
        "proposal_approved",
    ]


def test_the_approve_key_offers_a_budget_question_that_waits_and_records_what_approve_records(
    tmp_path: Path, fleet_log: Path
) -> None:
    by_key, by_command = (copy_log(fleet_log, tmp_path / name) for name in ("key.db", "command.db"))
    for log in (by_key, by_command):
        with EventStore.open(log) as store:
            first = agents_in_order(store)[0]
            asked = BudgetAsked(
                id="B1", cap="task_usd", scope="T1", limit=0.01, spent=0.02, agent=first, task="T1"
            )
            store.append(RUN, "harness", asked.kind, asked.data())
            after = store.last_id()
    said = CliRunner().invoke(cli, ["approve", "B1", "--db", str(by_command), "--run", RUN])
    assert said.exit_code == 0, said.output
    with EventStore.open(by_key) as store:

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({}), poll_s=0.2)
            async with app.run_test(size=(160, 48)) as pilot:
                await until(pilot, lambda: "B1" in text_of(app, "budgets"), "the question shown")
                await pilot.press("p", "enter")  # the waiting question is offered first
                await until(pilot, lambda: "B1" in text_of(app, "notice"), "the approval")
                assert text_of(app, "notice") == said.output.strip()

        asyncio.run(drive())
    assert new_events(by_key, after) == new_events(by_command, after)
    assert [kind for _, kind, _ in new_events(by_key, after)] == ["budget_raised"]


def test_the_governor_panel_shows_what_the_machines_governor_does_for_the_runs_model(
    tmp_path: Path, fleet_log: Path
) -> None:
    home = tmp_path / "home"
    governor = Governor(GovernorStore(home / "governor.db"), Knobs())
    key = bucket_key("key", "http://127.0.0.1:9/v1", "openai:fake")  # the model the run's workers used

    async def call() -> None:
        async with governor.admit(key, 10) as slot:
            slot.report(Outcome("ok", 10, 1, readings={"rpm": (600, 590)}))

    asyncio.run(call())
    governor.close()
    with EventStore.open(copy_log(fleet_log, tmp_path / "log.db")) as store:
        # resumed through this governor's file (the fixture's run had none): the view reads the run's file
        resumed = FleetResumed(
            settings={"governor.enabled": True, "governor.path": str(home / "governor.db")}
        )
        store.append(RUN, "harness", resumed.kind, resumed.data())

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({}), poll_s=0.2)
            async with app.run_test(size=(160, 48)) as pilot:
                shown = lambda: text_of(app, "governor")  # noqa: E731
                await until(pilot, lambda: f"openai:fake (key {key[:8]}): " in shown(), "the governor's line")
                assert "0 of 4 calls at once; limits 600 requests/min (learned, " in shown(), shown()

        asyncio.run(drive())


def test_a_question_with_brackets_is_asked_and_shown_as_typed_not_read_as_markup(
    tmp_path: Path, fleet_log: Path
) -> None:
    question = "why did test_a[1] fail? [/] [link=https://example.com]x[/link]"
    with EventStore.open(copy_log(fleet_log, tmp_path / "log.db")) as store:
        first = agents_in_order(store)[0]

        async def drive() -> None:
            app = TopApp(store, RUN, Settings.of({}), poll_s=0.2)
            async with app.run_test(size=(160, 48)) as pilot:
                await until(pilot, lambda: app.selected == first, "the first agent selected")
                await pilot.press("a")
                await until(pilot, lambda: bool(app.screen.query("#answer-input")), "the question's box")
                app.screen.query_one("#answer-input", Input).value = question
                await pilot.press("enter")
                await until(pilot, lambda: f"{first} is on task" in text_of(app, "answer"), "the answer")
                assert text_of(app, "notice") == f"answered: {question}"
                title = app.query_one("#answer", Static).border_title
                assert Content.from_markup(title or "").plain == f"{first}: {question}", title

        asyncio.run(drive())


def tmux(socket: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True, env=env, timeout=30
    )


def test_hilbert_top_in_a_terminal_shows_the_run_stops_it_on_a_key_and_quits_on_q(
    tmp_path: Path, fleet_log: Path
) -> None:
    log = copy_log(fleet_log, tmp_path / "log.db")
    with EventStore.open(log) as store:
        first, second = agents_in_order(store)
    socket = f"hilbert-top-{os.getpid()}"
    env = {**command_env(hilbert_python_first=True), "TERM": "xterm-256color"}
    command = shlex.join([sys.executable, "-m", "hilbert.ui.cli", "top", "--db", str(log)])
    started = tmux(socket, "new-session", "-d", "-s", "top", "-x", "160", "-y", "48", command, env=env)
    assert started.returncode == 0, started.stderr
    screens: list[str] = []

    def screen_shows(*texts: str) -> bool:
        screens.append(tmux(socket, "capture-pane", "-p", "-t", "top").stdout)
        return all(text in screens[-1] for text in texts)

    def wait(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{screens[-1:]}"
            time.sleep(0.1)

    try:
        wait(lambda: screen_shows(first, second, f"transcript: {first}", "round 2: DONE"), "the table")
        kept = tmp_path / "top-capture.txt"
        kept.write_text(screens[-1])
        print(f"\nhilbert top in tmux, as captured: {kept}")
        tmux(socket, "send-keys", "-t", "top", "X")
        wait(lambda: screen_shows("stop the whole run r?"), "the confirmation")
        tmux(socket, "send-keys", "-t", "top", "y")
        wait(lambda: screen_shows("stop requested for every agent"), "the stop's answer")
        assert new_events(log, 0)[-1] == ("person", "stop_requested", {"to": "*"})
        tmux(socket, "send-keys", "-t", "top", "q")
        wait(lambda: tmux(socket, "has-session", "-t", "top").returncode != 0, "hilbert top to exit")
    finally:
        tmux(socket, "kill-server")


def test_an_unknown_run_is_refused_in_one_line(tmp_path: Path, fleet_log: Path) -> None:
    log = copy_log(fleet_log, tmp_path / "log.db")
    result = CliRunner().invoke(cli, ["top", "run-nope", "--db", str(log)])
    assert result.exit_code == 2, result.output
    assert result.output == f"hilbert: error: no run run-nope in {log} — known runs: {RUN}\n"
