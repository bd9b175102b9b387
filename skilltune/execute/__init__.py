"""Executors: where rollouts run (local worker threads, or a Ray cluster).

Executors are plug-ins of the ``skilltune.executors`` entry-point group, like agents, scorers,
gates and proposers: a class taking ``(workers, address)``. The built-in ones (``local``,
``ray``) enter through the same door; Ray is imported only when its executor is asked for.
"""

from __future__ import annotations

from typing import Protocol

from skilltune.errors import UsageError
from skilltune.execute.base import Executor
from skilltune.plugins import Registry


class ExecutorFactory(Protocol):
    """An executor class: ``workers`` rollouts at a time; ``address`` of a cluster, if it has one."""

    def __call__(self, workers: int, address: str | None = None) -> Executor: ...


EXECUTORS: Registry[ExecutorFactory] = Registry("skilltune.executors", "executor")

__all__ = ["EXECUTORS", "Executor", "ExecutorFactory", "make_executor"]


def make_executor(
    workers: int, max_concurrency: int | None = None, kind: str = "local", address: str | None = None
) -> Executor:
    """One executor per run: it is the concurrency budget shared by train, screen, gate and compare.

    The suite's ``max_concurrency`` (tasks sharing a serial resource) caps ``workers``.
    """
    if max_concurrency is not None:
        workers = min(workers, max_concurrency)
    factory = EXECUTORS.get(kind)
    if address and kind == "local":
        raise UsageError(f"--ray-address {address} needs --executor ray (the local executor has no cluster)")
    return factory(workers, address)
