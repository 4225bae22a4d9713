"""What a climb shows a person, from its fold: `results.tsv` (every try, one row), the leaderboard
(`hilbert climb --status`, `hilbert status` on a climb run) and the progress plot's data (`progress`:
drawn by `hilbert report` with matplotlib and by `hilbert web`'s page in the browser)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from hilbert.climb.metric import MARGIN
from hilbert.climb.state import ClimbState, TryView

COLUMNS = ("try", "explorer", "idea", "median", "spread", "readings", "outcome", "stage", "why", "holdout")


def rows(state: ClimbState) -> list[tuple[str, ...]]:
    """One row per try, in try order (a try in flight: outcome `running`)."""
    out: list[tuple[str, ...]] = []
    for view in sorted(state.tries.values(), key=lambda t: t.no):
        out.append(
            (
                str(view.no),
                view.explorer,
                view.idea,
                "" if view.median is None else f"{view.median:.6g}",
                f"{view.spread:.3g}" if view.values else "",
                " ".join(f"{v:.6g}" for v in view.values),
                view.outcome or "running",
                view.stage,
                view.reason,
                ""
                if view.holdout is None
                else f"{view.holdout:.6g}" + (" (overfit)" if view.overfit else ""),
            )
        )
    return out


def results_tsv(state: ClimbState) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows(state))
    return buffer.getvalue()


def write_results(state: ClimbState, path: Path) -> None:
    """Rewrite `path` from the fold (atomically: a reader never sees half a file)."""
    partial = path.with_suffix(".tsv.partial")
    partial.write_text(results_tsv(state), encoding="utf-8")
    partial.replace(path)


STAGE_COLOURS = {  # the progress plot's colour of a try by what became of it (report and web page)
    "kept": "#2e7d32",
    "no_gain": "#90a4ae",
    "answer": "#c62828",
    "overfit": "#6a1b9a",
    "stale": "#ef6c00",
    "merge": "#ad1457",
    "measure": "#6d4c41",
}
OTHER = "#455a64"
REACH = 1.0  # a try's median further than this many times the climb's own span off it is drawn at the edge


@dataclass(frozen=True)
class Progress:
    """The climb's progress plot as data: every measured try's median by try number, coloured by what
    became of it (`kept`, the stage that reverted it, or `running`); the best as steps from the base's
    median; the band an improvement must clear (`MARGIN` x the noise either side of the base); the y
    range `low`..`high` to draw (`y_range`: a try far off the climb is drawn at its edge)."""

    base: float
    band: float
    last: int  # the x axis' end: one past the last try
    best: tuple[tuple[int, float], ...]  # (try, best) corners of the step line
    points: tuple[tuple[int, float, str], ...]  # (try, median, stage)
    unit: str  # what the y axis counts
    low: float  # the y range to draw
    high: float


def progress(state: ClimbState) -> Progress | None:
    """The progress plot's data; None before the base was measured."""
    base = state.baseline_median
    if base is None:
        return None
    tries = sorted(state.tries.values(), key=lambda t: t.no)
    last = max((t.no for t in tries), default=0) + 1
    steps, best = [(0, base)], base
    for view in tries:
        if view.outcome == "kept" and view.median is not None:
            steps += [(view.no, best), (view.no, view.median)]
            best = view.median
    steps.append((last, best))
    points = tuple(
        (view.no, view.median, "kept" if view.outcome == "kept" else view.stage or "running")
        for view in tries
        if view.median is not None
    )
    timed = state.started is not None and state.started.metric_kind == "time"
    unit = "CPU seconds (harness)" if timed else "metric"
    band = MARGIN * state.noise
    low, high = y_range(base, band, [y for _, y in steps], [median for _, median, _ in points])
    return Progress(base, band, last, tuple(steps), points, unit, low, high)


def y_range(base: float, band: float, best: list[float], medians: list[float]) -> tuple[float, float]:
    """The y range of the progress plot: the band and the best line, and every try's median within
    `REACH` x their span of them. One try far off (a detour 1000 x slower) would otherwise get the
    whole axis and flatten the climb into one line; it is drawn at the edge instead. Never empty (a
    climb whose every reading is 0 is drawn around 0)."""
    core = [base - band, base + band, *best]
    low, high = min(core), max(core)
    span = (high - low) or abs(base) * 0.1 or 1.0
    near = [m for m in medians if low - REACH * span <= m <= high + REACH * span]
    low, high = min([low, *near]), max([high, *near])
    if high - low < span:  # every value equal: a range around them
        low, high = low - span / 2, high + span / 2
    return low, high


def leaderboard(state: ClimbState, top: int = 10) -> list[str]:
    """The climb in lines: where it stands, then the best-scoring measured tries, then counts."""
    started = state.started
    if started is None:
        return []
    goal = "lower" if started.goal == "min" else "higher"
    reading = "CPU seconds timed by the harness" if started.metric_kind == "time" else "its printed number"
    base = "?" if state.baseline_median is None else f"{state.baseline_median:.6g}"
    best = "?" if state.best_median is None else f"{state.best_median:.6g}"
    where = "finished: " + state.finished.reason if state.finished else "climbing"
    lines = [
        f"climb {state.run} ({where}): `{started.metric}` ({reading}, {goal} is better)",
        f"  base {base} -> best {best} (noise {state.noise:.3g}) on {started.branch} at {state.best[:10]}",
    ]
    if state.holdout_base is not None or state.holdout_error:
        held = state.holdout_error or f"base {state.holdout_base:.6g} -> best {state.holdout_best:.6g}"
        lines.append(f"  holdout (sealed): {held}")
    for view in state.overfit:
        lines.append(
            f"  overfitting: try {view.no} ({view.idea}) improved the metric, not the holdout: not kept"
        )
    measured = [t for t in state.tries.values() if t.median is not None]
    sign = 1.0 if started.goal == "min" else -1.0
    measured.sort(key=lambda t: sign * (t.median or 0.0))
    for view in measured[:top]:
        lines.append(_line(view))
    stages: dict[str, int] = {}
    for view in state.done:
        key = "kept" if view.outcome == "kept" else view.stage
        stages[key] = stages.get(key, 0) + 1
    counts = ", ".join(f"{n} {stage}" for stage, n in sorted(stages.items()))
    lines.append(
        f"  {len(state.tries)} tries ({counts or 'none done'}; {len(state.in_flight)} running), "
        f"${state.spent_usd:.4f} spent"
    )
    return lines


def progress_line(view: TryView) -> str:
    """One ended try, as the climb prints it: `try 3 (Erdős, a dict): kept at 0.0015`."""
    median = "" if view.median is None else f" at {view.median:.6g}"
    who = f"{view.explorer}, {view.idea}" if view.idea else view.explorer
    if view.outcome == "kept":
        return f"try {view.no} ({who}): kept{median}"
    return f"try {view.no} ({who}): {view.stage}{median}: {view.reason}"


def _line(view: TryView) -> str:
    mark = "*" if view.outcome == "kept" else " "
    median = f"{view.median:.6g}" if view.median is not None else "-"
    # a measured try not kept says why: one reverted as stale (measured alone, it did not merge onto the
    # best that moved) can score above the best without being a tree anyone kept
    why = "" if view.outcome == "kept" else f" ({view.stage or 'running'})"
    line = f"  {mark} #{view.no:<3} {median:>10} ±{view.spread:.2g}  {view.explorer:<12} {view.idea[:60]}"
    return line + why


__all__ = [
    "COLUMNS",
    "Progress",
    "leaderboard",
    "progress",
    "progress_line",
    "results_tsv",
    "rows",
    "write_results",
]
