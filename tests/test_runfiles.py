"""Run files: versioned on disk, migrated from older skilltune runs, refused from newer ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from skilltune.errors import UsageError
from skilltune.progress import PlainReporter
from skilltune.rundir import TERMINAL_STATES, RunDir, Terminal
from skilltune.runfiles import (
    SCHEMA_VERSION,
    UNIT_FILES,
    AuditFile,
    Comparison,
    FindingsRecord,
    JudgeFile,
    JudgeInputsFile,
    NewerRunFileError,
    OldRunFileError,
    PairedZStatistic,
    ReflectionsFile,
    ReplicateTStatistic,
    RolloutRecord,
    Round,
    RunConfigFile,
    RunFileError,
    SessionStart,
    SignFlipStatistic,
    SlowUpdateFile,
    StageDone,
    StrictStatistic,
    UnitRecord,
    Verdict,
    parse_event,
)
from skilltune.training import resume, train
from tests.helpers import MOCK_SKILL, MOCK_SKILL_16, MOCK_SUITE, MOCK_SUITE_16, REPO

FIXTURE = REPO / "tests" / "fixtures" / "run-schema1"
GOLDEN_DEMO = REPO / "tests" / "golden" / "demo_stdout.txt"


def _quiet() -> dict[str, Any]:
    return {"reporter": PlainReporter(quiet=True)}


def _schema1_run(tmp_path: Path) -> RunDir:
    """The run made by skilltune before run files were versioned, its paths pointed at this checkout's
    copy of the 16-val-task demo it was made on."""
    with tarfile.open(FIXTURE / "run.tar.gz") as archive:
        archive.extractall(tmp_path / "runs", filter="data")
    run = RunDir(tmp_path / "runs" / "old")
    config = json.loads(run.config.read_text())
    assert config["schema_version"] == 1
    config |= {"suite": str(MOCK_SUITE_16), "skill": str(MOCK_SKILL_16), "runs_dir": str(tmp_path / "runs")}
    run.config.write_text(json.dumps(config, indent=2))
    return run


def test_a_schema_1_run_resumes_to_the_ending_the_old_skilltune_gave(tmp_path: Path) -> None:
    run = _schema1_run(tmp_path)
    assert "schema_version" not in json.loads(run.seed_json.read_text())  # schema 1 had none here
    result = resume(run.root, budget_rollouts=5000, **_quiet())
    expected = FIXTURE / "expected"
    assert run.results.read_text() == (expected / "results.tsv").read_text()
    assert run.terminal_path.read_text() == (expected / "TERMINAL").read_text()
    ours, theirs = (
        json.loads(run.comparison.read_text()),
        json.loads((expected / "comparison.json").read_text()),
    )
    for key in ("schema_version", "suite"):  # the version written now, and where the suite lies
        ours.pop(key), theirs.pop(key)
    for arm in ours["arms"].values():  # schema 8's trigger statistics: none, the suite has no trigger task
        assert arm.pop("trigger") is None
    assert ours == theirs
    assert result.state == "success"
    # the files the old run wrote are read through migration, the new ones carry this version
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").schema_version == SCHEMA_VERSION
    assert json.loads((run.unit_dir("step", 4) / "step.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert any(isinstance(e, SessionStart) for e in run.read_journal())  # old lines migrate too


@pytest.mark.parametrize(
    ("relative", "kind"),
    [
        ("steps/step_0001/step.json", "unit"),
        ("steps/step_0001/gate.json", "gate"),
        ("seed.json", "seed"),
        ("config.json", "config"),
    ],
)
def test_a_run_file_from_a_newer_skilltune_is_refused_and_nothing_is_written(
    tmp_path: Path, relative: str, kind: str
) -> None:
    run = _schema1_run(tmp_path)
    path = run.root / relative
    raw = json.loads(path.read_text())
    raw["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(raw))
    before = {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file() and ".git" not in p.parts}
    with pytest.raises(
        NewerRunFileError, match=rf"{path.name} was written by a newer skilltune.*upgrade skilltune"
    ):
        resume(run.root, budget_rollouts=5000, **_quiet())
    after = {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before, kind


def test_the_cli_says_what_to_do_about_a_newer_run_and_exits_2(tmp_path: Path) -> None:
    run = _schema1_run(tmp_path)
    raw = json.loads(run.seed_json.read_text()) | {"schema_version": SCHEMA_VERSION + 5}
    run.seed_json.write_text(json.dumps(raw))
    proc = subprocess.run(
        [sys.executable, "-m", "skilltune.cli", "resume", str(run.root), "--budget-rollouts", "5000", "-q"],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "seed.json was written by a newer skilltune" in proc.stderr and "Traceback" not in proc.stderr


def test_migrations_of_schema_1() -> None:
    # record.json of schema 1 (it carried a version) reads as the current model
    record = RolloutRecord.parse(
        {"schema_version": 1, "task_id": "t", "split": "val", "phase": "gate", "replicate": 0, "seed": 0,
         "candidate": "c" * 64, "agent": "mock", "options_hash": "o", "task_hash": "h", "status": "ok",
         "wall_s": 0.1, "started_at": "2026-01-01T00:00:00+00:00"},
        "record.json",
    )  # fmt: skip
    assert record.schema_version == SCHEMA_VERSION
    # gate.json of schema 1 carried no version
    verdict = Verdict.parse(
        {"decision": "accept", "reason": "r", "metric": "mixed", "val_candidate": 0.5, "val_incumbent": 0.4,
         "rounds": [], "rollouts": 4},
        "gate.json",
    )  # fmt: skip
    assert verdict.accept
    # schema 1 declared a "crash" verdict no code wrote: such a record cannot be read as a unit
    unit = {"schema_version": 1, "kind": "step", "index": 1, "step": 1, "epoch": 1, "candidate": "c",
            "parent": "p", "verdict": "crash", "decision": "reject", "reason": "r", "metric": "mixed"}  # fmt: skip
    with pytest.raises(OldRunFileError, match="verdict 'crash'"):
        UnitRecord.parse(unit, "step.json")
    assert UnitRecord.parse(unit | {"verdict": "discard"}, "step.json").verdict == "discard"
    # journal lines of schema 1 had no version; a newer one is refused
    assert isinstance(
        parse_event({"ts": "2026-01-01T00:00:00+00:00", "event": "session_start", "pid": 1}, "j"),
        SessionStart,
    )
    with pytest.raises(NewerRunFileError):
        parse_event(
            {"schema_version": SCHEMA_VERSION + 1, "ts": "x", "event": "session_start", "pid": 1}, "j"
        )


def test_files_of_schema_4_read_as_schema_5_with_judging_defaults() -> None:
    """Schema 5 added judged scoring: files of schema 4 (explicitly built here) read unchanged, every
    new field at its default; a judge.json or judge_inputs.json claiming an older version is refused
    (they did not exist before), one from a newer skilltune too."""
    record = RolloutRecord.parse(
        {"schema_version": 4, "task_id": "t", "split": "val", "phase": "gate", "replicate": 0, "seed": 0,
         "candidate": "c" * 64, "agent": "mock", "options_hash": "o", "task_hash": "h", "status": "ok",
         "wall_s": 0.1, "attempt_history": [], "started_at": "2026-01-01T00:00:00+00:00"},
        "record.json",
    )  # fmt: skip
    assert (record.schema_version, record.judge, record.pending_status) == (SCHEMA_VERSION, None, None)
    verdict = Verdict.parse(
        {"schema_version": 4, "decision": "accept", "reason": "r", "metric": "mixed", "val_candidate": 0.5,
         "val_incumbent": 0.4, "rounds": [], "rollouts": 4, "alpha": 0.01},
        "gate.json",
    )  # fmt: skip
    assert verdict.secondary is None and verdict.accept
    config = RunConfigFile.parse(
        {"schema_version": 4, "suite": "/s", "skill": "/k", "tag": "t", "suite_hash": "h", "contract": "c"},
        "config.json",
    )
    assert (config.prompt_variant, config.judge_options) == ("cheap", {})
    event = parse_event(
        {"schema_version": 4, "ts": "2026-01-01T00:00:00+00:00", "event": "stage", "unit": "step_0001",
         "stage": "gate", "seconds": 1.0, "rollouts": 4},
        "journal.jsonl",
    )  # fmt: skip
    assert isinstance(event, StageDone) and event.judge_cost_usd is None
    judged = {"key": "k", "provider": "openai", "model": "m", "mode": "rubric", "samples": []}
    assert JudgeFile.parse({"schema_version": SCHEMA_VERSION, **judged}, "judge.json").key == "k"
    with pytest.raises(
        OldRunFileError, match=r"judge\.json claims a run schema from before judge\.json existed"
    ):
        JudgeFile.parse({"schema_version": 4, **judged}, "judge.json")
    with pytest.raises(OldRunFileError, match=r"judge_inputs\.json"):
        JudgeInputsFile.parse({"schema_version": 2, "files": {}}, "judge_inputs.json")
    with pytest.raises(NewerRunFileError):
        JudgeFile.parse({"schema_version": SCHEMA_VERSION + 1, **judged}, "judge.json")


def test_gate_json_of_schema_5_migrates_to_the_task_level_verdict() -> None:
    """Schema 6 added the task-level test's fields; a schema-5 verdict (the per-replicate t test) is
    read as what it was, never re-decided; a newer one is refused."""
    rounds = [{"index": 0, "replicates": 1, "candidate": 0.6, "incumbent": 0.4, "n_pairs": 20, "rollouts": 40,
               "statistic": {"alpha": 0.016, "n": 20, "t": 3.1, "bound_t": 2.9, "upper": 0.3}}]  # fmt: skip
    old = {"schema_version": 5, "decision": "accept", "reason": "gain +0.200 crossed the bound", "metric": "mixed",
           "val_candidate": 0.6, "val_incumbent": 0.4, "rounds": rounds, "rollouts": 40, "alpha": 0.016}  # fmt: skip
    verdict = Verdict.parse(old, "gate.json")
    assert verdict.schema_version == SCHEMA_VERSION >= 6
    assert verdict.test == "replicate-t" and verdict.accept and verdict.alpha == 0.016
    assert verdict.reused == 0 and verdict.prefetched == 0 and verdict.rounds[0].pairs == []
    one_pass = old | {"rounds": [rounds[0] | {"statistic": {"mean_diff": 0.2}}]}
    assert Verdict.parse(one_pass, "gate.json").test is None
    for older in (
        1,
        2,
        3,
        4,
    ):  # gate.json kept its shape from schema 1 to 5 (5 added an optional field): each migrates the same way
        assert Verdict.parse(old | {"schema_version": older}, "gate.json").test == "replicate-t"
    with pytest.raises(NewerRunFileError):
        Verdict.parse(old | {"schema_version": SCHEMA_VERSION + 1}, "gate.json")


def test_reflections_of_schema_6_read_as_schema_7_with_nothing_dropped() -> None:
    """Schema 7 keeps the edits dropped before the merge (an edit citing no trajectory); a schema-6
    reflections.json dropped none, and a step record of schema 6 reads unchanged."""
    edit = {"op": "append", "text": "- A rule.", "support": ["train-a#r0"]}
    old = {"schema_version": 6, "edits": [edit], "calls": [], "notes": {}}
    reflections = ReflectionsFile.parse(old, "reflections.json")
    assert reflections.schema_version == SCHEMA_VERSION >= 7
    assert reflections.dropped == [] and [e.text for e in reflections.edits] == ["- A rule."]
    for older in (3, 4, 5):
        assert ReflectionsFile.parse(old | {"schema_version": older}, "reflections.json").dropped == []
    dropped = {"edit": edit | {"support": ["<trajectory id>"]}, "reason": "cites no trajectory"}
    current = ReflectionsFile.parse(old | {"schema_version": 7, "dropped": [dropped]}, "reflections.json")
    assert current.dropped[0].reason == "cites no trajectory"
    with pytest.raises(NewerRunFileError):
        ReflectionsFile.parse(old | {"schema_version": SCHEMA_VERSION + 1}, "reflections.json")


def test_a_damaged_run_file_names_itself_and_the_fix(tmp_path: Path) -> None:
    run = _schema1_run(tmp_path)
    path = run.unit_dir("step", 2) / "step.json"
    path.write_text('{"kind": "step"')
    with pytest.raises(UsageError, match=r"step_0002/step.json: not valid JSON"):
        resume(run.root, budget_rollouts=5000, **_quiet())


def test_make_demo_prints_what_it_printed_before_the_run_files_changed(tmp_path: Path) -> None:
    """The golden output is `make demo`'s (same command). Regenerated on purpose when the gate became
    task-level (issue 12): the table's gate rollouts changed, the end did not (success, the same best
    skill and held-out gain), and the gate's share of training rollouts was added. Regenerated again
    when the demo's val split grew from 16 to 48 tasks and `make demo` dropped `--alpha 0.2` (issue 20):
    the val scores and rollouts changed, the best skill and the held-out gain did not. And again when
    the gate stopped running the incumbent's next round ahead: the units' rollouts and the gate's
    share changed (748 -> 604 training rollouts), nothing else did. And again when `--carry screen`
    became the default (issue 20): steps 1 to 3 carry their candidates ungated and step 4 keeps them
    at once (604 -> 348 training rollouts, 72% -> 55% in the gate); the held-out gain stays above 0
    (+0.387 [+0.120, +0.653] -> +0.385 [+0.119, +0.651]), the best skill is the one carrying them.
    And again when the table showed those steps as ``carried`` (step.json's decision ``defer``), not
    results.tsv's ``discard``: only their verdict cells changed."""
    proc = subprocess.run(
        [sys.executable, "-m", "skilltune.cli", "train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL),
         "--agent", "mock", "--proposer", "mock", "--tag", "demo", "--max-steps", "8", "--seed", "1", "--force"],
        capture_output=True, text=True, check=False, cwd=tmp_path, env={**os.environ, "COLUMNS": "100"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == GOLDEN_DEMO.read_text()


def test_a_new_run_writes_every_file_at_the_current_version(tmp_path: Path) -> None:
    train(MOCK_SUITE, MOCK_SKILL, tag="v", runs_dir=str(tmp_path), max_steps=1, **_quiet())
    run = RunDir(tmp_path / "v")
    files = [
        run.config,
        run.seed_json,
        run.comparison,
        *[p for p in run.steps.rglob("*.json") if p.name in UNIT_FILES or p.name == "record.json"],
        *run.final.rglob("record.json"),
    ]
    assert {p.name for p in files} >= {"step.json", "gate.json", "reflections.json", "record.json"}
    versions = {json.loads(p.read_text())["schema_version"] for p in files}
    assert versions == {SCHEMA_VERSION}
    lines = [json.loads(line) for line in run.journal_path.read_text().splitlines()]
    assert {line["schema_version"] for line in lines} == {SCHEMA_VERSION}


def test_schema_3_audit_findings_and_the_findings_setting(tmp_path: Path) -> None:
    # config.json of schema 2 had no `findings`: it reads with none
    raw2 = {
        "schema_version": 2, "suite": "/s", "skill": "/k", "tag": "t", "suite_hash": "h", "contract": "c",
    }  # fmt: skip
    stored = RunConfigFile.parse(raw2, "config.json")
    assert stored.schema_version == SCHEMA_VERSION and stored.findings is None
    # audit.json and findings.json first exist in schema 3: a file claiming an older version was not
    # written by skilltune, and is refused with what to do
    audit2 = {"schema_version": 2, "clean": True, "checks": ["leak"]}
    with pytest.raises(
        OldRunFileError,
        match=r"audit\.json claims a run schema from before audit\.json existed: delete it and run `skilltune audit",
    ):
        AuditFile.parse(audit2, "audit.json")
    with pytest.raises(OldRunFileError, match=r"findings\.json claims a run schema from before"):
        FindingsRecord.parse({"schema_version": 2, "run_id": "x"}, "findings.json")
    assert AuditFile.parse(audit2 | {"schema_version": 3}, "audit.json").clean
    # a newer audit.json in a run stops a resume before anything is written
    run = _schema1_run(tmp_path)
    run.audit.write_text(json.dumps(audit2 | {"schema_version": SCHEMA_VERSION + 1}))
    before = {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file() and ".git" not in p.parts}
    with pytest.raises(NewerRunFileError, match=r"audit\.json was written by a newer skilltune"):
        resume(run.root, budget_rollouts=5000, **_quiet())
    after = {p: p.read_bytes() for p in run.root.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before


def test_records_of_schema_2_migrate_without_attempt_history_and_calls_without_cost() -> None:
    raw = {"schema_version": 2, "task_id": "t", "split": "val", "phase": "gate", "replicate": 0, "seed": 0,
           "candidate": "c" * 64, "agent": "mock", "options_hash": "o", "task_hash": "h",
           "status": "ok", "wall_s": 0.1, "attempts": 3, "started_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    assert "attempt_history" not in raw
    record = RolloutRecord.parse(raw, "record.json")
    assert record.schema_version == SCHEMA_VERSION and record.attempts == 3 and record.attempt_history == []
    call = {"role": "analyst", "model": "m", "prompt": "p", "response": "r", "tokens_in": 1, "tokens_out": 2}
    reflections = ReflectionsFile.parse(
        {"schema_version": 2, "edits": [], "calls": [call]}, "reflections.json"
    )
    assert reflections.calls[0].cost_usd is None and reflections.calls[0].notes == []
    slow = SlowUpdateFile.parse({"schema_version": 2, "guidance": "g", "calls": [call]}, "slow_update.json")
    assert slow.calls[0].tokens_out == 2 and slow.calls[0].cost_usd is None
    with pytest.raises(NewerRunFileError):
        RolloutRecord.parse(raw | {"schema_version": SCHEMA_VERSION + 1}, "record.json")


def test_a_retried_rollout_keeps_each_failed_attempt(tmp_path: Path) -> None:
    """Two scripted infra errors, then a success: the record says how each failed attempt ended, and
    their events lie in the record folder."""
    from skilltune.measure.evaluate import evaluate
    from skilltune.rollout.runner import RetryPolicy
    from tests.helpers import rule_task, write_suite

    task = rule_task("flaky", ["r1"], mock_infra_errors=2)
    suite = write_suite(tmp_path / "suite", [task], [task | {"id": "flaky-val"}])
    evaluate(suite, None, out=tmp_path / "out", retry=RetryPolicy(max_attempts=4, base_s=0, cap_s=0))
    (path,) = (tmp_path / "out").glob("rollouts/eval/*/*/record.json")
    record = RolloutRecord.read(path)
    assert record.status == "ok" and record.attempts == 3 and record.score is not None
    assert [(a.attempt, a.status, a.stalled) for a in record.attempt_history] == [
        (1, "infra_error", False),
        (2, "infra_error", False),
    ]
    assert all("scripted infra error" in (a.reason or "") for a in record.attempt_history)
    for attempt in record.attempt_history:
        assert attempt.events is not None and (path.parent / attempt.events).is_file()


def test_a_record_of_schema_6_reads_with_a_score_without_feedback() -> None:
    """Schema 7 gave a score its scorer's feedback: a record.json of schema 6 (its score has none) reads
    with empty feedback and is written back as schema 7 with the field."""
    score = {"hard": 0, "soft": 0.5, "mixed": 0.25, "checks": ["missing:owner"], "contract": "c" * 64}
    raw = {"schema_version": 6, "task_id": "t", "split": "train", "phase": "train", "replicate": 0, "seed": 0,
           "candidate": "c" * 64, "agent": "mock", "options_hash": "o", "task_hash": "h", "status": "ok",
           "wall_s": 0.1, "started_at": "2026-01-01T00:00:00+00:00", "score": score}  # fmt: skip
    record = RolloutRecord.parse(raw, "record.json")
    assert record.schema_version == SCHEMA_VERSION >= 7
    assert (
        record.score is not None and record.score.feedback == "" and record.score.checks == ["missing:owner"]
    )
    with pytest.raises(NewerRunFileError):
        RolloutRecord.parse(raw | {"schema_version": SCHEMA_VERSION + 1}, "record.json")


def test_a_record_and_comparison_of_schema_7_read_without_a_load_decision() -> None:
    """Schema 8 records the agent's load decision and each arm's trigger statistics: files of schema 7
    read with the decision unknown and no statistics."""
    raw = {"schema_version": 7, "task_id": "t", "split": "val", "phase": "eval", "replicate": 0, "seed": 0,
           "candidate": "c" * 64, "agent": "mock", "options_hash": "o", "task_hash": "h", "status": "ok",
           "wall_s": 0.1, "started_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    record = RolloutRecord.parse(raw, "record.json")
    assert (record.schema_version, record.skill_loaded) == (SCHEMA_VERSION, None)
    assert RolloutRecord.parse(raw | {"schema_version": 8, "skill_loaded": True}, "r").skill_loaded is True
    arm = {"skill_hash": "h", "hard_acc": 1.0, "soft_acc": 1.0, "mixed": 1.0, "n_tasks": 1, "n_rollouts": 1,
           "n_scored": 1, "statuses": {"ok": 1}, "per_task": {"t": [1.0]}}  # fmt: skip
    comparison = {"schema_version": 7, "suite": "s", "split": "test", "agent": "mock", "reps": 1,
                  "metric": "mixed", "contract": None, "contaminated": False, "arms": {"a": arm},
                  "pairs": []}  # fmt: skip
    assert Comparison.parse(comparison, "comparison.json").arms["a"].trigger is None


def test_a_record_of_schema_7_reads_as_unsealed_unless_its_agent_starts_no_process() -> None:
    """Schema 8 records whether a rollout was sealed (``sandbox``); before it none was: a CLI's rollout
    of schema 7 reads as ``none`` (the audit flags it), the mock's and the chat targets' as ``inert``."""
    raw = {"schema_version": 7, "task_id": "t", "split": "train", "phase": "train", "replicate": 0, "seed": 0,
           "candidate": "c" * 64, "agent": "claude", "options_hash": "o", "task_hash": "h", "status": "ok",
           "wall_s": 0.1, "started_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    assert RolloutRecord.parse(raw, "record.json").sandbox == "none"
    for agent in ("mock", "openai", "anthropic"):
        assert RolloutRecord.parse(raw | {"agent": agent}, "record.json").sandbox == "inert"
    assert (
        RolloutRecord.parse(raw | {"schema_version": 8, "sandbox": "bwrap"}, "record.json").sandbox == "bwrap"
    )


def test_terminal_reads_every_state_it_writes_and_a_foreign_line_as_a_crash(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    assert run.terminal() is None
    for state in TERMINAL_STATES:
        run.write_terminal(state, "why:\n on two lines")
        assert run.terminal() == Terminal(state, "why: on two lines")
    # a state skilltune never writes (a hand edit): every reader (report, status, resume, supervise)
    # takes it for a crash and keeps the whole line
    run.terminal_path.write_text("finished: all good\n")
    assert run.terminal() == Terminal("crash", "finished: all good")


@pytest.mark.parametrize(
    ("statistic", "kind"),
    [
        ({"mean_diff": 0.25}, StrictStatistic),
        ({"mean_diff": 0.25, "se": 0.1, "z": 2.5}, PairedZStatistic),
        ({"mean_diff": 0.0, "se": 0.0, "z": None}, PairedZStatistic),
        (
            {
                "alpha": 0.05,
                "tasks": 12,
                "nonzero": 9,
                "mean_gain": 0.2,
                "sd": 0.3,
                "p": 0.0123,
                "crossed": 3,
                "budget": 5,
                "reference": 4096,
                "upper": None,
            },
            SignFlipStatistic,
        ),
        (
            {"alpha": 0.02, "n": 16, "t": 2.2, "bound_t": 3.4, "bound_z": 2.9, "upper": 0.28},
            ReplicateTStatistic,
        ),
        ({}, type(None)),
    ],
)
def test_a_gate_rounds_statistic_reads_as_its_gates_model_and_writes_back_unchanged(
    tmp_path: Path, statistic: dict[str, Any], kind: type
) -> None:
    raw = {"index": 0, "replicates": 1, "candidate": 0.6, "incumbent": 0.4, "n_pairs": 12, "rollouts": 24,
           "reused": 0, "statistic": statistic, "pairs": []}  # fmt: skip
    verdict = Verdict(decision="reject", reason="r", metric="mixed", val_candidate=0.6, val_incumbent=0.4,
                      rounds=[Round.model_validate(raw)], rollouts=24)  # fmt: skip
    assert type(verdict.rounds[0].statistic) is kind
    verdict.write(tmp_path / "gate.json")
    assert json.loads((tmp_path / "gate.json").read_text())["rounds"][0] == raw  # gate.json keeps its shape
    assert Verdict.read(tmp_path / "gate.json") == verdict


def test_a_statistic_of_no_known_gate_is_refused_naming_the_file(tmp_path: Path) -> None:
    raw = {"schema_version": SCHEMA_VERSION, "decision": "reject", "reason": "r", "metric": "mixed",
           "val_candidate": None, "val_incumbent": None, "rollouts": 0,
           "rounds": [{"index": 0, "replicates": 1, "candidate": None, "incumbent": None, "n_pairs": 0,
                       "rollouts": 0, "statistic": {"gain": 0.1}}]}  # fmt: skip
    (tmp_path / "gate.json").write_text(json.dumps(raw))
    with pytest.raises(RunFileError, match=r"gate\.json"):
        Verdict.read(tmp_path / "gate.json")


def test_a_schema_9_run_with_a_carried_step_reads_it_as_carried_and_resumes_as_it_ran(tmp_path: Path) -> None:
    """Schema 9 wrote a step carried on ungated as verdict ``discard``, decision ``defer``, and its
    config.json named no ``proposals`` (every step asked once). Such a run, stopped after its carried
    step 1, reads that step as ``carried`` (step.json migrated on read, results.tsv rebuilt from it) and
    resumes to the ending of an uninterrupted run of one ask a step."""
    from tests.helpers import stopped_run

    run = stopped_run(tmp_path, "old", 3, MOCK_SUITE_16, skill=MOCK_SKILL_16, seed=13, proposals=1)
    step = run.unit_dir("step", 1) / "step.json"
    raw = json.loads(step.read_text())
    assert (raw["verdict"], raw["decision"]) == ("carried", "carry")
    for path in [*run.root.rglob("*.json"), run.journal_path]:
        if ".git" in path.parts or ("record.json" in path.name and "rollouts" not in path.parts):
            continue
        if path.name.endswith(".jsonl"):
            lines = [json.loads(line) | {"schema_version": 9} for line in path.read_text().splitlines()]
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
            continue
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "schema_version" in data:
            path.write_text(json.dumps(data | {"schema_version": 9}))
    config = json.loads(run.config.read_text())
    del config["proposals"]
    run.config.write_text(json.dumps(config))
    step.write_text(json.dumps(json.loads(step.read_text()) | {"verdict": "discard", "decision": "defer"}))
    rows = run.results.read_text().splitlines()
    run.results.write_text("\n".join([rows[0], rows[1].replace("\tcarried\t", "\tdiscard\t")]) + "\n")

    record = UnitRecord.read(step)
    assert (record.verdict, record.decision, record.carried_on) == ("carried", "carry", True)
    assert RunConfigFile.read(run.config).proposals == 1
    (run.root / "STOP").unlink()
    resume(run.root, reporter=PlainReporter(quiet=True))
    assert run.results.read_text().splitlines()[1].split("\t")[5] == "carried"
    train(
        MOCK_SUITE_16, MOCK_SKILL_16, tag="new", runs_dir=str(tmp_path), max_steps=3, seed=13, proposals=1,
        gate="strict", reporter=PlainReporter(quiet=True),
    )  # fmt: skip
    assert run.results.read_text() == (tmp_path / "new" / "results.tsv").read_text()
