"""`hilbert report`: one run as one self-contained HTML file (docs/design/views.md).

`report_html(view)` renders a `RunView` (`hilbert.views`) with its plots (`plots`, matplotlib's SVG
backend) into the page (`page`); `write_report(store, run, path)` reads the run's log and writes the
file; a climb run (`hilbert.climb`) gets its own page instead (`climb`: progress plot, leaderboard,
every try). Importing this package imports matplotlib: the CLI does it inside the command only.
"""

from __future__ import annotations

from pathlib import Path

from hilbert.climb.state import ClimbFold, is_climb
from hilbert.store import EventStore
from hilbert.ui.report.climb import climb_html
from hilbert.ui.report.page import render
from hilbert.ui.report.plots import agents_svg, spend_svg, timeline_svg
from hilbert.views import RunLog, RunView


def report_html(view: RunView) -> str:
    plots = {}
    if view.bars:
        plots["timeline"] = timeline_svg(view.bars)
    if view.spend:
        plots["spend"] = spend_svg(view.spend)
    if view.agents:
        plots["agents"] = agents_svg(view.agents)
    return render(view, plots)


def write_report(store: EventStore, run: str, path: Path) -> Path:
    """Write the report of `run` (as its log stands now) to `path`; the path written."""
    if is_climb(store, run):
        path.write_text(climb_html(ClimbFold(store, run).catch_up()), encoding="utf-8")
        return path
    path.write_text(report_html(RunLog.read(store, run).view()), encoding="utf-8")
    return path


__all__ = ["report_html", "write_report"]
