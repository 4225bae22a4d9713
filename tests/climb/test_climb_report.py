"""`hilbert report` (`write_report`, what the command calls) on a climb run: a page of its own, with
the progress plot (every measured try, the best stepping down), the leaderboard and every try."""

from __future__ import annotations

from pathlib import Path

from hilbert.climb import events as ce
from hilbert.store import EventStore
from hilbert.ui.report import write_report


def test_the_report_of_a_climb_shows_its_progress_and_every_try(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    records: list[ce.FleetEvent] = [
        ce.ClimbStarted(
            base="b0", metric="python bench.py", metric_kind="time", branch="hilbert/climb/c1/best"
        ),
        ce.BaselineMeasured(commit="b0", values=[1.0, 1.1, 0.9], median=1.0, noise=0.05),
        ce.TryStarted(try_no=1, explorer="Noether", base="b0"),
        ce.TryGated(try_no=1, commit="c1", idea="a <dict>", passed=True, tree="t1"),
        ce.TryMeasured(try_no=1, commit="c1", values=[0.2, 0.21, 0.19], median=0.2, spread=0.01),
        ce.TryKept(try_no=1, commit="c1", median=0.2, previous=1.0),
        ce.TryStarted(try_no=2, explorer="Erdős", base="c1"),
        ce.TryGated(try_no=2, commit="c2", idea="a table", passed=True, tree="t2"),
        ce.TryMeasured(try_no=2, commit="c2", values=[0.01] * 3, median=0.01),
        ce.TryReverted(try_no=2, stage="answer", reason="answer_differs: on the harness's input ..."),
    ]
    with EventStore.open(db) as store:
        for record in records:
            store.append("c1", "harness", record.kind, record.data())
        page = write_report(store, "c1", tmp_path / "report.html").read_text()
    progress = page[page.index('<section id="progress">') :]
    assert progress.index("<svg") < progress.index("</section>")  # the plot is drawn
    assert "CPU seconds timed by the harness" in page and "base 1 -&gt; best 0.2" in page
    assert "a &lt;dict&gt;" in page and "<dict>" not in page  # from the log: escaped
    assert "answer_differs: on the harness" in page and "Erdős" in page
