"""What a rejected task's next attempt is told: the tests its change broke, as the merge queue compared
them with the integration branch (typed data from the check), before the end of the checks' output —
not only the output's tail, where on a red branch the failures it already had crowd them out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from merge_support import PY, PYTEST_SUITE, by_task, escalations, make_project

from hilbert.fleet.outcomes import FEEDBACK_CHARS
from hilbert.store import EventStore
from hilbert.ui.log_view import format_event


def test_a_rejection_names_the_tests_it_broke_that_passed_on_the_branch(tmp_path: Path) -> None:
    """The tip already fails 40 tests (`legacy*`, long tracebacks); the candidate breaks `test_ok[zz_breaks]`
    too. The rejection names it alone, typed (`merge_rejected.new_failures`), and the retried task's
    feedback, folded from the log as the next attempt's prompt reads it, starts with its id."""

    async def scenario() -> None:
        p = await make_project(tmp_path)
        noisy = "def ok():\n    raise ValueError('legacy ' + 'x' * 400)\n"
        legacy = {f"src/legacy{n:02}.py": noisy for n in range(40)}
        await p.commit("red", {"tests/test_all.py": PYTEST_SUITE, **legacy}, "refs/heads/main")
        await p.git.run("branch", "-f", "base", "red", cwd=p.work)
        queue = p.queue(test_command=f"{PY} -m pytest -q -p no:cacheprovider tests")
        queue.submit(await p.candidate("zz_breaks", good=False))
        outcome = by_task(await queue.process())["zz_breaks"]

        assert outcome.kind == "rejected"
        assert outcome.new_failures == ("tests/test_all.py::test_ok[zz_breaks]",)
        (rejected,) = [data for kind, data in p.events if kind == "merge_rejected"]
        assert rejected["new_failures"] == ["tests/test_all.py::test_ok[zz_breaks]"]
        # the output alone, cut as the feedback is, does not name it: the legacy tracebacks come first
        assert "test_ok[zz_breaks]" not in outcome.output[:FEEDBACK_CHARS]

        state = escalations(p, {"zz_breaks": outcome})
        assert state.states["zz_breaks"].status == "pending"  # retried, with the feedback below
        feedback = state.feedback["zz_breaks"]
        assert feedback.startswith("rejected: with this change the test suite fails 1 test(s) that pass")
        assert feedback.splitlines()[1] == "  tests/test_all.py::test_ok[zz_breaks]"
        assert "legacy" not in "\n".join(feedback.splitlines()[:2])
        assert len(feedback) <= FEEDBACK_CHARS + len("rejected: ")
        with EventStore.open(p.tmp / "log.db") as store:  # `hilbert log` names it too
            (event,) = store.events(kinds=["merge_rejected"])
            line = format_event(event, store).splitlines()[0]
        assert line.endswith("(exit 1) — 1 new failure: tests/test_all.py::test_ok[zz_breaks]"), line

    asyncio.run(scenario())
