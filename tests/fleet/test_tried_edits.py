"""An attempt that runs out of turns tells the next one which edits it tried and put back.

The simulated engineer searches a function's lines for the fix, one edit, test and put-back at a
time, top to bottom; here the bug is on the function's last line, farther than one attempt's turns
reach. Without the list, the second attempt starts the same search from the top and stops where the
first did; with it, it skips what was tried and reaches the bug.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from fleet_support import ENV, commit_all

from hilbert.commands import Runner
from hilbert.context.tried import TRIED, tried_edits
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.store import EventStore, every_turn
from hilbert.testing.fake_server import FakeServer

SOURCE = """\
def summary(values):
    low = values[0]
    high = values[0]
    for value in values[1:]:
        if value < low:
            low = value
        if value > high:
            high = value
    spread = high - low
    middle = (high + low) / 3
    return low, high, spread, middle
"""
TEST = "from calc import summary\n\n\ndef test_summary():\n    assert summary([3, 1, 2]) == (1, 3, 2, 2.0)\n"


def test_the_next_attempt_skips_the_edits_an_attempt_tried_and_put_back(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SOURCE)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    commit_all(repo)
    task = Task(id="T1", title="fix summary in calc.py", verify="python -m pytest -q tests/test_calc.py")
    with FakeServer("engineer", seed=1) as server, EventStore.open(tmp_path / "log.db") as store:
        result = asyncio.run(
            run_fleet(
                Plan(goal="make the tests pass", tasks=(task,)),
                repo=repo,
                root=tmp_path / "run",
                run="r",
                model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of(
                    # the gate's differential runs are proven in tests/judge: here they only cost time
                    {
                        "fleet.workers": 1,
                        "fleet.max_attempts": 2,
                        "budgets.max_turns": 30,
                        "gate.differential": False,
                    }
                ),
            )
        )
        attempts = [e.data for e in store.events(run="r", kinds=["task_attempted"])]
        retried = [e.data["why"] for e in store.events(run="r", kinds=["task_retried"])]
        tried = [tried_edits(every_turn(store, "r", a["worker"])) for a in attempts]
    assert result.all_done, result.states
    assert attempts[0]["status"] == "halted" and len(attempts) >= 2, attempts
    assert TRIED in retried[0] and all(edit.line() in retried[0] for edit in tried[0]), retried[0]
    # no attempt tried again what an earlier one had tried and put back
    for n, edits in enumerate(tried[1:], 1):
        earlier = {e for before in tried[:n] for e in before}
        assert not earlier & set(edits), n
