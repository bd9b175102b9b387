"""The one router between a session's target agents and its executor: jobs out, records back.

A session with several target agents has a runner per agent (its backend, options and record
folder). Running each agent's batch through its own ``Executor.map`` leaves the workers idle at
every batch's tail: the next agent starts only when the previous one's slowest rollout has
finished. ``Router`` makes one job list of them, the agents' jobs interleaved (the first of each,
then the second of each, ...) so every agent's rollouts start from the first free worker on; it
runs each job by its agent's runner (``RolloutJob.agent``, the label) and tells which job, so which
agent, each record answers.

An executor yields records, not jobs: a record is traced to its agent by the options hash it holds
(its runner's: the backend, options and environment), which differs between a session's agents (a
session refuses two labels of the very same agent), and then to its job by candidate, task and
replicate. That also holds for agents whose records name no label (their folders do).

An executor takes a ``JobRunner``: a plain ``RolloutRunner`` or a ``Router``. The local executor
calls ``run`` on either; one that needs the runner's parts (the Ray executor ships each runner's
picklable spec, scores and caches on the driver) asks ``runner_for`` per job.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from skilltune.rollout.runner import NO_SKILL, RolloutJob, RolloutRunner
from skilltune.runfiles import RolloutRecord


class Router:
    """``jobs`` run as one map: interleaved by agent, each by its agent's runner in ``runners``."""

    def __init__(self, jobs: Sequence[RolloutJob], runners: Mapping[str, RolloutRunner]) -> None:
        by_agent: dict[str, list[RolloutJob]] = {label: [] for label in runners}
        for job in jobs:
            if job.agent not in by_agent:
                raise ValueError(
                    f"job {job.arm}/{job.task.id} names agent {job.agent!r}, none of {list(runners)}"
                )
            by_agent[job.agent].append(job)
        self.jobs: list[RolloutJob] = [
            job for row in itertools.zip_longest(*by_agent.values()) for job in row if job is not None
        ]
        self._runners = dict(runners)
        self._agents = {runner.options_hash: label for label, runner in runners.items()}
        if len(self._agents) != len(runners):
            raise ValueError("two agents of one router share an options hash: their records would mix")
        self._jobs = {
            (job.agent, job.candidate.hash if job.candidate else NO_SKILL, job.task.id, job.replicate): job
            for job in self.jobs
        }
        if len(self._jobs) != len(self.jobs):
            raise ValueError("two jobs of one agent ask for the same rollout")

    def runner(self, job: RolloutJob) -> RolloutRunner:
        """The runner of ``job``'s agent."""
        runner = self._runners.get(job.agent or "")
        if runner is None:
            raise ValueError(
                f"job {job.arm}/{job.task.id} names agent {job.agent!r}, none of {list(self._runners)}"
            )
        return runner

    def run(self, job: RolloutJob) -> RolloutRecord:
        return self.runner(job).run(job)

    def job(self, record: RolloutRecord) -> RolloutJob:
        """The job ``record`` answers (its ``agent``: the label of the agent that ran it)."""
        agent = self._agents[record.options_hash]
        return self._jobs[(agent, record.candidate, record.task_id, record.replicate)]


JobRunner = RolloutRunner | Router


def runner_for(runner: JobRunner, job: RolloutJob) -> RolloutRunner:
    """The runner that runs ``job``: ``runner`` itself, or the one the router routes it to."""
    return runner.runner(job) if isinstance(runner, Router) else runner
