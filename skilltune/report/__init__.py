"""Reading a run: ``report`` (report.html), ``view`` (a local read-only server) and ``status``.

One reading layer (``read.summarize``) turns a run directory into a ``RunSummary``; the page
(``page``), the server (``serve``) and the terminal screen (``status``) only render it. Nothing
here writes into a run directory but ``write_report``, and only RUNDIR/report.html.
"""

from __future__ import annotations

from pathlib import Path

from skilltune.report.model import RunSummary
from skilltune.report.read import summarize

REPORT_FILE = "report.html"

__all__ = ["REPORT_FILE", "RunSummary", "render_report", "summarize", "write_report"]


def render_report(run_dir: Path | str) -> str:
    """The report of the run at ``run_dir`` as one self-contained HTML page."""
    from skilltune.report.page import render_page

    return render_page(summarize(run_dir))


def write_report(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write the report to ``out`` (default RUNDIR/report.html), atomically; return its path."""
    from skilltune.store import write_text

    path = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    write_text(path, render_report(run_dir))
    return path
