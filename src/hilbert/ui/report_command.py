"""`hilbert report [RUN] -o report.html`: one run as one self-contained HTML file (`hilbert.ui.report`).

The run is chosen as `hilbert status` chooses it (`hilbert.ui.run_select`); matplotlib, which draws its
plots, is imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilbert.errors import UserError
from hilbert.ui.run_select import open_run


@click.command()
@click.argument("run_arg", metavar="[RUN]", required=False)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default="report.html",
    show_default=True,
    help="The HTML file to write (replaced if it exists).",
)
@click.option("--run", "run_opt", help="Which run (default: the latest), as RUN.")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log file (default ~/.hilbert/hilbert.db).",
)
def report(run_arg: str | None, run_opt: str | None, out: Path, db: Path | None) -> None:
    """Write RUN's report (default: the latest run) as one HTML file to mail: summary, a timeline of
    every attempt, cost and tokens over time and by agent, the verdict funnel, send-back reasons and the
    merge queue's batches. No script, no external reference."""
    if run_arg and run_opt and run_arg != run_opt:
        raise UserError(f"two runs named: {run_arg} and --run {run_opt}", hint="name one")
    if not out.parent.is_dir():
        raise UserError(
            f"no folder {out.parent} to write {out.name} in", hint="create it, or pass another -o"
        )
    with open_run(db, run_arg or run_opt) as (store, run):
        from hilbert.ui.report import write_report  # matplotlib: only once there is a run to draw

        written = write_report(store, run, out)
    click.echo(f"report of run {run}: {written}")
