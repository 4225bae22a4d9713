"""What every view of a fleet run shows, as typed data: `RunLog` folds a run's events (with
`hilbert.fleet.state.apply`, the one fold) and notes when things happened; `RunLog.view()` turns that
into a `RunView` that `hilbert report`, `top` and `web` render, each in its own medium
(docs/design/views.md).

What must not live here: rendering (HTML, SVG, terminal widgets) and I/O but reading the log.
"""

from hilbert.views.run_view import (
    AgentSpend,
    Bar,
    Batch,
    Funnel,
    ReasonGroup,
    Retry,
    RunLog,
    RunView,
    SpendPoint,
    Summary,
)

__all__ = [
    "AgentSpend",
    "Bar",
    "Batch",
    "Funnel",
    "ReasonGroup",
    "Retry",
    "RunLog",
    "RunView",
    "SpendPoint",
    "Summary",
]
