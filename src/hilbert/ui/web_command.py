"""`hilbert web [RUN]`: the local dashboard of a run (`hilbert.ui.web`), chosen as `hilbert status`
chooses it (`hilbert.ui.run_select`). The server's modules are imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilbert.ui.run_select import open_run


@click.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port to listen on (default: any free one)."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log file (default ~/.hilbert/hilbert.db).",
)
def web(run_id: str | None, port: int, host: str, db: Path | None) -> None:
    """A live dashboard of RUN (the latest unless named) in your browser: the fleet, the plan as a
    graph, each agent's transcript, cost and tokens over time, the verdict funnel, the merge queue and
    the budgets; send, stop and approve from the page. Prints one URL with a fresh token; only this
    machine, with that token, is let in. Ctrl-C stops it."""
    from hilbert.settings import Settings
    from hilbert.ui.web import serve

    with open_run(db, run_id) as (store, run):
        serve(store, run, host, port, click.echo, Settings.load({"db": db}))
