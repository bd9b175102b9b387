"""`skilltune view`: a read-only server on loopback that lists runs, serves their reports rendered in
memory, and follows a run as it goes (the page reloads itself)."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import urlopen

import pytest

from skilltune.report import summarize
from skilltune.runfiles import Comparison
from tests.chromium import chromium, open_page
from tests.helpers import REPO
from tests.report_runs import make_live, results_rows, train_demo, train_stopped, tree_digest
from tests.test_report_browser import check_page, screenshot_path

DEADLINE = 180.0  # seconds: generous, a clear failure when exceeded


@contextmanager
def view_server(runs_dir: Path, *extra: str) -> Iterator[str]:
    """`skilltune view RUNS --port 0` in its own process; yields its URL, stops it (by its pid) after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "skilltune.cli", "view", str(runs_dir), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=60):
            pytest.fail("skilltune view printed no URL within 60 s")
        line = proc.stdout.readline()
        assert " at http://" in line, (
            line,
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "",
        )
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def request(url: str, method: str = "GET", path: str | None = None) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.request(method, path if path is not None else parts.path or "/")
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs_dir = tmp_path_factory.mktemp("runs")
    train_demo(runs_dir)
    return runs_dir


def test_view_lists_runs_on_loopback(runs: Path) -> None:
    with view_server(runs) as url:
        assert urlsplit(url).hostname == "127.0.0.1"
        page = urlopen(url, timeout=60).read().decode()
    rows = results_rows(runs / "demo")
    kept = [r for r in rows if r["verdict"] == "keep"]
    pair = Comparison.read(runs / "demo" / "comparison.json").pairs[0]
    assert 'data-tag="demo"' in page and ">success<" in page
    steps = sum(1 for r in rows if r["phase"] == "step")
    assert f"{steps} / 8" in page  # steps done / planned
    assert f"{float(kept[-1]['val_candidate']):.3f}" in page  # best val
    assert pair.ci95 is not None
    assert f"{pair.diff:+.3f} [{pair.ci95[0]:+.3f}, {pair.ci95[1]:+.3f}]" in page  # held-out gain
    assert "$0.00" in page  # cost (the mock agent is free)


def test_view_is_read_only(runs: Path) -> None:
    before = tree_digest(runs)
    with view_server(runs) as url:
        conversation = next((runs / "demo").rglob("conversation.json")).relative_to(runs / "demo").as_posix()
        for path in (
            "/",
            "/_fingerprint",
            "/runs/demo/",
            "/runs/demo/_fingerprint",
            f"/runs/demo/{conversation}",
        ):
            status, _, body = request(url, path=path)
            assert status == 200 and body, path
        status, headers, _ = request(url, path="/runs/demo")
        assert status == 301 and headers["Location"] == "/runs/demo/"
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            for path in ("/", "/runs/demo/", "/runs/demo/config.json", "/runs/demo/new.txt"):
                status, headers, _ = request(url, method, path)
                assert status == 405 and headers["Allow"] == "GET, HEAD", (method, path)
        for path in (
            "/runs/demo/../../etc/passwd",
            "/runs/demo/%2e%2e/%2e%2e/etc/passwd",
            "/runs/nope/",
            "/x",
        ):
            assert request(url, path=path)[0] == 404, path
    assert tree_digest(runs) == before  # not a byte written, in the runs or beside them
    assert not (runs / "demo" / "report.html").exists()


def test_view_in_chromium_and_its_screenshot(runs: Path, tmp_path: Path) -> None:
    with view_server(runs) as url, chromium() as browser:
        origin = url.rstrip("/")
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.goto(url)
        page.wait_for_selector("tr.run")
        page.screenshot(path=screenshot_path("view.png", tmp_path))
        page.click("tr.run a")
        page.wait_for_url(f"{origin}/runs/demo/")
        assert console == []
        watched = open_page(browser, f"{origin}/runs/demo/", plots=4)
        check_page(watched, runs / "demo", origin=origin)
        assert any(u.endswith(".min.js") for u in watched.requests)  # plotly.js from the server itself


def _text(page: object, selector: str) -> str:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    return page.inner_text(selector).strip()


def test_view_follows_a_run_as_it_goes(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    run = train_stopped(runs_dir, "live")  # stopped after the seed's baseline: no unit yet
    with view_server(runs_dir) as url, chromium() as browser:
        origin = url.rstrip("/")
        report = browser.new_page()
        loads: list[str] = []
        report.on("load", lambda loaded: loads.append(loaded.url))
        report.goto(f"{origin}/runs/live/")
        assert _text(report, "#state") == "stopped" and _text(report, "#units-done") == "0 / 9"
        listing = browser.new_page()
        listing.goto(url)
        assert "stopped" in _text(listing, "tr.run")
        resume = subprocess.Popen(
            [sys.executable, "-m", "skilltune.cli", "resume", str(run), "--quiet"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + DEADLINE
            while _state(report) != "success":  # the page reloads itself; the test never navigates
                assert time.monotonic() < deadline, f"the page still says {_state(report)!r}"
                report.wait_for_timeout(250)
            assert resume.wait(timeout=DEADLINE) == 0, resume.stderr.read() if resume.stderr else ""
        finally:
            if resume.poll() is None:
                resume.kill()
                resume.wait()
        assert _text(report, "#units-done") == "9 / 9"
        assert len(loads) >= 2  # reloaded by its own polling
        deadline = time.monotonic() + DEADLINE
        while "success" not in _text(listing, "tr.run"):
            assert time.monotonic() < deadline, "the list of runs did not follow the run"
            listing.wait_for_timeout(250)


def test_view_counts_a_live_runs_records_between_stage_ends(tmp_path: Path) -> None:
    """Rollouts land on disk all through a gate, whose stage event comes at its end: the page and
    the list show the records on disk (as `skilltune status` counts them) without waiting for it."""
    runs_dir = tmp_path / "runs"
    run = train_demo(runs_dir, tag="live", max_steps=3)
    make_live(run, "step_0003")  # as it was in step 3's gate, in a process that is alive (this one)
    gate = run / "steps" / "step_0003" / "rollouts" / "gate"
    held = sorted(gate.glob("*/*_r*"))[:12]  # the gate's last rollouts, not yet run
    aside = tmp_path / "aside"
    for folder in held:
        (aside / folder.relative_to(gate)).parent.mkdir(parents=True, exist_ok=True)
        folder.rename(aside / folder.relative_to(gate))
    before = summarize(run, depth="rollouts").totals
    with view_server(runs_dir) as url, chromium() as browser:
        origin = url.rstrip("/")
        report = browser.new_page()
        loads: list[str] = []
        report.on("load", lambda loaded: loads.append(loaded.url))
        report.goto(f"{origin}/runs/live/")
        assert _text(report, "#state") == "running"
        listing = browser.new_page()
        listing.goto(url)
        shown = {  # the page's rollouts and tokens cards, the list's rollouts cell
            (report, "rollouts"): _CARD.format(key="rollouts"),
            (report, "tokens"): _CARD.format(key="tokens"),
            (
                listing,
                "rollouts",
            ): "document.querySelector('tr.run[data-tag=\"live\"]').children[7].textContent",
        }
        for (page, what), text in shown.items():
            assert page.evaluate(text) == f"{getattr(before, what):,}", what
        for folder in held:  # the gate runs on: its rollouts land, the journal says nothing yet
            (aside / folder.relative_to(gate)).rename(folder)
        after = summarize(run, depth="rollouts").totals  # what `skilltune status` counts
        assert after.rollouts == before.rollouts + len(held) and after.tokens > before.tokens
        for (page, what), text in shown.items():
            page.wait_for_function(f"{text} === {f'{getattr(after, what):,}'!r}", timeout=DEADLINE * 1000)
        assert len(loads) == 1  # updated in place: the run's fingerprint did not change
        status, headers, body = request(url, path="/runs/live/_live")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body)["text"]["live-rollouts"] == f"{after.rollouts:,}"


_CARD = "[...document.querySelectorAll('.card')].find(c => c.querySelector('.k').textContent === '{key}').querySelector('.v').textContent"


def _state(page: object) -> str:
    try:
        return _text(page, "#state")
    except Exception:  # the page is between two loads
        return ""


def test_view_stays_out_of_the_readmes_executed_blocks() -> None:
    """It serves until stopped: the README shows it in a text block, never in a run ```sh block."""
    from tests.test_readme import _commands

    assert not [c for c in _commands() if c.startswith("skilltune view")]
    assert "skilltune view runs" in (REPO / "README.md").read_text()


_SECRET = "run-data-4f1c"  # in the run's files: a refused answer must not hold it


@pytest.fixture
def fake_runs(tmp_path: Path) -> Path:
    """A folder holding one run as far as the server's routes care (config.json and seed.json)."""
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    for name in ("config.json", "seed.json"):
        (run / name).write_text(json.dumps({"note": _SECRET}), encoding="utf-8")
    return run.parent


@contextmanager
def threaded_view(runs_dir: Path, allow_hosts: tuple[str, ...] = ()) -> Iterator[int]:
    """`open_view` on port 0, served from a thread; yields the port."""
    import threading

    from skilltune.report.serve import open_view

    server = open_view(runs_dir, port=0, allow_hosts=allow_hosts)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def ask(
    port: int, host: str | None, path: str = "/runs/demo/config.json", method: str = "GET"
) -> tuple[int, bytes]:
    """A request to 127.0.0.1:PORT naming ``host`` in its Host header (None: no Host header, HTTP/1.1)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_view_refuses_hosts_other_than_its_own_address(fake_runs: Path) -> None:
    """DNS rebinding: a page on evil.example whose name comes to resolve to 127.0.0.1 reaches the
    server under its own name. Only IP literals, localhost and the bound or allowed names are answered."""
    with threaded_view(fake_runs, allow_hosts=("box.lan",)) as port:
        answered = ["LOCALHOST", "10.0.0.7", "box.lan."]
        answered += [
            f"{name}:{port}" for name in ("127.0.0.1", "localhost", "app.localhost", "[::1]", "box.lan")
        ]
        for host in answered:
            status, body = ask(port, host)
            assert status == 200 and _SECRET in body.decode(), host
        refused = ["evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io"]
        for bad in [*refused, "box.lan.evil.example", "", None]:
            for path in ("/", "/_live", "/_fingerprint", "/runs/demo/", "/runs/demo/config.json"):
                status, body = ask(port, bad, path)
                text = body.decode()
                assert status == 403, (bad, path)
                assert _SECRET not in text and "demo" not in text, (bad, path)
                assert f"http://127.0.0.1:{port}/" in text and "--allow-host" in text, (bad, path)
            for method in ("HEAD", "POST", "DELETE"):
                assert ask(port, bad, "/", method)[0] == 403, (bad, method)
        assert ask(port, "127.0.0.1", "/", "POST")[0] == 405  # the Host check comes first, then the method


def test_view_allow_host_option_admits_a_name(fake_runs: Path) -> None:
    with view_server(fake_runs, "--allow-host", "box.lan", "--allow-host", "Other.Lan") as url:
        port = urlsplit(url).port
        assert port is not None
        for host in ("box.lan", f"other.lan:{port}", f"127.0.0.1:{port}"):
            assert ask(port, host)[0] == 200, host
        assert ask(port, "evil.example")[0] == 403
