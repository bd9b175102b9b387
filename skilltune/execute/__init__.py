"""Executors: where rollouts run (local worker threads, or a Ray cluster)."""

from __future__ import annotations

from typing import Literal

from skilltune.execute.base import Executor
from skilltune.execute.local import LocalExecutor

ExecutorKind = Literal["local", "ray"]

__all__ = ["Executor", "ExecutorKind", "LocalExecutor", "make_executor"]


def make_executor(
    workers: int, max_concurrency: int | None = None, kind: str = "local", address: str | None = None
) -> Executor:
    """One executor per run: it is the concurrency budget shared by train, screen, gate and compare.

    The suite's ``max_concurrency`` (tasks sharing a serial resource) caps ``workers``.
    """
    if max_concurrency is not None:
        workers = min(workers, max_concurrency)
    if kind == "ray":
        from skilltune.execute.ray import RayExecutor

        return RayExecutor(workers, address)
    if kind != "local":
        from skilltune.errors import UsageError

        raise UsageError(f"unknown executor {kind!r}: use local or ray")
    return LocalExecutor(workers)
