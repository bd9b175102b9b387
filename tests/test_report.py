"""report.html of the mock demo: what it shows, that it is self-contained, and that it only reads."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.gate import GATES, GateOptions, StrictGate
from skilltune.report import render_report, summarize, write_report
from skilltune.report.page import render_page
from skilltune.runfiles import AuditFile, AuditFinding, Comparison
from tests.report_runs import results_rows, train_demo, train_stopped, tree_digest, val_tasks


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_demo(tmp_path_factory.mktemp("runs"))


def test_summary_agrees_with_the_files_the_run_wrote(demo: Path) -> None:
    rows = results_rows(demo)
    s = summarize(demo)
    assert s.state == "success"
    assert [u.name.split("_")[0] for u in s.units] == [r["phase"] for r in rows]
    assert [u.verdict for u in s.units] == [r["verdict"] for r in rows]
    assert [u.rollouts for u in s.units] == [int(r["rollouts"]) for r in rows]
    kept = [r for r in rows if r["verdict"] == "keep"]
    assert s.best_val == pytest.approx(float(kept[-1]["val_candidate"]), abs=1e-5)
    comparison = Comparison.read(demo / "comparison.json")
    assert s.gain is not None and s.gain.diff == comparison.pairs[0].diff
    assert s.heatmap is not None and s.heatmap.tasks == sorted(val_tasks())
    assert s.totals.rollouts == len(list(demo.rglob("record.json")))
    assert [v.label for v in s.lineage] == ["seed"] + [f"step {r['step']}" for r in kept]
    assert s.lineage[-1].best


def test_report_writes_only_report_html_and_is_self_contained(demo: Path) -> None:
    before = tree_digest(demo, skip=("report.html",))
    path = write_report(demo)
    assert path == demo / "report.html"
    assert tree_digest(demo, skip=("report.html",)) == before  # the run is only read
    html = path.read_text()
    assert "Plotly.newPlot" in html and "plotly.js v" in html  # the library itself is inlined
    markup = re.sub(r"<script>.*?</script>", "<script></script>", html, flags=re.S)
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=["'](?!data:)""", markup), (
        "loads nothing"
    )
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", markup)
    for target in re.findall(r'href="(?!data:)([^"#][^"]*)"', markup):  # every link opens a file of the run
        assert (demo / target).is_file(), target


def test_report_shows_each_units_edits_rationale_citations_and_rounds(demo: Path) -> None:
    html = render_report(demo)
    s = summarize(demo)
    kept = [u for u in s.units if u.verdict == "keep"]
    assert kept
    for unit in kept:
        assert f'id="{unit.kind}-{unit.index}"' in html
        applied = [e for e in unit.proposed if e.kept]
        assert applied, unit.name
        for edit in applied:
            added = f'<span class="da">+{edit.text.splitlines()[0]}</span>'
            assert added.replace("&", "&amp;").replace("'", "&#39;") in html  # in the skill's diff
            assert edit.rationale in html
            for cite in edit.citations:
                assert cite.conversation and f'href="{cite.conversation}"' in html
                assert cite.excerpt.splitlines()[0] in html
        assert f'<td class="n">{len(unit.rounds) - 1}</td>' in html  # the gate's last round
        # the sign-flip test's rounds: its p-value and crossings, and only the futility side of the interval
        last = unit.rounds[-1]
        assert last.p is not None and last.crossed is not None and last.budget is not None
        assert last.crossed <= last.budget and f"{last.crossed} / {last.budget}" in html
        assert unit.interval is not None and unit.interval.low is None and unit.interval.high == last.upper
    for row in results_rows(demo):
        assert f"{row['phase']}_{int(row['step'] if row['phase'] == 'step' else row['epoch']):04d}" in html


def test_report_escapes_what_the_run_holds(demo: Path) -> None:
    s = summarize(demo)
    edit = next(e for u in s.units for e in u.proposed)
    edit.rationale = "<script>alert('x')</script>"
    html = render_page(s)
    assert "<script>alert(" not in html and "&lt;script&gt;alert(" in html


def test_report_shows_audit_findings_when_audit_json_exists(demo: Path, tmp_path: Path) -> None:
    run = tmp_path / "demo"
    shutil.copytree(demo, run, symlinks=True)
    (run / "audit.json").unlink(missing_ok=True)
    assert "Audit (" not in render_report(run)
    finding = AuditFinding(
        check="leak",
        where="steps/step_0002/reflections.json",
        message="a val prompt 8-gram in a proposer answer",
    )
    AuditFile(clean=False, checks=["leak"], findings=[finding]).write(run / "audit.json")
    html = render_report(run)
    assert "Audit (1 finding)" in html and "a val prompt 8-gram in a proposer answer" in html


class _CautiousOptions(GateOptions):
    give_up_below: float = 0.05

    def smallest_gain(self) -> float | None:
        return self.give_up_below


class _CautiousGate(StrictGate):
    name = "cautious"
    Options = _CautiousOptions


@pytest.mark.parametrize(
    ("gate", "options", "shown"),
    [
        ("sequential", {"min_effect": 0.2}, 0.2),
        ("strict", {}, None),
        ("cautious", {}, 0.05),
        ("gone", {}, None),
    ],
)
def test_the_smallest_gain_comes_from_the_runs_gate_options(
    demo: Path, tmp_path: Path, gate: str, options: dict[str, object], shown: float | None
) -> None:
    """The summary's min_effect is what the run's gate reads from its options (a plug-in gate's
    too), None for a gate without one or not installed here."""
    run = tmp_path / "demo"
    shutil.copytree(demo, run, symlinks=True)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(config | {"gate": gate, "gate_options": options}))
    GATES.register("cautious", _CautiousGate)
    try:
        assert summarize(run).min_effect == shown
    finally:
        GATES.unregister("cautious")


def test_report_of_an_unfinished_run(tmp_path: Path) -> None:
    """A run stopped after the seed's baseline: no unit, no held-out comparison; the page still renders."""
    run = train_stopped(tmp_path / "runs", tag="early")
    s = summarize(run)
    assert s.state == "stopped" and not s.units and s.held_out is None
    html = render_report(run)
    assert "No held-out comparison yet" in html and "No gate has decided yet" in html


def test_report_command(demo: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(demo), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.html").is_file() and str(tmp_path / "r.html") in result.output
    bad = runner.invoke(app, ["report", str(tmp_path / "nothing")])
    assert bad.exit_code == 2 and "not a run directory" in bad.output
    assert not (tmp_path / "nothing").exists()


def test_report_reads_a_run_of_an_older_skilltune(tmp_path: Path) -> None:
    """The schema-1 run kept in tests/fixtures (written before versioned run files) is read through
    the migrations, and nothing in it changes."""
    import tarfile

    from tests.helpers import REPO

    with tarfile.open(REPO / "tests" / "fixtures" / "run-schema1" / "run.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    run = tmp_path / "old"
    before = tree_digest(run)
    s = summarize(run)
    rows = results_rows(run)
    assert [u.verdict for u in s.units] == [r["verdict"] for r in rows]
    rounds = [r for u in s.units for r in u.rounds]  # the per-replicate t test's looks, with their bound
    assert rounds and all(r.bound is not None and r.se is not None and r.gain is not None for r in rounds)
    gated = [u for u in s.units if u.rounds]
    assert gated and all(u.interval is not None and u.interval.low is not None for u in gated)
    assert s.min_effect == 0.10  # the sequential gate's default: the run set no min_effect
    assert "<h1>old" in render_page(s)
    assert tree_digest(run) == before
