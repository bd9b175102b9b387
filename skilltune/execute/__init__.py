"""Executors: where rollouts run (local threads now; Ray as an optional extra)."""

from __future__ import annotations

from skilltune.execute.base import Executor
from skilltune.execute.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor", "make_executor"]


def make_executor(workers: int, max_concurrency: int | None = None) -> Executor:
    """A local executor honouring the suite's ``max_concurrency`` (tasks sharing a serial resource)."""
    if max_concurrency is not None:
        workers = min(workers, max_concurrency)
    return LocalExecutor(workers)
