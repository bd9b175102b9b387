"""report.html of the mock demo: what it shows, that it is self-contained, and that it only reads."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.gate import GATES, GateOptions, StrictGate
from skilltune.report import render_report, summarize, write_report
from skilltune.report.page import render_page
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    AuditFile,
    AuditFinding,
    Comparison,
    ReflectionsFile,
    RolloutRecord,
    SlowUpdateFile,
    Verdict,
)
from skilltune.training.budget import spent
from tests.report_runs import (
    results_rows,
    train_demo,
    train_stopped,
    train_stopped_in_gate,
    tree_digest,
    val_tasks,
)


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


def test_no_heatmap_when_no_unit_ran_a_gate(demo: Path) -> None:
    """Units carried on ungated (or stopped before their gate) have no gate rollouts: no empty figure
    as tall as the val tasks, a line saying why instead."""
    s = summarize(demo)
    assert s.heatmap is not None and s.heatmap.units
    blank = [[None] * len(s.heatmap.units) for _ in s.heatmap.tasks]
    s.heatmap = s.heatmap.model_copy(update={"candidate": blank, "incumbent": blank})
    html = render_page(s)
    section = html.split('id="heatmap"', 1)[1].split("<h2", 1)[0]
    assert 'id="plot-heatmap"' not in html
    assert "No gate has run yet: no val task has a score" in section


def test_heatmap_shows_the_incumbents_shared_rollouts(demo: Path) -> None:
    """A decision reuses its incumbent's rollouts from the seed's baseline or an earlier unit's gate
    (gate.json says which replicates it paired): every gated unit has its incumbent's scores, each
    the mean of the incumbent scores its gate paired, which average to the unit's val_incumbent."""
    s = summarize(demo)
    heat = s.heatmap
    assert heat is not None
    gated = [u for u in s.units if u.val_incumbent is not None]
    shared = 0
    for unit in gated:
        verdict = Verdict.read(demo / "steps" / unit.name / "gate.json")
        shared += verdict.reused
        paired: defaultdict[str, list[float]] = defaultdict(list)
        for pair in (p for r in verdict.rounds for p in r.pairs):
            if pair.incumbent is not None:
                paired[pair.task].append(pair.incumbent)
        column = heat.units.index(unit.name)
        cells = {task: row[column] for task, row in zip(heat.tasks, heat.incumbent, strict=True)}
        assert set(paired) == set(cells), unit.name
        for task, scores in paired.items():
            assert cells[task] == pytest.approx(sum(scores) / len(scores), abs=1e-4), (unit.name, task)
        assert sum(c for c in cells.values() if c is not None) / len(cells) == pytest.approx(
            unit.val_incumbent, abs=1e-3
        )
    assert shared > 0  # gated units took their incumbent's rollouts from elsewhere
    # the default --carry run carries steps 1-7 ungated into step 8's decision, the run's only one
    assert [u.name for u in gated] == ["step_0008"]


def _cost_table(html: str) -> dict[str, tuple[int, int]]:
    """stage -> (rollouts, tokens) of the page's cost table."""
    table = html.split('<h2 id="cost">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(
        r'<tr><td>([a-z_]+)</td><td class="n">[^<]*</td><td class="n">([\d,]+)</td>\s*<td class="n">([\d,]+)</td>',
        table,
    )
    return {stage: (int(n.replace(",", "")), int(t.replace(",", ""))) for stage, n, t in rows}


def _card(html: str, key: str) -> int:
    found = re.search(rf'<div class="k">{key}</div><div class="v"[^>]*>([\d,]+)</div>', html)
    assert found, key
    return int(found[1].replace(",", ""))


def test_cost_table_counts_each_rollout_once_as_the_totals_do(demo: Path) -> None:
    """A gate reads back rollouts already on disk (shared with an earlier decision): the per-stage
    table counts each rollout run once, as the run's totals do."""
    records = [RolloutRecord.read(p) for p in demo.rglob("record.json")]
    run_here = [r for r in records if not r.cached_from]
    calls = [c for p in demo.rglob("reflections.json") for c in ReflectionsFile.read(p).calls]
    calls += [c for p in demo.rglob("slow_update.json") for c in SlowUpdateFile.read(p).calls]
    proposer = sum((c.tokens_in or 0) + (c.tokens_out or 0) for c in calls)
    tokens = sum(
        (r.tokens_in or 0) + (r.tokens_out or 0) + (r.judge.tokens if r.judge else 0) for r in run_here
    )
    html = render_report(demo)
    table = _cost_table(html)
    assert {"baseline", "rollout", "screen", "gate", "compare"} <= set(table)
    assert _card(html, "rollouts") == sum(n for n, _ in table.values()) == len(run_here)
    assert _card(html, "tokens") == sum(t for _, t in table.values()) == tokens + proposer
    assert _card(html, "tokens") == spent(RunDir(demo)).tokens  # what the run's budgets count


def test_report_of_a_run_stopped_in_a_gate_shows_its_unfinished_unit(tmp_path: Path) -> None:
    """Ctrl-C (here a STOP file) in step 2's gate: the unit without a record is shown, unfinished,
    with what its folder holds, and every count of the page adds up to the records on disk."""
    run = train_stopped_in_gate(tmp_path / "runs", "halt", step=2)
    s = summarize(run)
    assert s.state == "stopped" and [u.verdict for u in s.units] == ["keep", "unfinished"]
    unit = s.units[-1]
    assert unit.name == "step_0002" and unit.decision == "in gate" and "ended stopped" in unit.reason
    assert unit.rollouts == len(list((run / "steps" / "step_0002").rglob("record.json")))
    assert s.steps_done == 1 and s.finished_units == s.units[:1]
    spent = len(list(run.rglob("record.json")))
    baseline = sum(c.rollouts for c in s.stages if c.unit == "step_0000")
    assert (
        s.totals.rollouts
        == spent
        == sum(c.rollouts for c in s.stages)
        == baseline + sum(u.rollouts for u in s.units)
    )
    gate = next(c for c in s.stages if (c.unit, c.stage) == ("step_0002", "gate"))
    assert gate.rollouts > 0 and gate.tokens > 0
    assert summarize(run, depth="light").totals == s.totals.model_copy(update={"cached": 0, "statuses": {}})
    html = render_report(run)
    assert '<a href="#step-2">step_0002</a></td><td><span class="badge unfinished">unfinished</span>' in html
    table = _cost_table(html)
    assert _card(html, "rollouts") == sum(n for n, _ in table.values()) == spent


def test_held_out_commands_give_option_values_as_the_flags_read_them_back() -> None:
    """A stored option that is not plain text (a bool, a list, a number-like or comma text) is
    written so that --agent-opt reads back the same value, not its Python spelling."""
    from skilltune.cli.app import parse_agent_opts
    from skilltune.report.heldout import _options

    options = {"stream": False, "extra_args": ["--x", "y"], "temperature": 0.2, "model": "m-1",
               "tag": "7", "note": "a,b", "table": {"k": None}}  # fmt: skip
    words = _options("--agent-opt", options)
    assert words[0::2] == ["--agent-opt"] * len(options)
    assert parse_agent_opts(words[1::2]) == options
    assert "model=m-1" in words


def test_held_out_command_asks_for_a_redacted_secret_rather_than_sending_the_mark(tmp_path: Path) -> None:
    """config.json keeps a secret option redacted: the suggested compare command leaves it out and
    says which flag to add, so a pasted command never sends the redaction mark as the key."""
    from skilltune.report.heldout import _compare
    from skilltune.rundir import RunDir
    from skilltune.runfiles import TrainConfig
    from skilltune.store import REDACTED

    config = TrainConfig(suite="s", skill="k", tag="t", agent="openai",
                         agent_options={"model": "m", "api_key": REDACTED})  # fmt: skip
    command = _compare(config, RunDir(tmp_path / "t"))
    assert REDACTED not in command
    assert "--agent-opt model=m" in command
    assert command.endswith("# and --agent-opt api_key=... (not kept in config.json)")


def test_no_held_out_comparison_says_why_and_its_commands_make_one(tmp_path: Path) -> None:
    """A run out of budget after a kept step: the page says the budget ran out before the held-out
    test, and each command it gives makes the comparison (resume with the budget raised; compare)."""
    # after step 1 (618 rollouts) neither step 2 (848) nor the held-out test (2 arms x 14 tasks x 20) fits
    run = train_demo(tmp_path / "runs", tag="poor", budget_rollouts=900, test_reps=20)
    s = summarize(run)
    assert s.state == "exhausted" and s.kept >= 1 and s.held_out is None
    assert s.held_out_missing.startswith("The run ran out of budget (rollout budget: ")
    assert "before its held-out test" in s.held_out_missing
    resume, compare = s.held_out_commands
    assert resume == f"skilltune resume {run} --budget-rollouts {s.planned_rollouts}"
    html = render_report(run)
    assert "No held-out comparison. The run ran out of budget" in html
    assert f'<pre class="command">{resume}</pre>' in html

    runner = CliRunner()
    compared = runner.invoke(app, [*shlex.split(compare)[1:], "--quiet"])
    assert compared.exit_code == 0, compared.output
    elsewhere = Comparison.read(tmp_path / "runs" / "poor-heldout" / "comparison.json")
    assert [a.skill_hash for a in elsewhere.arms.values()] == [s.units[0].parent, s.best]
    resumed = runner.invoke(app, [*shlex.split(resume)[1:], "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    after = summarize(run)
    assert after.held_out is not None and not after.held_out_missing
    assert after.state in ("success", "no-progress")


def test_report_writes_only_report_html_and_is_self_contained(demo: Path) -> None:
    before = tree_digest(demo, skip=("report.html",))
    path = write_report(demo)
    assert path == demo / "report.html"
    assert tree_digest(demo, skip=("report.html",)) == before  # the run is only read
    html = path.read_text()
    assert "Plotly.newPlot" in html and "plotly.js (cartesian - minified) v" in html  # the library is inlined
    assert len(html.encode()) < 2_000_000, "its cartesian bundle, not the full one (4.8 MB)"
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
    by_index = {u.index: u for u in s.units if u.kind == "step"}
    for unit in kept:
        assert f'id="{unit.kind}-{unit.index}"' in html
        # a candidate carried from earlier steps (the default --carry screen) holds their edits too:
        # each is shown in the step that proposed it
        chain = [unit]
        while chain[-1].carried is not None:
            chain.append(by_index[chain[-1].carried])
        applied = [e for u in chain for e in u.proposed if e.kept]
        assert applied, unit.name
        assert all(any(" ".join(e.text.split()) in " ".join(t.split()) for e in applied) for t in unit.edits)
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
        details={
            "passages": [{"text": "route the ticket to   billing", "source": "val task t3 prompt"}],
            "ids": ["t3", "t4"],
            "records": [f"steps/step_0002/rollouts/gate/t{i}_r0" for i in range(7)],
        },
    )
    AuditFile(clean=False, checks=["leak"], findings=[finding]).write(run / "audit.json")
    html = render_report(run)
    assert "Audit (1 finding)" in html and "a val prompt 8-gram in a proposer answer" in html
    detail = html.split("a val prompt 8-gram in a proposer answer", 1)[1].split("</li>", 1)[0]
    assert "{" not in detail and "[" not in detail and "&#39;" not in detail  # no Python reprs
    assert "passages: \u201croute the ticket to billing\u201d (val task t3 prompt); ids: t3, t4" in detail
    assert "records: steps/step_0002/rollouts/gate/t0_r0, " in detail and "t4_r0 and 2 more" in detail


def test_report_merges_an_edit_proposed_twice_and_says_so(demo: Path, tmp_path: Path) -> None:
    """Two answers proposing one rule are one edit of the candidate (the step's merge groups them):
    the report counts it once, says how often it was proposed, and counts the applied edits right."""
    run = tmp_path / "demo"
    shutil.copytree(demo, run, symlinks=True)
    unit = next(u for u in summarize(run).units if any(e.kept for e in u.proposed))
    applied, shown = sum(e.kept for e in unit.proposed), len(unit.proposed)
    path = RunDir(run).unit_dir(unit.kind, unit.index) / "reflections.json"
    answer = ReflectionsFile.read(path)
    first = next(e for e in answer.edits if any(p.kept and p.text == e.text for p in unit.proposed))
    again = [first.model_copy(update={"text": f"  {first.text.upper()}  "}), first.model_copy()]
    answer.model_copy(update={"edits": [*answer.edits, *again]}).write(path)
    (run / "report.html").unlink(missing_ok=True)
    html = render_report(run)
    section = html.split(f'id="{unit.kind}-{unit.index}"', 1)[1]
    assert (
        f"Proposed edits ({applied} of {shown} applied; {shown + 2} proposed, equal edits merged)" in section
    )
    assert "proposed 3 times" in section


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
    assert "No gate has decided yet" in html
    assert "No held-out comparison. The run was stopped (" in html and "Nothing has been kept yet" in html
    assert s.held_out_commands == [f"skilltune resume {run}"] and f"skilltune resume {run}" in html


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


def test_plotly_is_the_cartesian_bundle_of_the_plotly_version_else_the_full_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    from skilltune.report import figures

    version = get_plotlyjs_version()
    name, script = figures.plotly_bundle()
    assert name == f"cartesian-{version}" and script == figures.CARTESIAN.read_text(encoding="utf-8")
    assert len(script) < len(get_plotlyjs()) / 3
    other = tmp_path / "plotly-cartesian.min.js"
    for stored in (None, "/**\n* plotly.js (cartesian - minified) v1.0.0\n*/\nwindow.Plotly = {};\n"):
        if stored is not None:
            other.write_text(stored, encoding="utf-8")
        monkeypatch.setattr(figures, "CARTESIAN", other)  # missing, then of another version
        figures.plotly_bundle.cache_clear()
        try:
            assert figures.plotly_bundle() == (version, get_plotlyjs())
        finally:
            figures.plotly_bundle.cache_clear()


def test_report_shows_the_transfer_table_of_a_compare_inside_the_run(demo: Path, tmp_path: Path) -> None:
    """``compare S0=RUN/seed best=RUN/best_skill --agent A --agent B --out RUN-transfer``: the report's
    held-out section shows each agent's scores and verdicts (issue 22); a table of other skills
    beside it is not this run's."""
    from skilltune.measure.transfer import compare_agents
    from skilltune.runfiles import AgentSpec
    from skilltune.skill import load_skill
    from tests.helpers import MOCK_SUITE

    run = tmp_path / "demo"
    shutil.copytree(demo, run)
    arms = {"S0": load_skill(run / "seed"), "best": load_skill(run / "best_skill")}
    agents = [
        AgentSpec(label="follows", agent="mock"),
        AgentSpec(label="stubborn", agent="mock", options={"ignores": ["quantify-impact", "detection-gap"]}),
    ]
    table = compare_agents(MOCK_SUITE, arms, agents, reps=1, out=tmp_path / "demo-transfer")
    [view] = summarize(run).transfers
    assert view.folder == "demo-transfer" and view.table == table
    html = render_report(run)
    section = html[html.index('id="transfer-1"') : html.index('id="val"')]
    assert "demo-transfer/transfer.json" in section
    text = re.sub(r"<[^>]+>", " ", section)
    for column in table.agents:
        assert column.label in text
        for score in column.scores.values():
            assert f"{score:.3f}" in text
        pair = column.pairs[0]
        assert f"{pair.diff:+.3f}" in text
    verdicts = re.findall(r'class="badge (\w+)"', section)
    assert verdicts == [c.pairs[0].verdict for c in table.agents] == ["b_better", "no_difference"]
    assert "transfer-1" not in render_report(demo)  # no table without a transfer.json
    assert "<h3>Per agent</h3>" not in render_report(demo)  # one agent: no per-agent evidence
    other = table.model_copy(update={"arms": {"x": "0" * 64, "noskill": "noskill"}})
    (tmp_path / "demo-other").mkdir()
    other.write(tmp_path / "demo-other" / "transfer.json")  # of other skills: not this run's
    assert [v.folder for v in summarize(run).transfers] == ["demo-transfer"]
    (tmp_path / "demo-zz").mkdir()
    (tmp_path / "demo-zz" / "transfer.json").write_text("{not json")  # damaged: said, not fatal
    damaged = summarize(run).transfers[-1]
    assert (damaged.folder, damaged.table) == ("demo-zz", None) and "transfer.json" in damaged.problem
    assert "Not shown: " in render_report(run)


def test_carried_steps_read_as_carried_and_the_keep_names_the_step_of_each_edit(demo: Path) -> None:
    """Under the default --carry run steps 1-7 are carried on ungated and step 8 gates the chain and
    keeps it: the report and results.tsv show them ``carried`` (not discards), and step 8 lists each of
    its edits with the step that proposed it; the findings agree."""
    rows = results_rows(demo)
    s = summarize(demo)
    steps = {u.index: u for u in s.units if u.kind == "step"}
    assert [steps[i].verdict for i in range(1, 9)] == ["carried"] * 7 + ["keep"]
    assert [r["verdict"] for r in rows if r["phase"] == "step"][:7] == ["carried"] * 7
    keep = steps[8]
    assert keep.carried == 7 and keep.carried_edits <= len(keep.edits)
    # each edit's step, followed back along the chain: step j proposed the edits it did not carry
    owners = {
        e: i for i in range(1, 9) for e in steps[i].edits[steps[i].carried_edits if steps[i].carried else 0 :]
    }
    assert keep.origins == [owners[e] for e in keep.edits]
    html = render_report(demo)
    carried = sum(u.verdict == "carried" for u in s.units)
    assert html.count('<span class="badge carried">carried</span>') == 2 * carried  # table row and section
    assert ".badge.carried {" in html  # its own colour, not the discard grey
    section = html.split('id="step-8"', 1)[1].split("</details>", 1)[0]
    assert "Kept edits, by the step that proposed each" in section
    first = keep.edits[0].replace("'", "&#39;")
    assert (
        f'from <a href="#step-{keep.origins[0]}">step {keep.origins[0]}</a>: <code>{first}</code>' in section
    )
    assert "<h3>Edits</h3>" not in section  # listed once, with their steps
    findings = (demo / "findings.md").read_text()
    assert f"  - step 8, from step {keep.origins[0]}: {keep.edits[0]}" in findings
    assert f"- **Carried** {carried} step(s) on ungated" in findings
    assert (
        "- **Rejected** " not in findings
        or "(reject" not in findings.split("- **Rejected** ", 1)[1].split("\n")[0]
    )


def test_step_origins_follow_the_chain_and_survive_a_missing_record() -> None:
    from skilltune.report.model import UnitView
    from skilltune.report.units import step_origins

    def step(index: int, edits: int, carried: int | None = None, carried_edits: int = 0) -> UnitView:
        return UnitView(
            name=f"step_{index:04d}", kind="step", index=index, epoch=1, verdict="discard",
            edits=[f"e{index}.{k}" for k in range(edits)], carried=carried, carried_edits=carried_edits,
        )  # fmt: skip

    chain = [step(1, 2), step(2, 3, carried=1, carried_edits=2), step(3, 3, carried=2, carried_edits=3)]
    assert step_origins(chain) == {1: [1, 1], 2: [1, 1, 2], 3: [1, 1, 2]}
    # step 1's record missing (its folder deleted): step 2's carried edits are known as step 1's only
    assert step_origins(chain[1:]) == {2: [1, 1, 2], 3: [1, 1, 2]}
    assert step_origins([step(5, 1), step(6, 2, carried=4, carried_edits=1)])[6] == [4, 6]
