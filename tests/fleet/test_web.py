"""`hilbert web` in a real headless Chromium (Debian's `chromium`, `make chromium`; driven by Playwright's
Python package through `executable_path`, never a downloaded browser) while a fleet runs against the
fake model server: the page loads, follows the run live without a reload, shows a planted `<script>`
as text, and its send reaches the agent; a plain client is refused without the token, from a foreign
Host, and with a foreign Origin; an agent chosen while another's transcript is on its way gets its own.
Screenshots are kept under the test's tmp dir (and `$HILBERT_TEST_ARTIFACTS` when set); their paths are
printed."""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet_support import ENV, readme_repo
from playwright.sync_api import Page, Route, sync_playwright

from hilbert.commands import Runner, command_env
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.judge.perturb import NO_FAKETIME, faketime_library
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer, ScriptedResponder
from hilbert.testing.fake_server.responder import Conversation, Reply

RUN = "w"
WAIT_S = 45.0  # generous: a loaded 2-core machine
PLANTED = '<script>window.planted = 1</script><img src=x onerror="window.planted = 2">'
MESSAGE = "from the web page: check T2 too"
FLAG = "go-on.flag"  # each worker's first command waits for this file in its workspace: the test says when


def release_workers(store: EventStore, fleet: threading.Thread, go: threading.Event) -> None:
    """Once `go` is set, put the flag in every worker's workspace, as each starts, until the fleet ends."""
    go.wait()
    while fleet.is_alive():
        for started in store.events(run=RUN, kinds=["task_started"]):
            flag = Path(started.data["workspace"]) / FLAG
            if flag.parent.is_dir() and not flag.exists():
                flag.touch()
        time.sleep(0.1)


class Recording:
    """The scripted worker, keeping the text of every request it answers (what reached the agent)."""

    name = "recording"

    def __init__(self, script: ScriptedResponder) -> None:
        self.script, self.seen, self.lock = script, [], threading.Lock()
        self.seen: list[str]

    def reply(self, conversation: Conversation) -> Reply:
        with self.lock:
            self.seen.append("\n".join(str(m.content) for m in conversation.messages))
        return self.script.reply(conversation)


def wait(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def request(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read(200).decode()
    finally:
        connection.close()


def keep(shot: Path) -> None:
    print(f"\nhilbert web in Chromium, screenshot: {shot}")
    if folder := os.environ.get("HILBERT_TEST_ARTIFACTS"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        print(f"  kept also as {shutil.copy(shot, Path(folder) / shot.name)}")


def test_the_dashboard_in_chromium_follows_a_running_fleet_and_guards_its_door(tmp_path: Path) -> None:
    wait_cmd = f"until [ -f {FLAG} ]; do sleep 0.1; done; echo released"
    script = ScriptedResponder.from_turns(
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": wait_cmd, "timeout_s": 120}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]},
            {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}]},
        ]
    )
    worker = Recording(script)
    tasks = (
        Task(id="T1", title=PLANTED, verify="test -f done.txt"),
        Task(id="T2", title="after T1", verify="test -f done.txt", depends_on=("T1",)),
    )
    log, repo = tmp_path / "log.db", readme_repo(tmp_path / "repo")
    outcome: list[Any] = []

    with FakeServer(worker) as server, EventStore.open(log) as store:

        def fleet() -> None:
            try:
                outcome.append(
                    asyncio.run(
                        run_fleet(
                            Plan(goal=f"the goal {PLANTED}", tasks=tasks),
                            repo=repo,
                            root=tmp_path / "run",
                            run=RUN,
                            model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                            store=store,
                            runner=Runner.unsandboxed(ENV),
                            settings=Settings.of({"fleet.workers": 1, "commands.test": "true"}),
                        )
                    )
                )
            except BaseException as error:
                outcome.append(error)
                raise

        running = threading.Thread(target=fleet, daemon=True)
        running.start()
        go = threading.Event()
        threading.Thread(target=release_workers, args=(store, running, go), daemon=True).start()
        calls = wait(lambda: store.events(run=RUN, kinds=["model_call"]), "the first worker's first turn")
        first = calls[0].agent

        command = [sys.executable, "-u", "-m", "hilbert.ui.cli", "web", RUN, "--db", str(log), "--port", "0"]
        web = subprocess.Popen(
            command, env=command_env(hilbert_python_first=True), stdout=subprocess.PIPE, text=True
        )
        try:
            assert web.stdout is not None
            url = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", web.stdout.readline())
            assert url is not None
            port, token, address = int(url[1]), url[2], url[0]
            own = f"127.0.0.1:{port}"

            # the door, with a plain client: no token, a foreign Host, a foreign Origin
            for path in ("/", "/api/view", "/api/events", "/assets/app.js"):
                assert request(port, "GET", path, {"Host": own})[0] == 401, path
            assert request(port, "GET", f"/?token={token}", {"Host": f"rebound.example:{port}"})[0] == 403
            cookie = {"Host": own, "Cookie": f"hilbert_web_{port}={token}"}
            assert request(port, "GET", "/api/view", cookie)[0] == 200
            foreign = {**cookie, "Origin": "http://rebound.example", "Content-Type": "application/json"}
            assert request(port, "POST", "/api/stop", foreign)[0] == 403
            assert store.events(run=RUN, kinds=["stop_requested"]) == []

            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
                page: Page = browser.new_page(viewport={"width": 1400, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.on("console", lambda line: errors.append(line.text) if line.type == "error" else None)
                page.goto(address)
                assert "token" not in page.url  # moved into the cookie
                row = page.locator(f'#agents tr[data-agent="{first}"]')
                row.locator("td").nth(3).filter(has_text=re.compile(r"^1$")).wait_for(timeout=WAIT_S * 1000)
                page.locator('#plan g[data-task="T1"][data-status="running"]').wait_for(timeout=WAIT_S * 1000)
                assert page.locator("#run-state").text_content() == "live"
                assert PLANTED in (page.locator("#goal").text_content() or "")  # shown as text, not run
                assert PLANTED[:25] in (page.locator('#plan g[data-task="T1"]').text_content() or "")
                page.evaluate("window.loadedOnce = true")
                shot = tmp_path / "web-live.png"
                page.screenshot(path=str(shot), full_page=True)
                keep(shot)

                page.fill("#send-text", MESSAGE)
                page.click("#send-button")
                page.locator("#notice", has_text=f"sent to {first}").wait_for(timeout=WAIT_S * 1000)
                sent = store.events(run=RUN, kinds=["person_message"])
                assert [(e.data["to"], e.data["text"]) for e in sent] == [(first, MESSAGE)]

                go.set()  # the fleet goes on; the page follows without a reload
                page.locator("#run-state", has_text="finished").wait_for(timeout=WAIT_S * 1000)
                page.locator('#plan g[data-task="T2"][data-status="done"]').wait_for(timeout=WAIT_S * 1000)
                assert row.locator("td").nth(3).text_content() == "3"
                assert page.evaluate("window.loadedOnce") is True and page.evaluate("window.planted") is None
                merged = page.locator('#funnel [data-step="merged"] .count')
                assert merged.text_content() == "2"
                page.click(f'#agents tr[data-agent="{first}"]')
                page.locator("#transcript", has_text=MESSAGE).wait_for(timeout=WAIT_S * 1000)
                shot = tmp_path / "web-finished.png"
                page.screenshot(path=str(shot), full_page=True)
                keep(shot)
                browser.close()
        finally:
            go.set()
            web.terminate()
            web.wait(timeout=30)
            web.stdout.close()  # type: ignore[union-attr]
            running.join(timeout=WAIT_S)
    assert not running.is_alive() and not isinstance(outcome[0], BaseException), outcome
    assert outcome[0].all_done, outcome[0].states
    assert any(MESSAGE in text for text in worker.seen)  # the send reached the agent's next model call


def test_an_agent_chosen_while_anothers_transcript_is_on_its_way_gets_its_own(tmp_path: Path) -> None:
    # a run days old (the server's clock 3 days on): the ages shown stay the same, so the server pushes
    # nothing more and the page's only chance to fetch the chosen agent's transcript is the click itself
    log = tmp_path / "log.db"
    with EventStore.open(log) as store:
        for agent in ("Ada", "Boole"):
            store.append(RUN, agent, "agent_started", {"task": f"T-{agent}", "model": "m", "tools": []})
    library = faketime_library()
    assert library is not None, NO_FAKETIME
    days_on = {"LD_PRELOAD": library, "FAKETIME": "+3d", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    command = [sys.executable, "-u", "-m", "hilbert.ui.cli", "web", RUN, "--db", str(log), "--port", "0"]
    web = subprocess.Popen(command, env={**command_env(), **days_on}, stdout=subprocess.PIPE, text=True)
    try:
        assert web.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", web.stdout.readline())
        assert url is not None
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page()
            held: list[Route] = []  # Ada's transcript, on its way until Boole is chosen

            def adas(address: str) -> bool:
                return "/api/transcript?" in address and "agent=Ada" in address

            page.route(adas, lambda route: held.append(route))
            page.goto(url[0])
            page.locator('#agents tr[data-agent="Ada"].selected').wait_for(timeout=WAIT_S * 1000)
            deadline = time.monotonic() + WAIT_S
            while not held:
                assert time.monotonic() < deadline, "the page never asked for Ada's transcript"
                page.wait_for_timeout(50)  # lets Playwright deliver the route
            page.click('#agents tr[data-agent="Boole"]')
            for route in held:
                route.continue_()
            page.unroute(adas)
            page.locator("#transcript", has_text="T-Boole").wait_for(timeout=WAIT_S * 1000)
            assert "T-Ada" not in (page.locator("#transcript").text_content() or "")
            browser.close()
    finally:
        web.terminate()
        web.wait(timeout=30)
        web.stdout.close()  # type: ignore[union-attr]


def test_a_climb_run_shows_its_progress_plot_and_leaderboard_live(tmp_path: Path) -> None:
    from hilbert.climb import events as ce  # a climb's log, as `hilbert climb` writes it

    run, log = "c1", tmp_path / "log.db"
    records: list[ce.FleetEvent] = [
        ce.ClimbStarted(
            base="b0", metric="python bench.py", metric_kind="time", branch=f"hilbert/climb/{run}/best"
        ),
        ce.BaselineMeasured(commit="b0", values=[1.0, 1.1, 0.9], median=1.0, noise=0.05),
        ce.TryStarted(try_no=1, explorer="Noether", base="b0"),
        ce.TryGated(try_no=1, commit="c1", idea="a <b>dict</b>", passed=True, tree="t1"),
        ce.TryMeasured(try_no=1, commit="c1", values=[0.5, 0.51, 0.49], median=0.5, spread=0.01),
        ce.TryKept(try_no=1, commit="m1", median=0.5, previous=1.0),
        ce.TryStarted(try_no=2, explorer="Erdős", base="m1"),
        ce.TryGated(try_no=2, commit="c2", idea="a table", passed=True, tree="t2"),
        ce.TryMeasured(try_no=2, commit="c2", values=[0.01] * 3, median=0.01),
        ce.TryReverted(try_no=2, stage="answer", reason="answer_differs: on the harness's input ..."),
    ]
    later: list[ce.FleetEvent] = [
        ce.TryStarted(try_no=3, explorer="Noether", base="m1"),
        ce.TryGated(try_no=3, commit="c3", idea="sort once", passed=True, tree="t3"),
        ce.TryMeasured(try_no=3, commit="c3", values=[0.2] * 3, median=0.2),
        ce.TryKept(try_no=3, commit="m3", median=0.2, previous=0.5),
        ce.TryStarted(try_no=4, explorer="Erdős", base="m3"),  # far off: on the edge, the climb readable
        ce.TryGated(try_no=4, commit="c4", idea="a slow detour", passed=True, tree="t4"),
        ce.TryMeasured(try_no=4, commit="c4", values=[900.0] * 3, median=900.0),
        ce.TryReverted(try_no=4, stage="no_gain", reason="not clearly better"),
        ce.ClimbFinished(reason="all 4 tries made", best="m3", median=0.2),
    ]
    with EventStore.open(log) as store:
        for record in records:
            store.append(run, "harness", record.kind, record.data())
        command = [sys.executable, "-u", "-m", "hilbert.ui.cli", "web", run, "--db", str(log), "--port", "0"]
        web = subprocess.Popen(command, env=command_env(), stdout=subprocess.PIPE, text=True)
        try:
            assert web.stdout is not None
            url = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", web.stdout.readline())
            assert url is not None
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(url[0])
                dots = page.locator("#climb-plot circle")
                page.locator('#climb-plot circle[data-stage="answer"]').wait_for(timeout=WAIT_S * 1000)
                assert (
                    dots.count() == 2 and page.locator('#climb-plot circle[data-stage="kept"]').count() == 1
                )
                assert page.locator("#climb-plot .best-line").count() == 1
                assert page.locator("#run-state").text_content() == "climbing"
                assert (
                    page.locator("#plan-section").is_hidden() and page.locator("#funnel-section").is_hidden()
                )
                assert "tasks" not in (page.locator("#headline").text_content() or "")  # a climb has tries
                board = page.locator("#leaderboard").text_content() or ""
                assert "base 1 -> best 0.5" in board and "a <b>dict</b>" in board  # from the log: as text
                assert page.locator("#leaderboard b").count() == 0
                page.evaluate("window.loadedOnce = true")
                for record in later:  # the climb goes on: the page follows without a reload
                    store.append(run, "harness", record.kind, record.data())
                page.locator('#climb-plot circle[data-stage="kept"]').nth(1).wait_for(timeout=WAIT_S * 1000)
                page.locator("#leaderboard", has_text="best 0.2").wait_for(timeout=WAIT_S * 1000)
                page.locator("#run-state", has_text="climb finished").wait_for(timeout=WAIT_S * 1000)
                assert page.evaluate("window.loadedOnce") is True and dots.count() == 4
                kept = page.locator('#climb-plot circle[data-stage="kept"]')
                heights = [float(kept.nth(i).get_attribute("cy") or 0) for i in range(2)]
                assert heights[1] - heights[0] > 40  # 0.5 -> 0.2 stays visible beside a try at 900
                far = page.locator('#climb-plot circle[data-stage="no_gain"]')
                assert "900" in (far.locator("title").text_content() or "")
                shot = tmp_path / "web-climb.png"
                page.screenshot(path=str(shot), full_page=True)
                keep(shot)
                browser.close()
        finally:
            web.terminate()
            web.wait(timeout=30)
            web.stdout.close()  # type: ignore[union-attr]
