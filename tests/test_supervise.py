"""skilltune supervise (skilltune/supervise.py): restarts a run, never after bad input."""

from __future__ import annotations

from pathlib import Path

from skilltune.rundir import RunDir
from skilltune.runfiles import SessionStart
from skilltune.supervise import supervise
from skilltune.training import train
from tests.helpers import FAST, MOCK_SKILL, MOCK_SUITE, quiet


def test_supervise_does_not_resume_a_run_when_the_first_command_is_bad_input(tmp_path: Path) -> None:
    """supervise returns 2 on a refused first command and leaves an existing unfinished run alone."""
    runs = tmp_path / "runs"
    train(MOCK_SUITE, MOCK_SKILL, tag="t", runs_dir=str(runs), max_steps=1, reporter=quiet(), **FAST)
    run = RunDir(runs / "t")
    run.terminal_path.unlink()  # looks like a run that died
    sessions = sum(1 for e in run.read_journal() if isinstance(e, SessionStart))
    first = ["train", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--tag", "t", "--runs-dir", str(runs)]
    assert supervise(first, run.root, max_restarts=2, backoff_s=0) == 2
    assert sum(1 for e in run.read_journal() if isinstance(e, SessionStart)) == sessions
    assert run.terminal() is None
