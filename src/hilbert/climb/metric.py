"""Reading a metric and judging a change in it: pure functions, no I/O.

A metric command prints one number: its output's **last non-empty line, parsed as one decimal number**
(`12.5`, `1e-3`, `-4`); anything else there is a failed measurement (`MetricError`), never a score.
The noise is the spread of the best's repeated measurements: the median absolute deviation × 1.4826
(the standard deviation of normal noise), floored at 0.5 % of the median so that a few identical
readings never make the noise zero. A try counts as better only when its median beats the best's by
more than `MARGIN` × noise — the best's noise, or either side's spread when wider — and when none
of its readings overlaps the best's, read beside them (`clearly_better`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

Goal = Literal["min", "max"]
MAD_TO_SIGMA = 1.4826
NOISE_FLOOR = 0.005  # of the median
MARGIN = 2.0  # an improvement counts beyond this many noises


class MetricError(ValueError):
    """The metric's output holds no number where one must be."""


def read_metric(output: str) -> float:
    """The number on the last non-empty line of `output`."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        raise MetricError("the metric printed nothing; it must print one number on its last line")
    last = lines[-1]
    try:
        value = float(last)
    except ValueError:
        shown = last if len(last) <= 60 else last[:59] + "…"
        raise MetricError(f"the metric's last line is not a number: {shown!r}") from None
    if not math.isfinite(value):
        raise MetricError(f"the metric's last line is not a finite number: {last!r}")
    return value


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """Median absolute deviation × 1.4826 (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    middle = median(values)
    return MAD_TO_SIGMA * median([abs(v - middle) for v in values])


def noise(values: Sequence[float]) -> float:
    """The noise of a series of measurements of one commit: its spread, at least 0.5 % of its median."""
    return max(spread(values), NOISE_FLOOR * abs(median(values)))


def better(goal: Goal, candidate: float, best: float, noise_level: float) -> bool:
    """Whether `candidate` beats `best` by more than `MARGIN` × `noise_level` in the goal's direction."""
    gain = best - candidate if goal == "min" else candidate - best
    return gain > MARGIN * noise_level


def clearly_better(goal: Goal, tried: Sequence[float], beside: Sequence[float], noise_level: float) -> bool:
    """Readings of a try against readings of the best taken beside them: its median `better` beyond
    the noise, and every one of its readings better than every one of the best's (a few readings
    make a poor estimate of the noise; readings that overlap are not a gain whatever it says)."""
    if not tried or not beside:
        return False
    separated = max(tried) < min(beside) if goal == "min" else min(tried) > max(beside)
    return separated and better(goal, median(tried), median(beside), noise_level)


__all__ = [
    "MARGIN",
    "Goal",
    "MetricError",
    "better",
    "clearly_better",
    "median",
    "noise",
    "read_metric",
    "spread",
]
