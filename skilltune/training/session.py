"""A session: one process's part of a run, from its start to its TERMINAL line.

It listens for a stop (SIGINT/SIGTERM, or a STOP file in the run directory), journals
its start and end, and turns how the work ended into the run's TERMINAL state:
``stopped``, ``exhausted``, ``blocked`` or ``crash`` (success and no-progress are
written by the final comparison). SIGKILL writes nothing: the run is resumable.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from skilltune.errors import SkilltuneError
from skilltune.modelcalls import CallCancelled
from skilltune.progress import Reporter
from skilltune.rundir import RunDir
from skilltune.runfiles import Crashed, SessionEnd, SessionStart
from skilltune.training.budget import BudgetExhausted


class StopRequested(Exception):
    """SIGINT/SIGTERM or a STOP file: end after the rollouts now running."""


class BlockedError(SkilltuneError):
    """The run cannot continue without the user (a contaminated batch, a changed suite...)."""

    exit_code = 3


class Session:
    """The stop flag of one process's session and the mapping of its ending to TERMINAL."""

    def __init__(self, run: RunDir, reporter: Reporter) -> None:
        self.run = run
        self.reporter = reporter
        self._stop = False

    def stop_requested(self) -> bool:
        return self._stop or self.run.stop_file.exists()

    def check_stop(self) -> None:
        if self.stop_requested():
            raise StopRequested

    def _handler(self, signum: int, frame: Any) -> None:
        """The first SIGINT/SIGTERM asks for a stop after the running rollouts; a second SIGINT
        interrupts at once (the executor kills the running agents)."""
        if self._stop and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if not self._stop:
            sys.stderr.write(
                "\nstopping after the rollouts now running"
                + (" (Ctrl-C again to stop at once)\n" if signum == signal.SIGINT else "\n")
            )
        self._stop = True

    def _listen(self) -> Callable[[], None]:
        previous = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._handler)
        except ValueError:  # not the main thread: signals stay with the caller
            return lambda: None

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def run_work(self, work: Callable[[], None], rollouts: Callable[[], int]) -> None:
        """Run ``work``; every ending but an unexpected exception's is a TERMINAL state.

        ``rollouts`` says how many rollouts the session ran (for its session_end event).
        """
        restore = self._listen()
        self.run.journal(SessionStart(pid=os.getpid()))
        resume_hint = f"`skilltune resume {self.run.root}`"
        try:
            work()
        except (StopRequested, CallCancelled):  # CallCancelled: a model call ended by the stop
            self.run.write_terminal(
                "stopped", "stopped by a signal or the STOP file; `skilltune resume` continues"
            )
            self.reporter.line(f"stopped: continue with {resume_hint}")
        except KeyboardInterrupt:  # a second Ctrl-C: the executor killed the running agents
            self.run.write_terminal(
                "stopped",
                "interrupted: running rollouts were killed and left no record; `skilltune resume` continues",
            )
            self.reporter.line(f"interrupted: continue with {resume_hint}")
            raise
        except BudgetExhausted as exc:
            self.run.write_terminal("exhausted", str(exc))
            self.reporter.line(f"exhausted: {exc}")
        except SkilltuneError as exc:
            self.run.write_terminal("blocked", str(exc).splitlines()[0])
            self.reporter.line(f"blocked: {exc}")
        except Exception as exc:
            self.run.journal(Crashed(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()))
            self.run.write_terminal("crash", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.run.journal(SessionEnd(rollouts=rollouts()))
            restore()
