"""The Executor contract: run rollout jobs, yield records as they finish."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from skilltune.rollout import RolloutJob, RolloutRecord, RolloutRunner


class Executor(Protocol):
    """``map`` yields one RolloutRecord per job, in completion order (not job order).

    Callers that decide on results sort them into canonical (task, replicate)
    order first, so parallelism cannot change a decision.
    """

    def map(self, jobs: Sequence[RolloutJob], runner: RolloutRunner) -> Iterator[RolloutRecord]: ...
