"""The report and status of a training run for several agents (issue 22): per gated step each
agent's val means, difference and regression test (the hurt agent's veto under ``no-worse``), and
the run's held-out test per agent (final/transfer.json) as the skill x agent table. The runs are
tests/test_multitrain.py's: three mock agents, one of them harmed by step 1's edit."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.report import render_report, summarize, write_report
from skilltune.rundir import RunDir
from skilltune.runfiles import Transfer, Verdict
from tests.test_multitrain import LABELS, _train


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``no-worse`` (step 1 vetoed: ``harmed`` is hurt) and ``mean`` (step 1 kept, held-out test run);
    carry off, so step 1 is gated on its own candidate whatever the default."""
    root = tmp_path_factory.mktemp("report-agents")
    _train(root, "no-worse", carry="off")
    _train(root, "mean", carry="off", agents_gate="mean")
    return root


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _per_agent(html: str) -> str:
    start = html.index("<h3>Per agent</h3>")
    return html[start : html.index("</table>", start)]


def test_each_gated_step_shows_each_agents_evidence_and_the_veto(runs: Path) -> None:
    for tag, veto in (("no-worse", True), ("mean", False)):
        run = RunDir(runs / tag)
        verdict = Verdict.read(run.unit_dir("step", 1) / "gate.json")
        [unit] = summarize(run.root).units
        assert unit.agents == verdict.agents and unit.agents_gate == tag
        html = render_report(run.root)
        assert f"agents <b>{', '.join(LABELS)}</b>" in html
        table = _per_agent(html)
        rows = re.findall(r"<tr><td>(\w+)</td>(.*?)</tr>", table, re.S)
        assert [label for label, _ in rows] == LABELS
        for (_, row), evidence in zip(rows, verdict.agents, strict=True):
            cells = _text(row)
            assert f"{evidence.val_candidate:.3f}" in cells and f"{evidence.val_incumbent:.3f}" in cells
            assert evidence.mean_diff is not None and f"{evidence.mean_diff:+.3f}" in cells
        badges = re.findall(r'class="badge ([\w-]+)">([^<]*)<', table)
        expected = "hurt: veto" if veto else "hurt"
        assert badges == [("not-hurt", "not hurt"), ("not-hurt", "not hurt"), ("hurt", expected)]
        assert ("an agent significantly hurt vetoes a keep" in html) == veto


def test_the_held_out_test_per_agent_is_the_runs_transfer_table(runs: Path) -> None:
    run = RunDir(runs / "mean")
    table = Transfer.read(run.final / "transfer.json")
    own = [v for v in summarize(run.root).transfers if v.own]
    assert [(v.folder, v.table) for v in own] == [("final", table)]
    html = render_report(run.root)
    section = html[html.index('id="transfer-1"') : html.index('id="val"')]
    assert "The held-out test per agent" in section and "final/transfer.json" in section
    text = _text(section)
    for column in table.agents:
        assert column.label in text
        assert f"{column.pairs[0].diff:+.3f}" in text
    verdicts = re.findall(r'class="badge (\w+)"', section)
    assert verdicts == [c.pairs[0].verdict for c in table.agents]
    assert table.agent("harmed").pairs[0].verdict == "a_better"  # the harm shows on test too
    assert "these figures pool the 3 agents" in html
    assert "transfer-1" not in render_report(runs / "no-worse")  # nothing kept: no held-out test


def _row(screen: str, start: str) -> str:
    """The row of ``screen`` whose first cell starts with ``start``, its cells' wrapped lines joined:
    a terminal narrower than the row wraps a long cell onto lines whose first cell is blank (in a
    boxed table: the text before the first rule; in a grid: the line's indentation)."""
    lines = screen.splitlines()
    i = next(n for n, line in enumerate(lines) if line.strip().startswith(start))
    if "│" not in lines[i]:  # a grid (the facts): continuation lines are indented
        rest = [
            line.strip() for line in itertools.takewhile(lambda s: s[:1] == " " and s.strip(), lines[i + 1 :])
        ]
        return " ".join([lines[i].strip(), *rest])
    row = [lines[i]]
    for line in lines[i + 1 :]:
        if "│" not in line or line.split("│", 1)[0].strip():
            break
        row.append(line)
    cells = zip(*(line.split("│") for line in row), strict=False)
    return " ".join(" ".join(part.strip() for part in cell if part.strip()) for cell in cells)


def test_status_has_a_line_per_agent(runs: Path) -> None:
    screens = {}
    for tag in ("no-worse", "mean"):
        result = CliRunner().invoke(app, ["status", str(runs / tag)], env={"COLUMNS": "220"})
        assert result.exit_code == 0, result.output
        screens[tag] = result.output
    agent_lines = {label: _row(screens["no-worse"], label) for label in LABELS}
    assert "hurt" in agent_lines["harmed"] and "vetoes a keep" in agent_lines["harmed"]
    assert all("hurt" not in agent_lines[label] for label in ("follows", "crn"))
    assert "vetoes" not in screens["mean"]  # under mean a hurt agent does not veto
    table = Transfer.read(runs / "mean" / "final" / "transfer.json")
    per_agent = _row(screens["mean"], "per agent")
    for column in table.agents:
        assert (
            f"{column.label} best - S0 {column.pairs[0].diff:+.3f} ({column.pairs[0].verdict})" in per_agent
        )


def test_the_report_of_several_agents_in_chromium(runs: Path) -> None:
    """The per-agent tables draw, and the page still draws every plot without a console error."""
    from tests.chromium import chromium, open_page

    path = write_report(runs / "mean")
    with chromium() as browser:
        watched = open_page(browser, path.as_uri(), plots=4)
        rows = watched.page.locator("#step-1 table.agents tr")  # a kept unit's section is open
        assert rows.count() == 1 + len(LABELS) and rows.last.is_visible()
        assert watched.page.locator("#step-1 table.agents .badge.hurt").inner_text() == "hurt"
        header = watched.page.locator("table.transfer tr").first.inner_text()
        assert all(label in header for label in LABELS)
        assert watched.console_errors == []
