"""The Executor contract: run rollout jobs, yield records as they finish."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Protocol

from skilltune.rollout.routes import JobRunner
from skilltune.rollout.runner import RolloutJob
from skilltune.runfiles import RolloutRecord


class Executor(Protocol):
    """``map`` yields one RolloutRecord per job, in completion order (not job order).

    Callers that decide on results sort them into canonical (task, replicate)
    order first, so parallelism cannot change a decision. A caller that stops early
    closes the generator (``contextlib.closing``), so an interrupt while the executor
    winds down reaches the caller rather than a garbage collector's finalizer.

    ``runner`` is one RolloutRunner, or a ``Router`` (rollout/routes.py): several agents' runners in
    one map, each job run by the runner ``runner_for`` gives it.
    """

    def map(self, jobs: Sequence[RolloutJob], runner: JobRunner) -> Generator[RolloutRecord, None, None]: ...
