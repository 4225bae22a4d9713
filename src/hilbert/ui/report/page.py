"""`hilbert report`'s page: a `RunView` (`hilbert.views`) as one self-contained HTML document — inline
CSS, the plots as inline SVG (`plots`), no script, no external reference — that a person can mail.

Sections, each a `<section id=...>`: summary, timeline, spend, funnel, reasons, merge-queue. Every
string from the log (goals, task ids, agents' names, reasons, test output) is untrusted: it passes
through `html.escape` here, and into the plots only as text matplotlib escapes or draws as outlines.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from hilbert.fleet.state import HARNESS
from hilbert.models.types import Usage
from hilbert.ui.report.plots import JUDGING
from hilbert.views.types import Batch, RunView

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 2em auto;
       max-width: 72em; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; } th, td { border: 1px solid #ddd;
        padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.plot svg { width: 100%; height: auto; } .muted { color: #777; }
.funnel { display: inline-block; height: 0.9em; background: #1565c0; }
pre { white-space: pre-wrap; margin: 0; font-size: 0.9em; max-height: 12em; overflow: auto; }
"""
_OUTPUT = 600  # characters of a command's output shown in a cell


def render(view: RunView, plots: dict[str, str]) -> str:
    """The page. `plots` holds the SVG of each plot by name (timeline, spend, agents); a missing one is
    said in words."""
    s = view.summary
    title = f"hilbert run {s.run}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(s.goal or '(no goal recorded)')}</p>",
        _summary(view),
        _timeline(view, plots.get("timeline")),
        _spend(view, plots.get("spend"), plots.get("agents")),
        _funnel(view),
        _reasons(view),
        _merge_queue(view.batches),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _summary(view: RunView) -> str:
    s = view.summary
    cost = _usd(s.cost_usd) + (" and more: a model it used has no known price" if s.unpriced else "")
    statuses = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in s.statuses)
    needs_you = "; ".join(f"{task}: {why}" for task, why in s.needs_you) or "nothing"
    rows = [
        ("outcome", s.outcome),
        ("tasks", f"{s.tasks} ({statuses})" if statuses else str(s.tasks)),
        ("merged", f"{len(s.merged)} of {s.tasks}" + (f": {', '.join(s.merged)}" if s.merged else "")),
        ("needs you", needs_you),
        ("cost", cost),
        ("tokens", _tokens(s.tokens)),
        ("duration", _duration(s.duration_s)),
        ("started", _utc(s.started_at)),
        ("ended", _utc(s.ended_at)),
        ("workers", str(s.workers)),
        *(("budget", line) for line in s.budgets),
    ]
    return _section("summary", "Summary", _table(("", ""), rows, show_header=False))


def _timeline(view: RunView, svg: str | None) -> str:
    rows = [
        (
            bar.agent,
            bar.task or "(lead session)",
            bar.outcome + (" (open)" if bar.open else ""),
            _utc(bar.start),
            _duration(bar.end - bar.start),
            " ".join(verdict for _, verdict in bar.verdicts),
            bar.detail,
        )
        for bar in view.bars
    ]
    body = _plot(svg, "no attempt started") + _table(
        ("agent", "task", "outcome", "started", "took", "gate rounds", "detail"), rows
    )
    return _section("timeline", "Timeline of attempts", body)


def _spend(view: RunView, spend: str | None, agents: str | None) -> str:
    rows = [
        (
            JUDGING if a.agent == HARNESS else a.agent,
            _usd(a.cost_usd) + (" +?" if a.unpriced else ""),
            str(a.turns),
            f"{a.tokens.input_tokens:,}",
            f"{a.tokens.output_tokens:,}",
            f"{a.tokens.cache_read_tokens:,}",
            f"{a.tokens.cache_write_tokens:,}",
        )
        for a in view.agents
    ]
    header = (
        "agent",
        "cost",
        "turns",
        "input tokens",
        "output tokens",
        "of input: cache reads",
        "cache writes",
    )
    body = (
        "<h3>Over time</h3>"
        + _plot(spend, "nothing was spent")
        + "<h3>By agent</h3>"
        + _plot(agents, "no agent spent anything")
        + _table(header, rows, numeric=range(1, 7))
    )
    return _section("spend", "Cost and tokens", body)


def _funnel(view: RunView) -> str:
    f = view.funnel
    top = max(f.claimed, f.merged, 1)
    stages = (
        ("claimed", f.claimed, f"gate rounds; {f.without_claim} stopped without calling finish"),
        ("sent back", f.sent_back, f"{f.by_panel} by the review panel, {f.impossible} judged impossible"),
        ("done", f.done, "accepted by the stop gate"),
        ("merged", f.merged, f"tasks landed; the merge queue sent back {f.conflicts} conflicts, "
         f"{f.rejected} red checks"),
    )  # fmt: skip
    rows = "".join(
        f'<tr><td>{_e(stage)}</td><td class="n">{n}</td>'
        f'<td><span class="funnel" style="width:{round(12 * n / top, 2)}em"></span></td>'
        f"<td>{_e(note)}</td></tr>"
        for stage, n, note in stages
    )
    table = f"<table><tr><th>stage</th><th>count</th><th></th><th></th></tr>{rows}</table>"
    return _section("funnel", "Verdict funnel", table)


def _reasons(view: RunView) -> str:
    groups = [(g.source, g.reason, str(g.count), ", ".join(g.tasks), g.example) for g in view.reasons]
    retries = [(_utc(r.time), r.task, r.kind, r.decision, r.why) for r in view.retries]
    note = (
        '<p class="muted">A stop-gate round counts under each check that failed in it; the judge model is '
        "a reason of its own only when every check passed.</p>"
    )
    body = (
        note + _table(("where", "reason", "count", "tasks", "example"), groups, numeric=(2,), pre=(4,))
        if groups
        else '<p class="muted">nothing was sent back</p>'
    )
    if retries:
        body += "<h3>What happened next</h3>" + _table(
            ("when", "task", "next", "decision", "why"), retries, pre=(4,)
        )
    return _section("reasons", "Send-back reasons", body)


def _merge_queue(batches: Sequence[Batch]) -> str:
    if not batches:
        return _section("merge-queue", "Merge queue", '<p class="muted">no batch reached the merge queue</p>')
    rows = []
    for b in batches:
        failed = [
            f"{c.command} (exit {c.exit}{', timed out' if c.timed_out else ''})" for c in b.checks_failed
        ]
        rows.append(
            (
                str(b.number),
                _utc(b.time),
                ", ".join(b.tasks),
                str(b.checks_passed),
                "; ".join(failed),
                "; ".join(f"{', '.join(x.suspects)} → testing {', '.join(x.testing)}" for x in b.bisections),
                "; ".join(f"{c.task}: {', '.join(c.files)}" for c in b.conflicts),
                "; ".join(
                    f"{r.task}: {r.command} exit {r.exit}"
                    + (f" (only with {', '.join(r.with_tasks)})" if r.with_tasks else "")
                    + f"\n{r.output[-_OUTPUT:]}"
                    for r in b.rejected
                ),
                ", ".join(b.merged),
                ", ".join(b.requeued) + (f" (flaky: {b.flaky})" if b.flaky else ""),
            )
        )
    header = ("batch", "started", "tasks", "checks passed", "checks failed", "bisections", "conflicts",
              "rejected", "merged", "requeued")  # fmt: skip
    return _section("merge-queue", "Merge queue", _table(header, rows, numeric=(0, 3), pre=(7,)))


# -- small pieces ---------------------------------------------------------------------------------


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _section(id_: str, title: str, body: str) -> str:
    return f'<section id="{id_}"><h2>{_e(title)}</h2>\n{body}\n</section>'


def _plot(svg: str | None, empty: str) -> str:
    return f'<div class="plot">{svg}</div>' if svg else f'<p class="muted">{_e(empty)}</p>'


def _table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    show_header: bool = True,
    numeric: Iterable[int] = (),
    pre: Iterable[int] = (),
) -> str:
    """A table of escaped text; `numeric` columns right-aligned, `pre` columns kept as lines."""
    numbers, lines = frozenset(numeric), frozenset(pre)
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if show_header else ""
    body = "".join(
        "<tr>" + "".join(_cell(text, n, numbers, lines) for n, text in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table>{head}{body}</table>"


def _cell(text: str, column: int, numeric: frozenset[int], pre: frozenset[int]) -> str:
    if column in pre and "\n" in text:
        return f"<td><pre>{_e(text)}</pre></td>"
    return f'<td class="n">{_e(text)}</td>' if column in numeric else f"<td>{_e(text)}</td>"


def _usd(amount: float) -> str:
    return f"${amount:.4f}"


def _tokens(usage: Usage) -> str:
    """Input tokens hold the cached part (`hilbert.models.types`): it is said apart, not added."""
    return (
        f"{usage.input_tokens:,} input ({usage.cache_read_tokens:,} of them cache reads, "
        f"{usage.cache_write_tokens:,} cache writes), {usage.output_tokens:,} output"
    )


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _utc(time: float) -> str:
    return datetime.fromtimestamp(time, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if time else "-"
