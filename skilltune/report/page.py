"""report.html: one self-contained page (styles, plotly.js and data inlined; nothing fetched).

Rendered with Jinja2 (autoescaped: every text from the run, the proposer's included, is escaped).
``render_page`` takes where plotly.js comes from: inlined (the file on disk, which must open
from an e-mail attachment) or a URL of the local ``view`` server (a live page reloads often).
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from skilltune import __version__
from skilltune.report.figures import all_figures, plotly_script
from skilltune.textfmt import duration, fmt, signed, usd

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup

    from skilltune.report.model import RunSummary


@cache
def _env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("skilltune.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = fmt
    env.filters["signed"] = signed
    env.filters["duration"] = duration
    env.filters["diffclass"] = _diff_class
    env.filters["num"] = lambda v: f"{v:,}"
    env.filters["usd"] = usd
    env.filters["code"] = code_spans
    return env


def code_spans(text: str) -> Markup:
    """``text`` escaped, each `backticked` span (a command, a flag, in the run's files and the
    warnings as in the terminal) as <code>; text with an odd count of backticks is only escaped."""
    from markupsafe import Markup, escape

    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return escape(text)
    return Markup("").join(
        escape(p) if i % 2 == 0 else Markup("<code>%s</code>") % p for i, p in enumerate(parts)
    )


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "dh"
    if line.startswith("@@"):
        return "dc"
    if line.startswith("+"):
        return "da"
    if line.startswith("-"):
        return "dd"
    return ""


def render_page(
    summary: RunSummary,
    *,
    plotly_src: str | None = None,
    live_url: str | None = None,
    live_token: str = "",
    home_url: str | None = None,
) -> str:
    """The report of ``summary``. ``plotly_src``: a URL to load plotly.js from (None: inline it);
    ``live_url``: a URL answering the run's fingerprint and live counts (``serve.live``), polled to
    reload the page when the fingerprint differs from ``live_token`` (the one the page was rendered
    from) and to update the counts in place between two changes; ``home_url``: a link back to the list of runs."""
    figures = all_figures(summary)
    template = _env().get_template("report.html.j2")
    return template.render(
        s=summary,
        fig=figures,
        plotly_inline=None if plotly_src else plotly_script(),
        plotly_src=plotly_src,
        live_url=live_url,
        live_token=live_token,
        home_url=home_url,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__,
    )


def render_index(summaries: list[RunSummary], runs_dir: str, problems: list[str], live_token: str) -> str:
    """The view server's list of runs (it reloads when ``/_live`` says the runs' fingerprint differs
    from ``live_token``, and between two changes takes the live runs' counts from it)."""
    return (
        _env()
        .get_template("index.html.j2")
        .render(
            runs=summaries,
            runs_dir=runs_dir,
            problems=problems,
            version=__version__,
            live_url="/_live",
            live_token=live_token,
        )
    )
