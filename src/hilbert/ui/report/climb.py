"""`hilbert report` on a climb run: its progress plot, leaderboard and every try, from the climb's fold
(`hilbert.climb.state.ClimbState`) — the same fold `climb --status` and `results.tsv` read.

The plot: each measured try's median (kept ones filled, reverted ones hollow, coloured by the stage
that reverted them), the best as a step line from the base's median, and the band of the base's
noise × the margin an improvement must clear, over the climb's own y range (`Progress.low`/`high`:
a try far off it is drawn on the edge, its value beside it). Strings from the log are escaped
(`page`), or drawn by matplotlib as outlines.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hilbert.climb.results import COLUMNS, OTHER, STAGE_COLOURS, leaderboard, progress, rows
from hilbert.climb.state import ClimbState
from hilbert.ui.report.page import CSS, _e, _section, _table
from hilbert.ui.report.plots import _svg


def progress_svg(state: ClimbState) -> str | None:
    """The climb's progress (None before the base was measured): tries by number, the best stepping."""
    shown = progress(state)
    if shown is None:
        return None
    figure = Figure(figsize=(10.0, 3.6))
    axes = figure.add_subplot()
    axes.axhspan(shown.base - shown.band, shown.base + shown.band, color="#1565c0", alpha=0.12, linewidth=0)
    axes.plot([x for x, _ in shown.best], [y for _, y in shown.best], color="#1565c0", linewidth=1.5)
    for no, median, stage in shown.points:
        colour = STAGE_COLOURS.get(stage, OTHER)
        face = colour if stage == "kept" else "none"
        drawn = min(max(median, shown.low), shown.high)  # a try far off the climb: on the edge, labelled
        axes.plot([no], [drawn], marker="o", markersize=6, color=colour, markerfacecolor=face)
        if drawn != median:
            axes.annotate(f"{median:.3g}", (no, drawn), xytext=(6, -3), textcoords="offset points", size=7)
    handles = [Line2D([], [], color="#1565c0", label="best")]
    for stage in dict.fromkeys(stage for _, _, stage in shown.points):
        colour = STAGE_COLOURS.get(stage, OTHER)
        face = colour if stage == "kept" else "none"
        handles.append(
            Line2D([], [], color=colour, marker="o", linestyle="", markerfacecolor=face, label=stage)
        )
    axes.legend(handles=handles, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles))
    axes.set_xlabel("try", fontsize=8)
    axes.set_ylabel(shown.unit, fontsize=8)
    axes.set_xlim(0, shown.last)
    margin = (shown.high - shown.low) * 0.05
    axes.set_ylim(shown.low - margin, shown.high + margin)
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
