"""Headless Chromium for the report tests: Debian's /usr/bin/chromium driven by Playwright.

Never a browser download: Playwright starts the system Chromium (``make test`` installs it with
apt-get) with the flags that keep it off the network; a test fails when it is missing under CI
(SKILLTUNE_REQUIRE_CLIS) and is skipped elsewhere. ``marks`` counts what each plot drew.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("SKILLTUNE_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# Playwright's waits (launch, navigation, a condition): generous, as a loaded machine draws slowly;
# Playwright's own default is 30 s.
WAIT_MS = 180_000


def require_chromium() -> str:
    if shutil.which(CHROMIUM) is None:
        message = f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)"
        if os.environ.get("SKILLTUNE_REQUIRE_CLIS"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@contextmanager
def chromium() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=FLAGS, timeout=WAIT_MS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Watched:
    """A page with what it logged and asked for."""

    page: Page
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind in ("error", "warning", "trace")] + self.errors


def open_page(browser: Browser, url: str, plots: int) -> Watched:
    """Open ``url`` and wait (bounded) until ``plots`` plotly plots are drawn."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(WAIT_MS)  # every wait on this page, navigation included
    watched = Watched(page)
    page.on("console", lambda m: watched.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: watched.errors.append(str(e)))
    page.on("request", lambda r: watched.requests.append(r.url))
    page.goto(url)
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {plots}")
    return watched


MARKS_JS = """
() => {
  const out = {};
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const traces = [...plot.querySelectorAll('.scatterlayer .trace, .barlayer .trace')];
    const data = plot._fullData || [];
    out[plot.id] = {
      traces: traces.map(t => t.querySelectorAll('.point').length),
      names: data.map(d => d.name),
      yticks: plot.querySelectorAll('.ytick').length,
      heatmap: data.filter(d => d.type === 'heatmap').map(d => [d.z.length, d.z[0].length]),
      images: plot.querySelectorAll('.hm image').length,
    };
  }
  return out;
}
"""


def marks(page: Page) -> dict[str, Any]:
    """Per plot id: the points each drawn trace holds, the y ticks, the heatmap's shape."""
    result: dict[str, Any] = page.evaluate(MARKS_JS)
    return result
