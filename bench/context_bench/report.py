"""What the replay benchmark prints: the strategies' table, the calibration line, the default's figures."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hilbert.context.tokens import calibrate

from .measure import KINDS, OVER, PRICES, Figures, floor
from .run import FileResult


def _share(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def _tokens(value: float) -> str:
    return f"{value / 1000:,.1f}k"


def table(rows: Sequence[Figures]) -> list[str]:
    """The main table (Markdown), one row per strategy, then the retention of each fact kind."""
    prices = " | ".join(f"cost p={p}" for p in PRICES)
    over = " | ".join(f">{n // 1024}k" for n in OVER)
    lines = [
        f"| strategy | {prices} | recall | mean cumulative input | median peak | {over} | retention |",
        "|---" * (len(PRICES) + len(OVER) + 5) + "|",
    ]
    for f in rows:
        costs = " | ".join(_share(f.cost[p]) for p in PRICES)
        shares = " | ".join(_share(f.over[n]) for n in OVER)
        lines.append(
            f"| {f.strategy} | {costs} | {_share(f.recall)} | {_tokens(f.mean_cumulative_input)} "
            f"| {_tokens(f.median_peak)} | {shares} | {_share(f.retention)} |"
        )
    lines += [
        "",
        "| strategy | " + " | ".join(f"retention: {k}" for k in KINDS) + " | summarizing tokens |",
        "|---" * (len(KINDS) + 2) + "|",
    ]
    for f in rows:
        kinds = " | ".join(_share(f.retention_by_kind[k]) for k in KINDS)
        lines.append(f"| {f.strategy} | {kinds} | {f.summarizing_tokens:,} |")
    return lines


LENGTHS = ((1, 29), (30, 59), (60, 99), (100, None))  # model calls per trajectory
AIM_PRICE = 0.1


def by_length(results: Sequence[FileResult], name: str) -> list[str]:
    """A table (Markdown) by trajectory length: how many, the floor (`measure.floor`: the least any
    strategy that sends the task and each new message whole can pay) and strategy `name`'s cost, both
    relative to `none` at the aim's cache price, and its recall; last, the whole corpus."""
    p = AIM_PRICE
    lines = [
        f"| model calls | trajectories | floor p={p} | {name} p={p} | {name} recall |",
        "|---" * 5 + "|",
    ]
    groups = [(f"{lo}–{hi}" if hi else f"{lo}+", lo, hi) for lo, hi in LENGTHS]
    for label, lo, hi in [*groups, ("all", 1, None)]:
        chosen = [r for r in results if lo <= len(r.replays["none"].calls) <= (hi or math.inf)]
        if not chosen:
            continue
        none = sum(r.replays["none"].cost(p) for r in chosen)
        least = sum(floor(r.replays["none"], r.head_tokens, p) for r in chosen)
        cost = sum(r.replays[name].cost(p) for r in chosen)
        recalls = [x for r in chosen if (x := r.replays[name].recall) is not None]
        recall = sum(recalls) / len(recalls) if recalls else math.nan
        lines.append(
            f"| {label} | {len(chosen)} | {_share(least / none)} | {_share(cost / none)} | {_share(recall)} |"
        )
    return lines


def calibration(results: Sequence[FileResult], tokenizer: str) -> str:
    """One line: how the server's reported prompt tokens compare with our count, and the approximate
    tokenizer calibrated on the sampled (rendered context, reported prompt tokens) pairs."""
    reported = sum(r.reported_tokens for r in results)
    counted = sum(r.counted_tokens for r in results)
    samples = [r.sample for r in results if r.sample is not None]
    if not reported or not samples:
        return "calibration: no reported usage in these trajectories"
    fitted = calibrate(samples)
    chars = sum(len(text) for text, _ in samples)
    return (
        f"calibration: the server reported {reported:,} prompt tokens where {tokenizer} counts {counted:,} "
        f"(x{reported / counted:.3f}); fitted on {len(samples)} contexts ({chars / 1e6:.1f}M chars): "
        f"{fitted.name}"
    )


def figures_line(f: Figures, wall_s: float) -> str:
    """The default strategy's figures as key=value pairs (the last line)."""
    pairs = {
        "strategy": f.strategy,
        "trajectories": str(f.trajectories),
        "calls": str(f.calls),
        **{f"cost_p{p}": f"{f.cost[p]:.4f}" for p in PRICES},
        "recall": f"{f.recall:.4f}",
        "mean_cumulative_input": f"{f.mean_cumulative_input:.0f}",
        "median_peak": f"{f.median_peak:.0f}",
        **{f"over_{n // 1024}k": f"{f.over[n]:.4f}" for n in OVER},
        "retention": f"{f.retention:.4f}",
        **{f"retention_{k}": f"{f.retention_by_kind[k]:.4f}" for k in KINDS},
        "summarizing_tokens": str(f.summarizing_tokens),
        "wall_s": f"{wall_s:.1f}",
    }
    return " ".join(f"{key}={value}" for key, value in pairs.items())
