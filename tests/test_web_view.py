"""What `hilbert web` pushes: the plan laid out as a graph by dependency depth, and the server's one
`RunLog` (`Hub`) that catches up with events another writer commits and wakes the event stream with the
changed data — and only then; bad input to `hilbert web` is one line, and so is Ctrl-C with a page open."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from hilbert.commands import command_env
from hilbert.fleet.events import FleetStarted
from hilbert.fleet.plan import Plan, Task
from hilbert.store import EventStore
from hilbert.ui.cli import cli
from hilbert.ui.web import Hub

DIAMOND = Plan(
    goal="g",
    tasks=(
        Task(id="A", title="first", verify="true"),
        Task(id="B", title="left", verify="true", depends_on=("A",)),
        Task(id="C", title="right", verify="true", depends_on=("A",)),
        Task(id="D", title="join", verify="true", depends_on=("B", "C")),
    ),
)


def start(store: EventStore) -> None:
    started = FleetStarted(tasks=["A", "B", "C", "D"], plan=DIAMOND.model_dump(mode="json"), workers=2)
    store.append("r", "harness", started.kind, started.data())


def test_the_plan_is_a_graph_laid_out_by_dependency_depth_and_the_hub_pushes_only_changes(
    tmp_path: Path,
) -> None:
    with EventStore.open(tmp_path / "log.db") as store, EventStore.open(tmp_path / "log.db") as writer:
        start(store)
        now = [1000.0]
        hub = Hub(store, "r", clock=lambda: now[0])

        async def drive() -> None:
            stream = hub.stream()
            await hub.refresh()
            first = json.loads((await anext(stream)).split("data: ", 1)[1])
            assert first["climb"] is None  # a fleet run: no climb section
            nodes = {n["id"]: (n["col"], n["row"], n["status"]) for n in first["plan"]["nodes"]}
            assert nodes == {
                "A": (0, 0, "pending"),
                "B": (1, 0, "pending"),
                "C": (1, 1, "pending"),
                "D": (2, 0, "pending"),
            }
            assert sorted(map(tuple, first["plan"]["edges"])) == [
                ("A", "B"),
                ("A", "C"),
                ("B", "D"),
                ("C", "D"),
            ]
            assert first["agents"] == [] and hub.version == 1

            await hub.refresh()  # nothing new, the ages still fresh: nothing pushed
            assert hub.version == 1
            writer.append("r", "Ada", "agent_started", {"task": "A", "model": "m", "tools": []})
            writer.append("r", "harness", "task_state", {"task": "A", "status": "running", "worker": "Ada"})
            waiting = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0)
            assert not waiting.done()
            await hub.refresh()
            second = json.loads((await asyncio.wait_for(waiting, 10)).split("data: ", 1)[1])
            assert [a["name"] for a in second["agents"]] == ["Ada"]
            assert second["plan"]["nodes"][0]["status"] == "running"
            assert second["last_id"] == writer.last_id() and hub.version == 2

        asyncio.run(drive())


def test_bad_input_to_hilbert_web_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "log.db"
    with EventStore.open(log) as store:
        start(store)
    nope = CliRunner().invoke(cli, ["web", "nope", "--db", str(log)])
    assert nope.exit_code == 2 and nope.output == f"hilbert: error: no run nope in {log} — known runs: r\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = CliRunner().invoke(cli, ["web", "r", "--db", str(log), "--port", str(port)])
    assert busy.exit_code == 2, busy.output
    assert busy.output.startswith(f"hilbert: error: cannot listen on 127.0.0.1:{port} (")
    assert busy.output.endswith("— pick another --port (0: any free)\n")


def test_ctrl_c_with_a_page_open_ends_its_stream_and_the_server_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "log.db"
    with EventStore.open(log) as store:
        start(store)
    command = [sys.executable, "-u", "-m", "hilbert.ui.cli", "web", "r", "--db", str(log)]
    web = subprocess.Popen(
        command, env=command_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert web.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", web.stdout.readline())
        assert url is not None, web.communicate(timeout=60)
        port, token = int(url[1]), url[2]
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=60)) as page:
            page.request("GET", "/api/events", headers={"Cookie": f"hilbert_web_{port}={token}"})
            stream = page.getresponse()
            assert stream.status == 200
            assert stream.readline().startswith(b"id: 1")  # the page's stream is open, its first event came
            web.send_signal(signal.SIGINT)
            rest = stream.read()  # the server ends the stream (an open one never ends by itself) ...
        assert rest.endswith(b"\n\n") and b"event: view" in rest
        _, err = web.communicate(timeout=60)  # ... and then itself, with no traceback
    finally:
        if web.poll() is None:
            web.kill()
            web.communicate()
    # no traceback: uvicorn hands the signal on after its graceful stop (130, "hilbert: interrupted"), or,
    # when the signal lands while it starts or stops on a loaded machine, stops quietly (seen at load 4)
    assert (web.returncode, err.strip()) in [(130, "hilbert: interrupted"), (0, "")], err


def test_the_page_shows_what_the_machines_governor_does_for_the_runs_model(tmp_path: Path) -> None:
    from hilbert.models.governor import Governor, GovernorStore, Knobs, Outcome, bucket_key
    from hilbert.settings import Settings

    url, model = "http://127.0.0.1:9", "anthropic:fake-claude"
    governor = Governor(GovernorStore(tmp_path / "governor.db"), Knobs())

    async def throttled() -> None:
        async with governor.admit(bucket_key("secret", url, model), 100) as slot:
            slot.report(Outcome("throttled", retry_after_s=600))

    with EventStore.open(tmp_path / "log.db") as store:
        settings = {"model": f"{model}@{url}", "governor.path": str(tmp_path / "governor.db")}
        started = FleetStarted(plan=DIAMOND.model_dump(mode="json"), settings=settings)
        store.append("r", "harness", started.kind, started.data())
        store.append("r", "Ada", "agent_started", {"task": "A", "model": f"{model}@{url}"})
        asyncio.run(throttled())
        governor.close()
        blind, told = Hub(store, "r"), Hub(store, "r", settings=Settings.load({}))
        asyncio.run(blind.refresh())
        asyncio.run(told.refresh())
    assert json.loads(blind.data)["governor"] == []
    lines = json.loads(told.data)["governor"]
    shown = next(line for line in lines if line.startswith(model))
    assert re.search(r"every caller paused \d+ s more: rate limited \(429\): Retry-After 600 s", shown), lines
