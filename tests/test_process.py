"""run_agent_process reads the agent's whole stdout, however the agent ends and however slowly it is read."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

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


def test_a_long_line_written_at_the_end_is_read_whole(tmp_path: Path) -> None:
    """An agent that writes 20 MB on one line and exits: the reader is far behind when the agent is gone,
    and still returns the whole line (it reads what the file holds, with no time limit once no writer is
    left), at a cost linear in the line's length."""
    script = "import os; os.write(1, b'x' * 20_000_000 + b'\\n' + b'{\"end\": true}\\n')"
    outcome = run_agent_process(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={},
        wall_limit_s=60,
        stall_s=None,
        stdout_path=tmp_path / "out.jsonl",
    )
    assert [len(line) for line in outcome.stdout_lines] == [20_000_000, 13]


# A writer that leaves the agent's process group and drops the run's marker from its environment (setsid,
# a cleared environment), then writes for ever: what kill_group and kill_marked cannot find. TOKEN names it.
_ESCAPE = """
import subprocess, sys
print("started", flush=True)
writer = "import os, time  # TOKEN\\nwhile True:\\n    os.write(1, b'.' * 4096 + b'\\\\n')\\n    time.sleep(0.001)"
subprocess.Popen(["/usr/bin/env", "-i", sys.executable, "-c", writer], start_new_session=True)
"""


def test_a_writer_that_escaped_its_group_and_marker_is_killed(tmp_path: Path) -> None:
    """The file would grow for as long as the escaped writer lived: the run kills every process that
    holds it open for writing, and the file stops growing; a reader of it lives on."""
    out = tmp_path / "out.jsonl"
    token = f"escaped-writer-{uuid.uuid4().hex}"
    out.write_text("")  # the run truncates it in place: a person's `tail -f` reads the agent's stream
    reader = subprocess.Popen(["tail", "-f", str(out)], stdout=subprocess.DEVNULL)
    inode = out.stat().st_ino
    while not any(fd.stat().st_ino == inode for fd in Path(f"/proc/{reader.pid}/fd").iterdir()):
        assert reader.poll() is None, "tail ended"
        time.sleep(0.05)  # tail has not opened it yet
    try:
        outcome = run_agent_process(
            [sys.executable, "-c", _ESCAPE.replace("TOKEN", token)],
            cwd=tmp_path,
            env={},
            wall_limit_s=60,
            stall_s=None,
            stdout_path=out,
        )
        assert outcome.stdout_lines[0] == "started"
        size = out.stat().st_size
        time.sleep(0.5)
        assert out.stat().st_size == size, "a writer of the agent's stdout survived the run"
        assert subprocess.run(["pgrep", "-f", token], check=False, capture_output=True).returncode == 1
        assert reader.poll() is None, "a reader of the agent's stdout was killed"
    finally:
        reader.kill()
        subprocess.run(["pkill", "-KILL", "-f", token], check=False)
