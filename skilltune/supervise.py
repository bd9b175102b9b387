"""``--supervise``: relaunch a crashed run (bounded) and keep the machine awake while it runs.

The supervisor runs training in a child process; when the child dies without
writing TERMINAL (killed, out of memory) or writes ``crash``, it waits and runs
``skilltune resume``. Resume is exact (see loop.py), so a relaunch costs only
the interrupted rollouts.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from skilltune.rundir import RunDir, TerminalState

RESTARTABLE: tuple[TerminalState, ...] = ("crash",)


def keep_awake_prefix() -> list[str]:
    """A command prefix that stops the OS from sleeping while the child runs, where one exists."""
    if platform.system() == "Darwin" and shutil.which("caffeinate"):
        return ["caffeinate", "-i"]
    if shutil.which("systemd-inhibit") and Path("/run/systemd/system").is_dir():
        return [
            "systemd-inhibit",
            "--what=idle:sleep",
            "--who=skilltune",
            "--why=training run",
            "--mode=block",
        ]
    return []


def supervise(first: list[str], run_dir: Path, max_restarts: int = 3, backoff_s: float = 10.0) -> int:
    """Run ``skilltune <first...>``; on a crash, ``skilltune resume run_dir`` up to ``max_restarts`` times."""
    run = RunDir(run_dir)
    args = first
    rc = 0
    for attempt in range(max_restarts + 1):
        rc = subprocess.call([*keep_awake_prefix(), sys.executable, "-m", "skilltune.cli", *args])
        if rc == 2:  # bad input: nothing was started (an older run under the tag is not ours to resume)
            return rc
        terminal = run.terminal()
        died = terminal is None and run.config.is_file()
        if not died and (terminal is None or terminal.state not in RESTARTABLE):
            return rc
        if attempt == max_restarts:
            break
        what = "died without TERMINAL" if died else f"ended {terminal.state if terminal else '?'}"
        print(
            f"supervise: the run {what} (exit {rc}); resuming in {backoff_s:g} s", file=sys.stderr, flush=True
        )
        time.sleep(backoff_s * (attempt + 1))
        args = ["resume", str(run_dir)]
    print(f"supervise: giving up after {max_restarts} restarts", file=sys.stderr, flush=True)
    return rc or 3
