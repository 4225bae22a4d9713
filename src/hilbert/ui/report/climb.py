"""`hilbert report` on a climb run: its progress plot, leaderboard and every try, from the climb's fold
(`hilbert.climb.state.ClimbState`) — the same fold `climb --status` and `results.tsv` read.

The plot: each measured try's median (kept ones filled, reverted ones hollow, coloured by the stage
that reverted them), the best as a step line from the base's median, and the band of the base's
noise × the margin an improvement must clear. Strings from the log are escaped (`page`), or drawn by
matplotlib as outlines.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hilbert.climb.metric import MARGIN
from hilbert.climb.results import COLUMNS, leaderboard, rows
from hilbert.climb.state import ClimbState
from hilbert.ui.report.page import CSS, _e, _section, _table
from hilbert.ui.report.plots import _svg

STAGE_COLOURS = {
    "kept": "#2e7d32",
    "no_gain": "#90a4ae",
    "answer": "#c62828",
    "overfit": "#6a1b9a",
    "stale": "#ef6c00",
    "measure": "#6d4c41",
}
OTHER = "#455a64"


def progress_svg(state: ClimbState) -> str | None:
    """The climb's progress (None before the base was measured): tries by number, the best stepping."""
    base = state.baseline_median
    if base is None:
        return None
    figure = Figure(figsize=(10.0, 3.6))
    axes = figure.add_subplot()
    tries = sorted(state.tries.values(), key=lambda t: t.no)
    last = max((t.no for t in tries), default=0) + 1
    band = MARGIN * state.noise
    axes.axhspan(base - band, base + band, color="#1565c0", alpha=0.12, linewidth=0)
    steps_x, steps_y, best = [0], [base], base
    for view in tries:
        if view.outcome == "kept" and view.median is not None:
            steps_x += [view.no, view.no]
            steps_y += [best, view.median]
            best = view.median
    steps_x.append(last)
    steps_y.append(best)
    axes.plot(steps_x, steps_y, color="#1565c0", linewidth=1.5)
    stages: list[str] = []
    for view in tries:
        if view.median is None:
            continue
        stage = "kept" if view.outcome == "kept" else view.stage or "running"
        colour = STAGE_COLOURS.get(stage, OTHER)
        face = colour if stage == "kept" else "none"
        axes.plot([view.no], [view.median], marker="o", markersize=6, color=colour, markerfacecolor=face)
        stages.append(stage)
    handles = [Line2D([], [], color="#1565c0", label="best")]
    for stage in dict.fromkeys(stages):
        colour = STAGE_COLOURS.get(stage, OTHER)
        face = colour if stage == "kept" else "none"
        handles.append(
            Line2D([], [], color=colour, marker="o", linestyle="", markerfacecolor=face, label=stage)
        )
    axes.legend(handles=handles, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles))
    axes.set_xlabel("try", fontsize=8)
    started = state.started
    kind = "CPU seconds (harness)" if started and started.metric_kind == "time" else "metric"
    axes.set_ylabel(kind, fontsize=8)
    axes.set_xlim(0, last)
    axes.tick_params(labelsize=7)
    return _svg(figure)


def climb_html(state: ClimbState) -> str:
    """The climb's page: its leaderboard's lines, the progress plot, every try (as results.tsv)."""
    title = f"hilbert climb {state.run}"
    svg = progress_svg(state)
    plot = f'<div class="plot">{svg}</div>' if svg else '<p class="muted">the base is not measured yet</p>'
    board = "<pre>" + _e("\n".join(leaderboard(state))) + "</pre>"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _section("summary", "Leaderboard", board),
        _section("progress", "Progress", plot),
        _section("tries", "Every try", _table(COLUMNS, rows(state), numeric=(0, 3, 4))),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


__all__ = ["climb_html", "progress_svg"]
