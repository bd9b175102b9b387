"""Reading runs: report (report.html), view (a local read-only server) and status (one screen).

Each command imports what it runs when it runs (registering the commands loads none of it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from skilltune.cli.app import app, err, out

RunArg = Annotated[Path, typer.Argument(help="A run directory (runs/<tag>).")]


@app.command(epilog="Example: skilltune report runs/demo")
def report(
    run_dir: RunArg,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Where to write the page (default RUNDIR/report.html).")
    ] = None,
) -> None:
    """Write RUNDIR/report.html: one self-contained page (plots, edits, gate evidence, cost)."""
    from skilltune.report import write_report

    path = write_report(run_dir, out_file)
    size = path.stat().st_size / 1e6
    out.print(f"report: {path} ({size:.1f} MB; opens offline in any browser)")


@app.command(epilog="Example: skilltune view runs --port 8765   (then open http://127.0.0.1:8765/)")
def view(
    runs_dir: Annotated[Path, typer.Argument(help="The folder holding runs (or one run).")] = Path("runs"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 8765,
    host: Annotated[
        str, typer.Option(help="Address to listen on; the default keeps the server on this machine.")
    ] = "127.0.0.1",
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Also answer requests made to this name, e.g. the machine's name with --host 0.0.0.0 "
            "(repeatable). IP addresses, localhost and the --host name are always answered; any other "
            "Host gets 403, so that no other site can read your runs through DNS rebinding.",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every request.")] = False,
) -> None:
    """Serve the runs and their reports on a local, read-only web server until Ctrl-C.

    Reports are rendered in memory (nothing is written anywhere) and follow a run as it goes.
    """
    from skilltune.report.serve import is_loopback, open_view

    server = open_view(runs_dir, host, port, verbose, allow_host or ())
    if not is_loopback(host):
        err.print(f"warning: listening on {host}: anyone who can reach this address can read your runs")
    out.print(f"serving {runs_dir} at {server.url} (read-only; Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.print("stopped")
    finally:
        server.server_close()


@app.command(epilog="Example: skilltune status runs/demo   (--watch to follow a live run)")
def status(
    run_dir: RunArg,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="Refresh every few seconds until the run is no longer going."),
    ] = False,
    every: Annotated[float, typer.Option(min=0.5, help="Seconds between refreshes with --watch.")] = 2.0,
) -> None:
    """One screen for a live or finished run: state, step, ETA, best val, last verdicts, budget, infra errors."""
    from skilltune.report.read import summarize
    from skilltune.report.status import status_screen

    summary = summarize(run_dir, depth="rollouts")
    if not watch or not summary.live:
        out.print(status_screen(summary))
        return
    from rich.live import Live

    with Live(status_screen(summary), console=out, refresh_per_second=1) as live:
        while summary.live:
            time.sleep(every)
            summary = summarize(run_dir, depth="rollouts")
            live.update(status_screen(summary))
