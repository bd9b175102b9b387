"""``skilltune view``: a local, read-only web server over a folder of runs.

Built on the standard library's ``http.server`` (ThreadingHTTPServer): a handful of GET
routes need no framework, and no dependency means nothing to pin or to audit for a server
that listens on the user's machine. Every report is rendered in memory (cached until the
run's fingerprint changes); nothing is ever written, in a run directory or elsewhere. Only
GET and HEAD are answered; every other method gets 405. The page of a live run polls ``_live``:
it reloads itself when the run's fingerprint changes (a stage or unit ended), and in between
shows the rollouts, tokens and USD of the records on disk (as ``status`` counts them).

Routes: ``/`` (the runs), ``/_fingerprint`` and ``/_live`` (of the list), ``/runs/TAG/`` (a
report), ``/runs/TAG/_fingerprint``, ``/runs/TAG/_live``, ``/runs/TAG/PATH`` (a file of the run,
for the report's links), ``/_static/plotly-VERSION.min.js``.

Before any route, whatever the method, the Host header is checked (``host_allowed``): a page on
another site can point a name of its own at 127.0.0.1 (DNS rebinding) and read the runs from the
user's browser, under its own name. So only an IP literal (rebinding needs a name), ``localhost``
and ``*.localhost``, the name the server was bound to and the names ``--allow-host`` admits are
answered; any other Host, or none on HTTP/1.1, gets 403 (Vite's dev server and Jupyter do the same).
"""

from __future__ import annotations

import ipaddress
import json
import mimetypes
import threading
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from skilltune.errors import SkilltuneError, UsageError
from skilltune.report.heldout import HELDOUT_SUFFIX
from skilltune.report.model import RunSummary
from skilltune.report.read import is_run, process_alive, summarize
from skilltune.textfmt import usd

_WATCHED = ("journal.jsonl", "TERMINAL", "comparison.json", "results.tsv", "audit.json")


def fingerprint(run: Path) -> str:
    """Changes whenever the run moves on: its logs and end files, and whether its process lives."""
    parts = []
    # the comparison the report suggests making beside the run (RUNDIR-heldout/) shows in it too
    beside = run.parent / f"{run.name}{HELDOUT_SUFFIX}" / "comparison.json"
    for path in [*(run / name for name in _WATCHED), beside]:
        try:
            st = path.stat()
            parts.append(f"{st.st_size}.{st.st_mtime_ns}")
        except FileNotFoundError:
            parts.append("-")
    lock = run.parent / f".{run.name}.lock"
    try:
        pid = int(lock.read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        pid = 0
    parts.append("live" if pid and process_alive(pid) else "idle")
    return ":".join(parts)


def live_counts(run: Path, prefix: str = "live-", suffix: str = "") -> dict[str, str]:
    """What a live run has spent so far, as the page shows it (element id -> text): read from the
    records on disk, which grow between two changes of the fingerprint (a light read: the unit
    records, and the records of the folders that may still grow)."""
    totals = summarize(run, depth="light").totals
    return {
        f"{prefix}rollouts{suffix}": f"{totals.rollouts:,}",
        f"{prefix}tokens{suffix}": f"{totals.tokens:,}",
        f"{prefix}usd{suffix}": usd(totals.usd),
    }


def live(token: str, text: dict[str, str]) -> bytes:
    """The answer of a ``_live`` route: the fingerprint, and the text to put in each element."""
    return json.dumps({"token": token, "text": text}).encode()


class RunsView:
    """The runs under a folder (or one run), their summaries and reports, cached by fingerprint."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[str, str]] = {}
        self._summaries: dict[str, tuple[str, RunSummary]] = {}

    def runs(self) -> dict[str, Path]:
        if is_run(self.root):
            return {self.root.name: self.root}
        if not self.root.is_dir():
            return {}
        return {p.name: p for p in sorted(self.root.iterdir()) if p.is_dir() and is_run(p)}

    def list_fingerprint(self) -> str:
        return "|".join(f"{tag}={fingerprint(path)}" for tag, path in self.runs().items())

    def list_live(self) -> bytes:
        """The list's fingerprint, and each live run's rollouts and USD (ids ``rollouts-TAG``, ``usd-TAG``)."""
        runs = self.runs()
        marks = {tag: fingerprint(path) for tag, path in runs.items()}
        text: dict[str, str] = {}
        for tag, mark in marks.items():
            if mark.endswith(":live"):
                try:
                    text |= live_counts(runs[tag], prefix="", suffix=f"-{tag}")
                except SkilltuneError:  # the list says what is wrong with it when it reloads
                    continue
        return live("|".join(f"{tag}={mark}" for tag, mark in marks.items()), text)

    def run_live(self, tag: str) -> bytes:
        """The run's fingerprint, and (while it runs) its rollouts, tokens and USD."""
        path = self.runs()[tag]
        mark = fingerprint(path)
        return live(mark, live_counts(path) if mark.endswith(":live") else {})

    def summaries(self) -> tuple[list[RunSummary], list[str]]:
        found, problems = [], []
        for tag, path in self.runs().items():
            mark = fingerprint(path)
            with self._lock:
                cached = self._summaries.get(tag)
            if cached is None or cached[0] != mark:
                try:
                    cached = (mark, summarize(path, depth="light"))
                except SkilltuneError as exc:
                    problems.append(f"{tag}: {exc}")
                    continue
                with self._lock:
                    self._summaries[tag] = cached
            found.append(cached[1])
        found.sort(key=lambda s: s.updated or "", reverse=True)
        return found, problems

    def report(self, tag: str, plotly_src: str) -> str:
        from skilltune.report.page import render_page

        path = self.runs()[tag]
        mark = fingerprint(path)
        with self._lock:
            cached = self._reports.get(tag)
            if cached is not None and cached[0] == mark:
                return cached[1]
        for attempt in range(3):
            try:
                summary = summarize(path)
                break
            except FileNotFoundError:  # a live run swapped a folder in while it was read: read again
                if attempt == 2:
                    raise
        html = render_page(
            summary,
            plotly_src=plotly_src,
            live_url=f"/runs/{quote(tag)}/_live",
            live_token=mark,
            home_url="/",
        )
        with self._lock:
            self._reports[tag] = (mark, html)
        return html


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "skilltune-view"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse(self) -> None:
        if self._refuse_host(head=False):
            return
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # read-only: no write endpoint

    def _refuse_host(self, head: bool) -> bool:
        """Answer 403 (and say how to get in) when the Host header is not one this server answers to."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) == 1 and host_allowed(hosts[0], self.server.allowed_hosts):
            return False
        if not hosts and self.request_version == "HTTP/1.0":  # no Host before HTTP/1.1; browsers send one
            return False
        asked = f"was made to {host_name(hosts[0])[:80]!r}" if len(hosts) == 1 else "names no single Host"
        fix = (
            f"refused: this server answers to its own address and localhost; this request {asked}.\n"
            f"Open {self.server.url} (the address skilltune view printed), or start skilltune view "
            "with --allow-host NAME to reach it by that name.\n"
        )
        self._send(HTTPStatus.FORBIDDEN, "text/plain", fix.encode(), False, head)
        return True

    def _answer(self, head: bool) -> None:
        if self._refuse_host(head):
            return
        try:
            status, ctype, body, cache = self._route(unquote(urlsplit(self.path).path))
        except SkilltuneError as exc:
            status, ctype, body, cache = (
                HTTPStatus.UNPROCESSABLE_ENTITY,
                "text/plain",
                str(exc).encode(),
                False,
            )
        except OSError as exc:  # a file vanished under a live run, or cannot be read: say so, keep serving
            message = f"could not read the run: {exc}; reload the page"
            status, ctype, body, cache = HTTPStatus.SERVICE_UNAVAILABLE, "text/plain", message.encode(), False
        self._send(status, ctype, body, cache, head)

    def _send(self, status: int, ctype: str, body: bytes, cache: bool, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8" if ctype.startswith("text") else ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "public, max-age=31536000, immutable" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, path: str) -> tuple[int, str, bytes, bool]:
        view = self.server.view
        if path == "/":
            from skilltune.report.page import render_index

            summaries, problems = view.summaries()
            html = render_index(summaries, str(view.root), problems, view.list_fingerprint())
            return HTTPStatus.OK, "text/html", html.encode(), False
        if path == "/_fingerprint":
            return HTTPStatus.OK, "text/plain", view.list_fingerprint().encode(), False
        if path == "/_live":
            return HTTPStatus.OK, "application/json", view.list_live(), False
        if path == self.server.plotly_path:
            return HTTPStatus.OK, "text/javascript", self.server.plotly_js(), True
        parts = path.split("/", 3)  # "", "runs", TAG, REST
        if len(parts) >= 3 and parts[1] == "runs":
            runs = view.runs()
            tag = parts[2]
            if tag not in runs:
                return _not_found(f"no run {tag!r} under {view.root}")
            rest = parts[3] if len(parts) == 4 else None
            if rest is None:
                return HTTPStatus.MOVED_PERMANENTLY, "text/plain", b"", False
            if rest == "":
                return HTTPStatus.OK, "text/html", view.report(tag, self.server.plotly_path).encode(), False
            if rest == "_fingerprint":
                return HTTPStatus.OK, "text/plain", fingerprint(runs[tag]).encode(), False
            if rest == "_live":
                return HTTPStatus.OK, "application/json", view.run_live(tag), False
            return _run_file(runs[tag], rest)
        return _not_found(f"nothing at {path}")

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        if code == HTTPStatus.MOVED_PERMANENTLY:
            self.send_header("Location", urlsplit(self.path).path + "/")


def _not_found(message: str) -> tuple[int, str, bytes, bool]:
    return HTTPStatus.NOT_FOUND, "text/plain", message.encode(), False


def _run_file(run: Path, rest: str) -> tuple[int, str, bytes, bool]:
    """A regular file inside the run directory (never outside it, symlinks resolved)."""
    root = run.resolve()
    target = (root / rest).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return _not_found(f"no file {rest} in this run")
    ctype = mimetypes.guess_type(target.name)[0] or "text/plain"
    if target.suffix in (".jsonl", ".patch", ".md", ".tsv") or target.name == "TERMINAL":
        ctype = "text/plain"
    return HTTPStatus.OK, ctype, target.read_bytes(), False


class ViewServer(ThreadingHTTPServer):
    """The ``view`` server: ``serve_forever()`` until ``shutdown()`` (or Ctrl-C at the CLI)."""

    daemon_threads = True

    def __init__(
        self,
        runs_dir: Path,
        host: str = "127.0.0.1",
        port: int = 8765,
        verbose: bool = False,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        from skilltune.report.figures import plotly_version

        self.view = RunsView(runs_dir)
        self.verbose = verbose
        self.allowed_hosts = frozenset(host_name(name) for name in (host, *allow_hosts))
        self.plotly_path = f"/_static/plotly-{plotly_version()}.min.js"
        self._plotly: bytes | None = None
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port"
            ) from None

    def plotly_js(self) -> bytes:
        if self._plotly is None:
            from skilltune.report.figures import plotly_script

            self._plotly = plotly_script().encode()
        return self._plotly

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}/"


def host_name(header: str) -> str:
    """The name a Host header gives: port dropped, an IPv6 literal out of its brackets, lower case,
    no trailing dot."""
    value = header.strip().lower()
    if value.startswith("["):
        value = value[1:].partition("]")[0]
    else:
        name, colon, port = value.rpartition(":")
        value = name if colon and name and ":" not in name and (port.isdigit() or not port) else value
    return value.rstrip(".")


def host_allowed(header: str, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether the server answers a request naming ``header`` as its Host: an IP literal, ``localhost``
    or a name under it, or one of the ``allowed`` names (each as ``host_name`` gives it)."""
    name = host_name(header)
    if not name:
        return False
    if name in allowed or name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def open_view(
    runs_dir: Path | str,
    host: str = "127.0.0.1",
    port: int = 8765,
    verbose: bool = False,
    allow_hosts: Iterable[str] = (),
) -> ViewServer:
    """A view server bound to ``host:port`` (port 0: any free port); call ``serve_forever()``.

    It answers requests whose Host is an IP address, localhost, ``host`` or one of ``allow_hosts``."""
    root = Path(runs_dir)
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder; pass the folder holding your runs (default runs/)")
    allow_hosts = list(allow_hosts)
    for name in allow_hosts:
        if not host_name(name) or any(c in name for c in "/ @*"):
            raise UsageError(
                f"--allow-host {name!r}: pass a host name such as box.lan (no scheme, path or *)"
            )
    return ViewServer(root, host, port, verbose, allow_hosts)
