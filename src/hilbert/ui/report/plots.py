"""The report's plots, drawn by matplotlib into inline SVG: the attempts' timeline, the run's cost and
tokens over time, and spend by agent.

matplotlib is used through `Figure` and its SVG canvas only — no pyplot (no global figure state, no
display, no GUI backend) — and this module is imported by `hilbert report` when it runs, never at the
CLI's start. Each function takes the typed view (`hilbert.views`) and returns one `<svg>` element as
text: no XML declaration or DOCTYPE, no metadata, text drawn as paths (no font needed to read it).
matplotlib writes every string it draws into the SVG escaped, or as glyph outlines.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

from matplotlib import dates
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hilbert.fleet.state import HARNESS
from hilbert.models.types import Usage
from hilbert.views.types import OUTCOMES, AgentSpend, Bar, Outcome, SpendPoint

COLOURS: dict[Outcome, str] = {
    "merged": "#2e7d32",
    "waiting": "#1565c0",
    "held": "#6a1b9a",
    "sent back": "#ef6c00",
    "not done": "#c62828",
    "stopped": "#6d4c41",
    "running": "#90a4ae",
    "lead": "#455a64",
}
VERDICT_MARKS = {"done": ("#1b5e20", "o"), "not_done": ("#b71c1c", "x"), "impossible": ("#000000", "s")}
JUDGING = "harness (judge, panel)"  # whose spend the harness's events carry
_WIDTH = 10.0  # inches (the SVG is scaled to the page by CSS)
_MAX_LABEL = 40
_MAX_POINTS = 2000


def timeline_svg(bars: tuple[Bar, ...]) -> str:
    """A Gantt-like chart: one row per agent (in order of its first bar), each attempt a bar coloured by
    its outcome, the stop gate's rounds marked on it."""
    agents = list(dict.fromkeys(bar.agent for bar in bars))
    row = {agent: n for n, agent in enumerate(agents)}
    figure = Figure(figsize=(_WIDTH, max(2.0, 0.32 * len(agents) + 1.2)))
    axes = figure.add_subplot()
    for bar in bars:
        start, end = _when(bar.start), _when(max(bar.end, bar.start))
        width = max(end - start, 1e-6)
        axes.barh(row[bar.agent], width, left=start, height=0.7, color=COLOURS[bar.outcome])
        if bar.task:
            axes.text(
                start, row[bar.agent], f" {_short(bar.task, 12)}", va="center", fontsize=6, color="white"
            )
        for time, verdict in bar.verdicts:
            colour, marker = VERDICT_MARKS.get(verdict, ("#000000", "."))
            axes.plot([_when(time)], [row[bar.agent]], marker=marker, color=colour, markersize=4)
    axes.set_yticks(range(len(agents)), [_short(a) for a in agents], fontsize=7)
    axes.invert_yaxis()
    _time_axis(axes)
    used = [o for o in OUTCOMES if any(bar.outcome == o for bar in bars)]
    axes.legend(
        handles=[Patch(color=COLOURS[o], label=o) for o in used],
        fontsize=7,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=max(1, len(used)),
        frameon=False,
    )
    return _svg(figure)


def spend_svg(points: tuple[SpendPoint, ...]) -> str:
    """The run's cost (left axis) and tokens by kind (right axis), cumulative, over time."""
    figure = Figure(figsize=(_WIDTH, 3.2))
    cost = figure.add_subplot()
    points = _thinned(points)
    times = [_when(p.time) for p in points]
    cost.step(times, [p.cost_usd for p in points], where="post", color="#c62828", label="cost (USD)")
    cost.set_ylabel("cost (USD)", fontsize=8)
    tokens = cost.twinx()
    series = (
        ("input (cache reads included)", "#1565c0", [p.tokens.input_tokens for p in points]),
        ("output", "#2e7d32", [p.tokens.output_tokens for p in points]),
        ("cache reads", "#9e9d24", [p.tokens.cache_read_tokens for p in points]),
        ("cache writes", "#6a1b9a", [p.tokens.cache_write_tokens for p in points]),
    )
    for label, colour, values in series:
        if any(values):
            tokens.step(times, values, where="post", color=colour, label=f"{label} tokens", linewidth=1)
    tokens.set_ylabel("tokens", fontsize=8)
    _time_axis(cost)
    handles = [*cost.get_legend_handles_labels()[0], *tokens.get_legend_handles_labels()[0]]
    cost.legend(handles=handles, fontsize=7, loc="upper left", frameon=False)
    return _svg(figure)


def agents_svg(agents: tuple[AgentSpend, ...]) -> str:
    """Spend by agent: cost, and tokens by kind stacked, one bar each."""
    names = [_short(JUDGING if a.agent == HARNESS else a.agent) for a in agents]
    figure = Figure(figsize=(_WIDTH, max(2.0, 0.28 * len(agents) + 1.0)))
    cost, tokens = figure.subplots(1, 2, sharey=True)
    rows = range(len(agents))
    cost.barh(rows, [a.cost_usd for a in agents], color="#c62828")
    cost.set_xlabel("cost (USD)", fontsize=8)
    cost.set_yticks(rows, names, fontsize=7)
    cost.invert_yaxis()
    left = [0] * len(agents)
    for label, colour, values in (  # input tokens hold the cached part (`hilbert.models.types`)
        ("input, uncached", "#1565c0", [_uncached(a.tokens) for a in agents]),
        ("input, cache reads", "#9e9d24", [a.tokens.cache_read_tokens for a in agents]),
        ("input, cache writes", "#6a1b9a", [a.tokens.cache_write_tokens for a in agents]),
        ("output", "#2e7d32", [a.tokens.output_tokens for a in agents]),
    ):
        tokens.barh(rows, values, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, values, strict=True)]
    tokens.set_xlabel("tokens", fontsize=8)
    tokens.legend(fontsize=7, frameon=False, loc="lower right")
    for axes in (cost, tokens):
        axes.tick_params(labelsize=7)
    return _svg(figure)


def _thinned(points: tuple[SpendPoint, ...]) -> tuple[SpendPoint, ...]:
    """At most about `_MAX_POINTS` of a long run's points, its last one kept: a page's width shows no
    more, and each would be a point of the SVG's paths."""
    step = len(points) // _MAX_POINTS + 1
    return points if step == 1 else (*points[::step], points[-1])


def _uncached(usage: Usage) -> int:
    return max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)


def _when(time: float) -> float:
    return float(dates.date2num(datetime.fromtimestamp(time, UTC)))


def _time_axis(axes: object) -> None:
    locator = dates.AutoDateLocator(tz=UTC)
    axes.xaxis.set_major_locator(locator)  # type: ignore[attr-defined]
    axes.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[attr-defined]
    axes.tick_params(labelsize=7)  # type: ignore[attr-defined]
    axes.set_xlabel("time (UTC)", fontsize=8)  # type: ignore[attr-defined]


def _short(text: str, limit: int = _MAX_LABEL) -> str:
    """A label as drawn: cut to `limit`, and a `$` drawn as itself (matplotlib reads `$...$` as math)."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _svg(figure: Figure) -> str:
    figure.set_layout_engine("constrained")
    buffer = io.StringIO()
    FigureCanvasSVG(figure).print_svg(
        buffer, metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
    )
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # no XML declaration or DOCTYPE inside HTML
