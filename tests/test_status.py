"""`skilltune status`: one screen for a finished, stopped, blocked or live run, read from its files."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

import skilltune
from skilltune.cli import app
from skilltune.report import summarize
from skilltune.rollout.runner import RetryPolicy
from skilltune.runfiles import Comparison, SessionStart
from tests.helpers import rule_task, write_skill, write_suite
from tests.report_runs import results_rows, train_demo, train_stopped, tree_digest


def status(run: Path) -> str:
    result = CliRunner().invoke(app, ["status", str(run)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_status_of_a_finished_run(tmp_path: Path) -> None:
    run = train_demo(tmp_path)
    before = tree_digest(run)
    screen = status(run)
    assert tree_digest(run) == before  # status only reads
    rows = results_rows(run)
    kept = [r for r in rows if r["verdict"] == "keep"]
    pair = Comparison.read(run / "comparison.json").pairs[0]
    assert screen.startswith("demo  success")
    assert "8 of 8 steps (9 of 9 units, 1 kept)" in screen  # the default carries steps 1-3 into step 4
    assert f"-> best {float(kept[-1]['val_candidate']):.3f}" in screen
    assert f"best - S0 on test: {pair.diff:+.3f}" in screen
    assert "infra errors  none" in screen and "budget        none set" in screen
    for row in rows[-5:]:  # the last verdicts
        assert f"{row['phase']}_" in screen and row["verdict"] in screen
    assert "ETA" not in screen  # a finished run has none
    # steps 1-3 were carried on ungated (results.tsv: discard): the verdicts say carried, in cyan
    from rich.console import Console

    from skilltune.report.status import status_screen

    early = summarize(run, depth="light")
    early.units = early.units[:4]
    console = Console(width=200, record=True, force_terminal=True, color_system="standard")
    console.print(status_screen(early))
    text = console.export_text(styles=True)
    for name in ("step_0001", "step_0002", "step_0003"):
        line = next(line for line in text.splitlines() if name in line)
        assert "\x1b[36mcarried\x1b[0m" in line and "discard" not in line, line


def test_status_of_a_stopped_run_with_a_budget(tmp_path: Path) -> None:
    run = train_stopped(tmp_path, "early", budget_rollouts=3000)
    screen = status(run)
    assert "early  stopped" in screen and "0 of 8 steps" in screen
    spent = len(list(run.rglob("record.json")))
    assert f"budget rollouts  {3000 - spent:,} left of 3,000" in screen


def test_status_shows_infra_errors_of_a_blocked_run(tmp_path: Path) -> None:
    # The seed lacks the rule, so the mock proposer has an edit to gate, and the gate's batch keeps
    # an infra error after its retries: no gate decides on it, the run ends blocked. Six val tasks:
    # with fewer than five, a decision at the run's first level (0.033) cannot accept and runs none.
    rules = ["state-the-rule"]
    pool = [{"id": "r", "text": "- state-the-rule", "answers": ["symptom of missing state-the-rule"]}]
    suite = write_suite(
        tmp_path / "suite",
        [rule_task(f"t{i}", rules) for i in range(3)],
        [*(rule_task(f"v{i}", rules) for i in (0, 2, 3, 4, 5)), rule_task("v1", rules, mock_infra_errors=99)],
        config={"proposer_pool": pool},
    )
    skill = write_skill(tmp_path / "skill", "Be brief.")
    skilltune.train(
        suite, skill, tag="flaky", runs_dir=str(tmp_path / "runs"), max_steps=2, proposer="mock",
        retry=RetryPolicy(max_attempts=2, base_s=0, cap_s=0),
    )  # fmt: skip
    run = tmp_path / "runs" / "flaky"
    screen = status(run)
    assert "flaky  blocked" in screen and "infra errors remain in the gate batch" in screen
    errors = sum(1 for p in run.rglob("record.json") if '"infra_error"' in p.read_text())
    assert errors > 0 and f"infra errors  {errors} infra_error" in screen
    assert "v1: infra_error: mock: scripted infra error" in screen


def test_status_of_a_live_run_names_its_unit_and_an_eta(tmp_path: Path) -> None:
    """A run whose process is alive (this one) and whose unit has started but not finished."""
    run = train_demo(tmp_path)
    # Make it look as it did mid-run: the last unit without its record, and a session still open.
    (run / "TERMINAL").unlink()
    (run / "steps" / "step_0008" / "step.json").unlink()
    with (run / "journal.jsonl").open("a") as journal:
        journal.write(SessionStart(pid=os.getpid()).model_dump_json() + "\n")
    s = summarize(run, depth="rollouts")
    assert s.state == "running" and s.live
    assert s.units[-1].name == "step_0008" and s.units[-1].verdict == "running"
    assert s.eta_seconds is not None and s.eta_seconds > 0
    screen = status(run)
    assert "running" in screen and "now           step_0008" in screen and "ETA" in screen


def test_status_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["status", str(tmp_path)])
    assert result.exit_code == 2 and "not a run directory" in result.output
    assert list(tmp_path.iterdir()) == []


def test_summaries_agree_across_depths(tmp_path: Path) -> None:
    """The list of runs reads little (``light``); status and report read every record: same figures."""
    run = train_demo(tmp_path, max_steps=3)
    full = summarize(run)
    for depth in ("light", "rollouts"):  # the two lighter reads
        s = summarize(run, depth=depth)
        assert (s.state, s.best_val, s.seed_val, s.kept, s.steps_done, s.gain) == (
            full.state, full.best_val, full.seed_val, full.kept, full.steps_done, full.gain,
        )  # fmt: skip
        assert (s.totals.rollouts, s.totals.tokens) == (full.totals.rollouts, full.totals.tokens)
