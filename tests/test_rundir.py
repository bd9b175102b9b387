"""The run directory (skilltune/rundir.py): its lock, TERMINAL, results.tsv rebuilt from the unit
records, the journal, and check_files before a resume writes anything."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skilltune.errors import UsageError
from skilltune.rundir import RESULTS_HEADER, RunDir
from skilltune.runfiles import RunFileError, RunStart, SessionEnd
from skilltune.training import resume, train
from tests.helpers import FAST, MOCK_SKILL, MOCK_SUITE, quiet, tree


@pytest.fixture
def run(finished_run: Path, tmp_path: Path) -> RunDir:
    """A copy of the finished mock run, to change."""
    shutil.copytree(finished_run, tmp_path / "done")
    return RunDir(tmp_path / "done")


def test_the_lock_is_held_once_and_names_its_holder(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "runs" / "t")
    with run.lock() as held:
        assert held.path == tmp_path / "runs" / ".t.lock"
        assert held.path.read_text() == str(os.getpid())
        with pytest.raises(
            UsageError, match=rf"runs/t is in use by another skilltune process \(pid {os.getpid()}\)"
        ):
            run.lock().acquire()  # a second open of the lock file: flock refuses it too
    with run.lock():  # released on leaving: taken again at once
        pass


def test_terminal_is_one_line_read_back_as_state_and_reason(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r")
    assert run.terminal() is None
    run.root.mkdir()
    run.write_terminal("stopped", "interrupted:\n  resume with\tskilltune resume r")
    assert run.terminal_path.read_text() == "stopped: interrupted: resume with skilltune resume r\n"
    assert run.terminal() == ("stopped", "interrupted: resume with skilltune resume r")
    with pytest.raises(ValueError, match="unknown terminal state 'done'"):
        run.write_terminal("done", "x")  # type: ignore[arg-type]  # the point: refused at run time too
    assert run.terminal() == ("stopped", "interrupted: resume with skilltune resume r")


def test_results_rows_are_rebuilt_from_the_unit_records(run: RunDir) -> None:
    """One row per unit record, in the order given, cells flattened to one line; rewriting is idempotent."""
    records = [r for i in (1, 2) if (r := run.unit_record("step", i)) is not None]
    assert len(records) == 2
    written = run.results.read_text()
    run.results.unlink()
    run.write_results(records)
    assert run.results.read_text() == written  # what the run wrote is what its records give
    run.write_results(records)
    assert run.results.read_text() == written
    odd = records[0].model_copy(
        update={"edits": [], "reason": "no edit:\tthe proposer\nsaid nothing", "val_candidate": 2 / 3}
    )
    run.write_results([odd])
    header, row = run.results.read_text().splitlines()
    assert tuple(header.split("\t")) == RESULTS_HEADER
    cells = dict(zip(RESULTS_HEADER, row.split("\t"), strict=True))
    assert cells["description"] == "no edit: the proposer said nothing"
    assert cells["val_candidate"] == "0.666667" and cells["edits"] == "0"
    assert cells["candidate"] == records[0].candidate[:12] and cells["step"] == "1"


def test_a_results_row_names_the_edits_the_candidate_holds(run: RunDir) -> None:
    """Past three edits the row says how many more; a description the chain replaced is left out."""
    found = run.unit_record("step", 1)
    assert found is not None
    unit = found.model_copy(update={"verdict": "keep", "carried": None, "carried_edits": 0})
    rules = [f"append: - Rule {i}." for i in range(1, 5)]
    cells = unit.model_copy(update={"edits": rules}).row()
    assert cells["description"] == "append: - Rule 1.; append: - Rule 2.; append: - Rule 3.; and 1 more edit"
    chain = ["description: Old one.", "append: - Rule 1.", "description: Older two.", "description: Kept."]
    cells = unit.model_copy(update={"edits": chain}).row()
    assert cells["description"] == (
        "append: - Rule 1.; description: Kept. (replacing 2 earlier descriptions of the chain)"
    )
    assert cells["edits"] == 4


def test_check_files_reads_every_run_file_and_names_a_damaged_one(run: RunDir) -> None:
    run.check_files()  # a finished run of this skilltune reads clean
    gate = run.unit_dir("step", 1) / "gate.json"
    gate.write_text(gate.read_text()[:-20])
    with pytest.raises(RunFileError, match=rf"{gate}: not valid JSON"):
        run.check_files()
    gate.unlink()
    step = run.unit_dir("step", 2) / "step.json"
    raw = json.loads(step.read_text())
    step.write_text(json.dumps(raw | {"schema_version": 99}))
    with pytest.raises(RunFileError, match=str(step)):
        run.check_files()


def test_the_journal_skips_a_torn_line_and_refuses_an_unknown_event(run: RunDir) -> None:
    events = run.read_journal()
    assert isinstance(events[0], RunStart) and isinstance(events[-1], SessionEnd)
    with run.journal_path.open("a") as handle:
        handle.write('{"event": "session_end", "at": ')  # a kill mid-write
    assert len(run.read_journal()) == len(events)
    with run.journal_path.open("a") as handle:
        handle.write('\n{"event": "no-such-event"}\n')
    with pytest.raises(RunFileError, match=rf"journal.jsonl:{len(events) + 2}: not a journal event"):
        run.read_journal()


def test_run_lock_beside_the_run_dir_blocks_force(tmp_path: Path) -> None:
    """The lock is runs/.TAG.lock; while held, train --force refuses ("in use"), stages nothing, deletes nothing."""
    train(MOCK_SUITE, MOCK_SKILL, tag="t", runs_dir=str(tmp_path), max_steps=1, reporter=quiet(), **FAST)
    run = RunDir(tmp_path / "t")
    assert run.lock().path == tmp_path / ".t.lock"
    before = tree(run.root)
    results = run.results.read_text()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time;f=open(sys.argv[1],'a+');fcntl.flock(f,fcntl.LOCK_EX);"
            "print('locked',flush=True);time.sleep(30)",
            str(run.lock().path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        with pytest.raises(UsageError, match="in use"):
            train(
                MOCK_SUITE,
                MOCK_SKILL,
                tag="t",
                runs_dir=str(tmp_path),
                max_steps=1,
                force=True,
                reporter=quiet(),
                **FAST,
            )
    finally:
        holder.kill()
        holder.wait()
    assert not list(tmp_path.glob(".t.staging*"))
    assert tree(run.root) == before and run.results.read_text() == results


def test_a_second_process_is_refused_by_the_lock(tmp_path: Path) -> None:
    train(MOCK_SUITE, MOCK_SKILL, tag="t", runs_dir=str(tmp_path), max_steps=1, seed=0, reporter=quiet())
    run = RunDir(tmp_path / "t")
    run.terminal_path.unlink()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time;f=open(sys.argv[1],'a+');fcntl.flock(f,fcntl.LOCK_EX);print('locked',flush=True);time.sleep(600)",
            str(run.lock().path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        with pytest.raises(UsageError, match="in use by another skilltune process"):
            resume(run.root, reporter=quiet())
    finally:
        holder.kill()
        holder.wait()
