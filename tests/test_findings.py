"""The findings bank: a finished run appends its entry to RUNDIR/findings.md and to --findings FILE,
once, however often it was stopped, resumed, or ended again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.progress import PlainReporter
from skilltune.report import summarize
from skilltune.review.findings import MARKER, entry_warnings, record_findings, run_id
from skilltune.rundir import RunDir
from skilltune.runfiles import FindingsRecord
from skilltune.training import resume, train
from tests.helpers import MOCK_SKILL, MOCK_SUITE

runner = CliRunner()


def _quiet() -> dict[str, Any]:
    return {"reporter": PlainReporter(quiet=True)}


def _count(path: Path, rid: str) -> int:
    return path.read_text().count(MARKER.format(rid))


def test_a_stopped_resumed_and_re_ended_run_appends_its_findings_once(tmp_path: Path) -> None:
    bank = tmp_path / "shared" / "findings.md"
    # carry="off": the run must exhaust its budget before its end, and the smallest budget train takes
    # (832) pays for a whole 3-step run under the default --carry screen (step 1 carried, not gated)
    settings: dict[str, Any] = dict(
        runs_dir=str(tmp_path / "runs"), max_steps=3, seed=1, findings=str(bank), carry="off"
    )
    first = train(MOCK_SUITE, MOCK_SKILL, tag="f", budget_rollouts=900, **settings, **_quiet())
    run = RunDir(tmp_path / "runs" / "f")
    assert first.state == "exhausted" and first.steps >= 1  # stopped before its end: nothing appended yet
    assert not run.findings_md.exists() and not bank.exists() and not run.findings_record.exists()

    done = resume(run.root, budget_rollouts=100_000, **_quiet())  # --findings kept from the first session
    assert done.state == "success", done.reason
    rid = run_id(run)
    assert _count(bank, rid) == 1 and _count(run.findings_md, rid) == 1
    entry = bank.read_text()
    for part in ("## f: ", "**Method**", "**Val**", "**Kept**", "**Rejected**", "**Cost**", "**Warnings**"):
        assert part in entry, part
    assert "**Held-out** (test, mixed, 3 rep(s), 14 tasks): S0 " in entry and "95% CI [" in entry

    # Killed after the entry went out but before TERMINAL: the resume ends the run again.
    terminal = run.terminal_path.read_text()
    run.terminal_path.unlink()
    again = resume(run.root, **_quiet())
    assert again.state == done.state and run.terminal_path.read_text() == terminal
    # ... and the end re-run by hand, even with findings.json lost: the markers hold.
    assert record_findings(run.root, bank) == []
    run.findings_record.unlink()
    assert record_findings(run.root, bank) == []
    assert _count(bank, rid) == 1 and _count(run.findings_md, rid) == 1
    assert {Path(t.path) for t in FindingsRecord.read(run.findings_record).appended} == {
        run.findings_md.resolve(),
        bank.resolve(),
    }
    with pytest.raises(UsageError, match="already ended"):
        resume(run.root, **_quiet())


def test_runs_share_one_findings_file_and_each_appends_its_own_entry(tmp_path: Path) -> None:
    bank = tmp_path / "bank.md"
    bank.write_text("# My notes\n\nkept by hand\n")
    for tag in ("a", "b"):
        result = runner.invoke(
            app,
            ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--tag", tag, "--max-steps", "1",
             "--seed", "2", "--runs-dir", str(tmp_path / "runs"), "--findings", str(bank), "-q"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    text = bank.read_text()
    assert text.startswith("# My notes\n\nkept by hand\n\n## a: ")
    ids = [run_id(RunDir(tmp_path / "runs" / tag)) for tag in ("a", "b")]
    assert ids[0] != ids[1] and all(text.count(MARKER.format(i)) == 1 for i in ids)
    assert text.index("## a: ") < text.index("## b: ")
    config = json.loads((tmp_path / "runs" / "a" / "config.json").read_text())
    assert config["findings"] == str(bank.resolve())


def test_a_findings_path_that_is_a_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--findings .* is a folder"):
        train(
            MOCK_SUITE,
            MOCK_SKILL,
            tag="x",
            runs_dir=str(tmp_path / "runs"),
            findings=str(tmp_path),
            **_quiet(),
        )
    assert not (tmp_path / "runs" / "x").exists()


def test_the_entry_lists_the_reports_warnings(tmp_path: Path) -> None:
    # 3 steps, seed 3: a run whose gates see val tasks whose replicates disagree (with seed 1 they
    # saw none once the gate stopped running the incumbent's next round ahead), so the report lists
    # flaky val tasks beside the flaky test tasks the bank alone used to list. carry="off": a gate in
    # each of the 3 steps (under the default --carry screen steps 1-2 carry their candidates ungated),
    # and one ask a step, whose candidates make the gates that see those tasks
    done = train(
        MOCK_SUITE, MOCK_SKILL, tag="w", runs_dir=str(tmp_path), max_steps=3, seed=3, carry="off", proposals=1,
        **_quiet(),
    )  # fmt: skip
    assert done.state == "success", done.reason
    run = RunDir(tmp_path / "w")
    listed = run.findings_md.read_text().split("- **Warnings**:\n", 1)[1]
    warnings = [line.removeprefix("  - ") for line in listed.splitlines() if line.startswith("  - ")]
    report = summarize(run.root).warnings
    assert warnings == report, (warnings, report)
    assert any(w.startswith("flaky test tasks: ") for w in report), report  # one the bank alone used to list
    assert any("flaky val task(s)" in w for w in report), report  # one the report alone used to list

    # A rollout a model judge scored: both name the judge's noise.
    folder = next(run.final.glob("rollouts/test/*/*_r0"))
    (folder / "judge.json").write_text("{}")
    report = summarize(run.root).warnings
    assert entry_warnings(run) == report
    assert "judge noise: 1 task(s) were scored by a model judge" in " ".join(report)
    # At the end of a training run (before TERMINAL), the ending given names how it ended.
    assert entry_warnings(run, ("blocked", "the judge is down")) == [
        "the run ended blocked: the judge is down",
        *report,
    ]
