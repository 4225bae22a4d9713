"""`hilbert report` (`write_report`, what the command calls) on a climb run: a page of its own, with
the progress plot (every measured try, the best stepping down), the leaderboard and every try."""

from __future__ import annotations

from pathlib import Path

from hilbert.climb import events as ce
from hilbert.climb.results import Progress, progress
from hilbert.climb.state import ClimbFold
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
    assert "a table (answer)" in page  # the leaderboard says why a measured try was not kept


def test_a_try_far_off_the_climb_does_not_flatten_its_progress_plot(tmp_path: Path) -> None:
    """The plot's y range (`Progress.low`/`high`, for the report and the page) is the climb's: the base's
    band, the best line and the tries near them; a try far off (here 500 against a best going 1 -> 0.6) is
    drawn at the edge, not given the axis. A climb whose every reading is 0 still has a range."""

    def shown(measured: list[tuple[float, str]], base: float, noise: float) -> Progress:
        records: list[ce.FleetEvent] = [
            ce.ClimbStarted(base="b0", metric="python bench.py", branch="hilbert/climb/c1/best"),
            ce.BaselineMeasured(commit="b0", values=[base] * 3, median=base, noise=noise),
        ]
        for no, (median, stage) in enumerate(measured, 1):
            records += [
                ce.TryStarted(try_no=no, explorer="Noether", base="b0"),
                ce.TryMeasured(try_no=no, commit=f"c{no}", values=[median] * 3, median=median),
                ce.TryKept(try_no=no, commit=f"m{no}", median=median, previous=base)
                if stage == "kept"
                else ce.TryReverted(try_no=no, stage=stage, reason="..."),
            ]
        with EventStore.open(tmp_path / f"{len(measured)}-{base}.db") as store:
            for record in records:
                store.append("c1", "harness", record.kind, record.data())
            plot = progress(ClimbFold(store, "c1").catch_up())
        assert plot is not None
        return plot

    plot = shown([(0.98, "no_gain"), (0.6, "kept"), (500.0, "no_gain"), (0.59, "no_gain")], 1.0, 0.05)
    assert plot.low <= 0.59 and plot.high >= 1.0 + plot.band and plot.high < 2.0
    flat = shown([(0.0, "no_gain"), (0.0, "no_gain")], 0.0, 0.0)
    assert flat.low < 0.0 < flat.high
