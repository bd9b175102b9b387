"""Every number after a run is right (issue 34): the headline on the gate's metric, a pause between a
stop and its resume not counted as run time, the held-out test of an exhausted run, the suggested
compare picked up, what a stopped unit was testing, the CLI's count of an interrupted gate, and the
trigger figures (each query once)."""

from __future__ import annotations

import io
import re
import shlex
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.report import render_report, summarize
from skilltune.report.status import status_screen
from skilltune.review.promote import promote
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    Comparison,
    JournalEvent,
    Resumed,
    SessionEnd,
    SessionStart,
    StageDone,
    active_seconds,
)
from skilltune.skill import load_skill
from skilltune.stats.proportion import wilson
from skilltune.textfmt import fmt
from skilltune.training import resume
from skilltune.training.budget import hours_spent
from tests.helpers import MOCK_SKILL, MOCK_SUITE, REPO
from tests.report_runs import train_demo, train_stopped, train_stopped_in_gate

TRIGGER_SUITE = REPO / "examples" / "trigger-demo" / "suite"
TRIGGER_SKILL = REPO / "examples" / "trigger-demo" / "skill"


def _status(run: Path) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(status_screen(summarize(run, depth="rollouts")))
    return console.export_text()


def _text(html: str) -> str:
    import html as htmllib

    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


# --- item 1: the headline ------------------------------------------------------------------------
def test_the_headline_gives_the_scores_of_the_metric_it_names(tmp_path: Path) -> None:
    """``--metric hard``: TERMINAL's line (which the CLI, report, status and findings show) gives the
    arms' hard scores, not their mixed ones under the name hard."""
    runs = tmp_path / "runs"
    args = [
        "train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--agent", "mock", "--proposer", "mock",
        "--tag", "hard", "--max-steps", "4", "--seed", "1", "--metric", "hard", "--runs-dir", str(runs), "--quiet",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    run = runs / "hard"
    comparison = Comparison.read(run / "comparison.json")
    s0, best = comparison.arms["S0"], comparison.arms["best"]
    assert comparison.metric == "hard" and (s0.hard_acc, best.hard_acc) != (s0.mixed, best.mixed)
    headline = f"test hard S0 {fmt(s0.hard_acc)} -> best {fmt(best.hard_acc)} ({comparison.pairs[0].verdict})"
    assert headline in (run / "TERMINAL").read_text()
    assert headline in result.output
    assert headline in _status(run)
    assert headline in _text(render_report(run))
    assert headline in (run / "findings.md").read_text()


# --- item 2: a pause is not run time -------------------------------------------------------------
def _at(seconds: float) -> str:
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def test_active_time_stops_at_a_sessions_last_event_and_resumes_at_the_resume() -> None:
    """A session of 10 s, stopped; a night; ``resume`` (its event comes before the new session_start)
    and 20 s more: 30 s of run time, whether the first session ended cleanly or was killed."""
    stopped: list[JournalEvent] = [
        SessionStart(pid=1, ts=_at(0)),
        StageDone(unit="step_0001", stage="rollout", seconds=9.0, ts=_at(9)),
        SessionEnd(rollouts=8, ts=_at(10)),
    ]
    night = 8 * 3600
    resumed: list[JournalEvent] = [
        Resumed(units_done=0, ts=_at(night)),
        SessionStart(pid=2, ts=_at(night + 0.5)),
        StageDone(unit="step_0001", stage="gate", seconds=19.5, ts=_at(night + 20)),
    ]
    assert active_seconds([*stopped, *resumed]) == pytest.approx(30.0)
    killed = stopped[:2]  # SIGKILL: no session_end, the session ends at its last event
    assert active_seconds([*killed, *resumed]) == pytest.approx(29.0)


def test_a_run_resumed_after_a_pause_is_not_exhausted_by_it(tmp_path: Path) -> None:
    """Stop, wait, resume with a time budget the pause alone would spend: the resumed run goes on
    (it runs a step), and its time counts its sessions only, as the report and status show it."""
    run = train_stopped(tmp_path / "runs", "paused", max_steps=2, budget_hours=1.0)
    before = hours_spent(RunDir(run)) * 3600
    pause = 12.0
    time.sleep(pause)
    resumed = resume(run, budget_hours=(before + pause / 2) / 3600)
    assert (run / "steps" / "step_0001" / "step.json").is_file(), resumed.reason  # not exhausted at once
    journal = RunDir(run).read_journal()
    span = (datetime.fromisoformat(journal[-1].ts) - datetime.fromisoformat(journal[0].ts)).total_seconds()
    seconds = summarize(run).totals.seconds
    assert seconds == pytest.approx(active_seconds(journal), abs=1e-3)
    assert seconds <= span - pause
    hours = next(line for line in _status(run).splitlines() if line.startswith("budget hours"))
    assert re.search(r"(\S+ left|none left) of \d+(\.\d)?s", hours) and "-" not in hours, hours


# --- item 4: the held-out test of an exhausted run, and the suggested compare ---------------------
@pytest.fixture(scope="module")
def exhausted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Out of rollouts for step 2 after keeping step 1, with enough left for the test (84 rollouts)."""
    return train_demo(tmp_path_factory.mktemp("runs"), tag="poor", carry="off", budget_rollouts=900)


def test_an_exhausted_run_tests_what_it_kept_when_the_budget_covers_the_test(exhausted: Path) -> None:
    run = RunDir(exhausted)
    terminal = run.terminal()
    assert terminal is not None and terminal.state == "exhausted"
    comparison = Comparison.read(run.comparison)
    best = load_skill(run.best_dir).hash
    assert comparison.arms["best"].skill_hash == best != comparison.arms["S0"].skill_hash
    s0, tested = comparison.arms["S0"].mixed, comparison.arms["best"].mixed
    assert f"; the best so far tested: test mixed S0 {fmt(s0)} -> best {fmt(tested)}" in terminal.reason
    assert len(list(run.final.rglob("record.json"))) == sum(a.n_rollouts for a in comparison.arms.values())
    assert len(list(run.root.rglob("record.json"))) <= 900  # within the budget
    s = summarize(run.root)
    assert s.held_out is not None and s.gain is not None and s.gain.diff == comparison.pairs[0].diff
    assert "No held-out comparison" not in render_report(run.root)


def test_a_resumed_run_tests_its_new_best_again(exhausted: Path, tmp_path: Path) -> None:
    """The memo comparison.json of an exhausted run is of the best then: a resume that goes on tests
    the best it ends with."""
    run = tmp_path / "poor"
    shutil.copytree(exhausted, run)
    resume(run, budget_rollouts=2000)
    comparison = Comparison.read(run / "comparison.json")
    assert comparison.arms["best"].skill_hash == load_skill(run / "best_skill").hash


def test_the_suggested_compare_is_read_as_the_runs_held_out_comparison(
    exhausted: Path, tmp_path: Path
) -> None:
    """A run without its own test (here: the exhausted run's taken away) suggests a compare into
    RUNDIR-heldout/; once run, the report, status and promote show it, and the view sees it change."""
    from skilltune.report.serve import fingerprint

    run = tmp_path / "short"
    shutil.copytree(exhausted, run)
    (run / "comparison.json").unlink(missing_ok=True)
    shutil.rmtree(run / "final", ignore_errors=True)
    s = summarize(run)
    assert s.held_out is None and "No held-out comparison" in render_report(run)
    compare = s.held_out_commands[-1]
    assert compare.endswith(f"--out {tmp_path / 'short-heldout'}")
    marked = fingerprint(run)
    result = CliRunner().invoke(app, [*shlex.split(compare)[1:], "--quiet"])
    assert result.exit_code == 0, result.output
    assert fingerprint(run) != marked  # a page of `view` reloads
    theirs = Comparison.read(tmp_path / "short-heldout" / "comparison.json")
    s = summarize(run)
    assert s.held_out is not None and s.held_out.source == "short-heldout" and not s.held_out_commands
    assert s.gain is not None and s.gain.diff == theirs.pairs[0].diff
    html = render_report(run)
    assert "No held-out comparison" not in html and "short-heldout/comparison.json" in html
    assert f"best - S0 on test: {theirs.pairs[0].diff:+.3f}" in _status(run)
    assert "(from short-heldout/comparison.json)" in _status(run)
    plan = promote(run, run / "seed")
    assert plan.held_out is not None and plan.held_out.diff == theirs.pairs[0].diff
    # a compare of another best beside the run is not this run's: said, not shown as its own
    other = theirs.model_copy(deep=True)
    other.arms["best"] = other.arms["best"].model_copy(update={"skill_hash": "f" * 64})
    other.write(tmp_path / "short-heldout" / "comparison.json")
    s = summarize(run)
    assert s.held_out is None and "compares another best skill (ffffffffffff" in s.held_out_missing


# --- items 5 and 6: a unit stopped in its gate --------------------------------------------------
@pytest.fixture(scope="module")
def halted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_stopped_in_gate(tmp_path_factory.mktemp("runs"), "halt", step=2)


def test_a_stopped_unit_shows_what_it_was_testing(halted: Path) -> None:
    """Stopped in step 2's gate: its candidate, edits, diff and proposals show, and its gate's time."""
    from skilltune.propose.merge import MergeResult
    from skilltune.runfiles import ReflectionsFile

    folder = halted / "steps" / "step_0002"
    seed = load_skill(halted / "seed")
    candidate = load_skill(folder / "candidate")
    reflections = ReflectionsFile.read(folder / "reflections.json")
    if reflections.proposals:
        own = [e.compact() for e in reflections.edits]
    else:
        merged = MergeResult.model_validate_json((folder / "merged_patch.json").read_text())
        own = [m.edit.compact() for m in merged.kept]
    assert own
    s = summarize(halted)
    unit = s.units[-1]
    assert (unit.name, unit.verdict, unit.decision) == ("step_0002", "unfinished", "in gate")
    assert unit.candidate == candidate.hash and unit.parent == s.units[0].candidate != seed.hash
    assert unit.edits == own and f"its candidate holds {len(own)} edit(s)" in unit.reason
    assert unit.diff and all(f"+{e.text.splitlines()[0]}" in unit.diff for e in reflections.edits)
    assert sorted(p.index for p in unit.proposals) == sorted(p.index for p in reflections.proposals)
    journal = RunDir(halted).read_journal()
    last = max(e.ts for e in journal if isinstance(e, StageDone) and e.unit == "step_0002")
    end = next(e for e in reversed(journal) if isinstance(e, SessionEnd)).ts
    gate = next(c for c in s.stages if (c.unit, c.stage) == ("step_0002", "gate"))
    expected = (datetime.fromisoformat(end) - datetime.fromisoformat(last)).total_seconds()
    assert gate.seconds == pytest.approx(expected, abs=1e-3) and gate.seconds > 0
    html = render_report(halted)
    row = html.split('<a href="#step-2">step_0002</a>', 1)[1].split("</tr>", 1)[0]
    assert f"{len(own)} edit(s)" in row
    section = html.split('id="step-2"', 1)[1].split('<details class="unit"', 1)[0]
    assert "Skill diff (incumbent" in section and f"candidate <code>{candidate.hash[:12]}</code>" in section


def test_the_end_summary_counts_an_interrupted_gates_rollouts(halted: Path) -> None:
    """train's last lines count the rollouts on disk, the stopped gate's included, as the report does."""
    from skilltune.cli.app import out
    from skilltune.cli.train import print_gate_share

    s = summarize(halted)
    training = sum(c.rollouts for c in s.stages if c.unit != "final")
    gate = sum(c.rollouts for c in s.stages if c.stage == "gate")
    assert training == s.totals.rollouts and any(
        c.rollouts > 0 for c in s.stages if (c.unit, c.stage) == ("step_0002", "gate")
    )
    with out.capture() as captured:
        print_gate_share(halted)
    assert f"rollouts: {training} in training, {gate} of them in the gate" in captured.get()


# --- item 7: the trigger report ------------------------------------------------------------------
@pytest.fixture(scope="module")
def trigger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trigger demo for 4 steps: steps 1-3 carried on ungated, step 4 keeps their chain of four
    descriptions, of which the candidate holds the last."""
    import skilltune

    runs = tmp_path_factory.mktemp("runs")
    skilltune.train(
        TRIGGER_SUITE, TRIGGER_SKILL, tag="trig", runs_dir=str(runs), component="description",
        max_steps=4, seed=2,
    )  # fmt: skip
    return runs / "trig"


def test_trigger_figures_count_each_query_once(trigger: Path) -> None:
    comparison = Comparison.read(trigger / "comparison.json")
    queries = comparison.arms["best"].n_tasks
    assert comparison.reps > 1 and comparison.arms["best"].trigger is not None
    assert comparison.arms["best"].trigger.n == queries * comparison.reps  # the file: one per rollout
    s = summarize(trigger)
    assert s.held_out is not None
    html = render_report(trigger)
    table = _text(html.split('<table class="trigger">', 1)[1].split("</table>", 1)[0])
    screen, findings = _status(trigger), (trigger / "findings.md").read_text()
    for arm in s.held_out.arms:
        t = arm.trigger
        assert t is not None and t.queries == queries and t.accuracy.n == queries
        assert t.decisions == queries * comparison.reps and t.tp + t.fp + t.fn + t.tn == queries
        low, high = wilson(t.accuracy.k, queries) or (0, 0)
        assert t.accuracy.ci95 == [round(low, 6), round(high, 6)]
        assert f"({t.accuracy.k}/{queries}) [{low:.3f}, {high:.3f}]" in table
        assert f"{arm.name} {t.line()}" in findings
        assert t.line().split(" on ")[0].split(", ")[0] in screen  # precision, in status


def test_trigger_report_shows_one_description_kept_and_the_query_of_each_cited_trajectory(
    trigger: Path,
) -> None:
    s = summarize(trigger)
    keep = next(u for u in s.units if u.verdict == "keep")
    descriptions = [e for e in keep.edits if e.startswith("description:")]
    assert len(descriptions) >= 2  # carried along the chain
    assert keep.replaced == len(descriptions) - 1
    html = render_report(trigger)
    section = html.split(f'id="step-{keep.index}"', 1)[1].split('<details class="unit"', 1)[0]
    assert section.count('<li class="replaced">') == keep.replaced
    assert f"only the last is in the candidate ({keep.replaced} replaced)" in section
    findings = (trigger / "findings.md").read_text()
    assert findings.count("replaced by step") == keep.replaced
    assert "- **Kept** 1 unit(s), edits: failure description x1" in findings
    cited = [c for u in s.units for e in u.proposed for c in e.citations if c.conversation]
    assert cited
    for c in cited:  # the query the agent was given and the scorer's feedback on its decision
        assert c.prompt and "the skill" in c.feedback
        assert f'<span class="muted">task:</span> {c.prompt}' in html.replace("&#39;", "'").replace(
            "&quot;", '"'
        )


def test_the_kept_commit_names_the_description_the_skill_holds(trigger: Path) -> None:
    """The kept version's commit (the report's Lineage row) names the description its candidate
    holds, not the ones the chain replaced, and says how many it replaced."""
    from skilltune.report.lineage import read_lineage

    keep = next(u for u in summarize(trigger).units if u.verdict == "keep")
    descriptions = [e for e in keep.edits if e.startswith("description:")]
    held = "description: " + load_skill(trigger / "best_skill").description
    assert len(descriptions) >= 2 and descriptions[-1] == held
    subject = next(v.subject for v in read_lineage(trigger / "skill-repo") if v.best)
    assert held in subject
    assert not any(replaced in subject for replaced in descriptions[:-1])
    assert f"replacing {len(descriptions) - 1} earlier descriptions of the chain" in subject
