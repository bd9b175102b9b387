"""Several runners' batches through one executor map, so the workers are shared by all of them.

A run or comparison with several target agents has one runner per agent (its backend, options
and record folder). Running each agent's batch through its own ``Executor.map`` leaves the
workers idle at every batch's tail: the next agent starts only when the previous one's slowest
rollout has finished. ``Batches`` joins the batches into one job list, the agents' jobs
interleaved (the first of each, then the second of each, ...) so every agent's rollouts start
from the first free worker on, and routes each job to the runner of the batch it came from.

An executor takes a ``JobRunner``: a plain ``RolloutRunner`` (one batch) or ``Batches``. The local
executor calls ``run`` on either; an executor that needs the runner's parts (the Ray executor ships
each runner's picklable spec, scores and caches on the driver) asks ``runner_for`` per job. Jobs
are routed by identity (the job objects of ``jobs``), so two batches may hold equal jobs, as a
comparison's agents do (their runners write into different folders).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from skilltune.rollout.runner import RolloutJob, RolloutRunner
from skilltune.runfiles import RolloutRecord


class Batches:
    """``(jobs, runner)`` batches run as one: ``jobs`` interleaved, each run by its batch's runner."""

    def __init__(self, batches: Sequence[tuple[Sequence[RolloutJob], RolloutRunner]]) -> None:
        self.jobs: list[RolloutJob] = [
            job
            for row in itertools.zip_longest(*(jobs for jobs, _ in batches))
            for job in row
            if job is not None
        ]
        self._runners = {id(job): runner for jobs, runner in batches for job in jobs}
        if len(self._runners) != len(self.jobs):
            raise ValueError("a job object is in two batches: give each batch its own job objects")

    def runner(self, job: RolloutJob) -> RolloutRunner:
        """The runner of the batch ``job`` came from (one of ``jobs``, by identity)."""
        try:
            return self._runners[id(job)]
        except KeyError:
            raise ValueError(f"job {job.key} is not one of these batches' jobs") from None

    def run(self, job: RolloutJob) -> RolloutRecord:
        return self.runner(job).run(job)


JobRunner = RolloutRunner | Batches


def runner_for(runner: JobRunner, job: RolloutJob) -> RolloutRunner:
    """The runner that runs ``job``: ``runner`` itself, or the one its batch routes it to."""
    return runner.runner(job) if isinstance(runner, Batches) else runner
