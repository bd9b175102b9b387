"""run_agent_process reads the agent's whole stdout, however the agent ends and however slowly it is read."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from skilltune.process import run_agent_process

# As Node does at process.exit(): a stdout set not to wait, one write of what is left, whatever of it
# did not fit dropped, then the exit. Through a 64 KiB pipe most of the megabyte would be lost.
_HASTY = """
import fcntl, os
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)
data = b"".join(b'{"n": %d, "pad": "%s"}\\n' % (i, b"x" * 480) for i in range(2000)) + b'{"end": true}'
try:
    os.write(1, data)
except BlockingIOError:
    pass
os._exit(0)
"""


def test_an_agent_that_exits_without_waiting_for_its_reader_loses_nothing(tmp_path: Path) -> None:
    """Node CLIs end with process.exit(), which drops what a full pipe has not taken (gemini lost its
    answer and result on a loaded machine): the agent writes to a file, so all of it is read, the last
    line without its newline included, and the record folder's copy is whole."""
    mirror = tmp_path / "agent-stdout.jsonl"
    outcome = run_agent_process(
        [sys.executable, "-c", _HASTY],
        cwd=tmp_path,
        env={},
        wall_limit_s=60,
        stall_s=None,
        stdout_path=mirror,
    )
    assert outcome.returncode == 0
    assert len(outcome.stdout_lines) == 2001 and outcome.stdout_lines[-1] == '{"end": true}'
    assert [line[:12] for line in outcome.stdout_lines[:2]] == ['{"n": 0, "pa', '{"n": 1, "pa']
    assert mirror.read_text().splitlines() == outcome.stdout_lines


def test_without_a_record_folder_the_stdout_file_is_its_own_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with no stdout_path (no record folder) reads the same, from a file of its own that is gone
    afterwards."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    outcome = run_agent_process(
        [sys.executable, "-c", _HASTY], cwd=tmp_path, env={}, wall_limit_s=60, stall_s=None
    )
    assert len(outcome.stdout_lines) == 2001 and outcome.stdout_lines[-1] == '{"end": true}'
    assert list(scratch.iterdir()) == []
