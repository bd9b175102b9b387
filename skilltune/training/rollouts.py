"""Rollouts of a training run: run jobs into a unit's folder, reuse what is on disk, stop when asked.

Replicate indices come from the unit's position in the run (``replicate_base``), so every
unit draws fresh replicates: the shared cache never hands a decision the rollouts that
selected its incumbent, and a resumed unit asks for exactly the jobs it asked for before.

With several target agents every job is made once per agent, and a batch runs all the agents'
jobs side by side through one map of the session's executor, each job by its agent's runner
(session.py's ``RolloutSession.stream``, rollout/routes.py's ``Router``): no worker waits for one
agent's slowest rollout while another agent has jobs left.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from skilltune.progress import Reporter, RunProgress
from skilltune.rollout.runner import RolloutJob, RolloutRunner, rollout_dir
from skilltune.rollout.tally import Unit
from skilltune.runfiles import Phase, RolloutRecord, TrainConfig
from skilltune.session import RolloutSession, Target
from skilltune.skill import Candidate
from skilltune.suite import Task
from skilltune.training.session import Session

REPLICATE_STRIDE = 1000  # replicate indices of the unit in position u start at u * stride
POOL_OFFSET = 500  # a kept candidate's val pool as the incumbent: its unit's range from here
Records = list[tuple[RolloutRecord, Path]]


def replicate_base(seq: int, offset: int = 0) -> int:
    """The first replicate index of the unit in run position ``seq`` (plus a gate round's offset)."""
    return seq * REPLICATE_STRIDE + offset


@dataclass(eq=False)
class RunRollouts:
    """Runs a training run's rollouts through its rollout session (one executor for every unit)."""

    config: TrainConfig
    rollout_session: RolloutSession
    session: Session
    progress: RunProgress
    reporter: Reporter
    tokens_in: int = field(default=0, init=False)  # the agents' tokens over this session's rollouts
    tokens_out: int = field(default=0, init=False)
    judge_tokens_in: int = field(default=0, init=False)  # and the judge's, with its USD
    judge_tokens_out: int = field(default=0, init=False)
    judge_cost_usd: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.suite = self.rollout_session.suite

    def judge_usage(self) -> tuple[float, float, float]:
        return (self.judge_tokens_in, self.judge_tokens_out, self.judge_cost_usd)

    @property
    def agent(self) -> str:
        return self.rollout_session.describe()

    @property
    def targets(self) -> dict[str, Target]:
        return self.rollout_session.targets

    @property
    def labels(self) -> list[str]:
        """The agents' labels where the run files name them (several agents; one agent: none)."""
        return self.rollout_session.labels if self.rollout_session.named else []

    def refusal(self, candidate: Candidate) -> str | None:
        return self.rollout_session.refusal(candidate)

    def units(self, tasks: list[Task]) -> list[Unit]:
        return self.rollout_session.units(tasks)

    def jobs(
        self, tasks: list[Task], candidate: Candidate | None, phase: Phase, base: int, reps: int
    ) -> list[RolloutJob]:
        """The jobs of ``tasks`` x ``reps`` for each agent in turn."""
        return self.rollout_session.jobs(tasks, candidate, phase, reps, base)

    def finished(self, out: Path, job: RolloutJob) -> RolloutRecord | None:
        """The finished record of ``job`` under ``out`` when this run's runner would reuse it."""
        return self.rollout_session.runner(out, label=job.agent).reusable(job)

    def run(self, out: Path, jobs: list[RolloutJob]) -> Records:
        """Run ``jobs`` into ``out``, reusing finished records (never an infra error or a crash).

        Every agent's jobs to run go through one executor map, so the workers are shared by all the
        agents at once rather than idling at each agent's tail. Returns (record, folder) pairs in
        canonical (candidate, agent, task, replicate) order. A stop request lets the running
        rollouts finish, then raises StopRequested.
        """
        mine: dict[str | None, Records] = {label: [] for label in self.targets}  # reused, then run
        runners: dict[str | None, RolloutRunner] = {
            label: self.rollout_session.runner(out, label=label) for label in self.targets
        }
        todo = []
        for job in jobs:
            record = runners[job.agent].reusable(job)
            if record is not None:
                mine[job.agent].append((record, rollout_dir(out, job)))
            else:
                todo.append(job)
        self.session.check_stop()
        if todo:
            with contextlib.closing(self.rollout_session.stream(todo, out)) as batch:
                for job, record in batch:
                    mine[job.agent].append((record, rollout_dir(out, job)))
                    self.progress.rollouts_done += 1
                    self.progress.session_rollouts += 1
                    self.reporter.update(self.progress)
                    if self.session.stop_requested():
                        break  # the executor finishes the rollouts already running, then stops
        self.session.check_stop()
        records = [pair for label in self.targets for pair in mine[label]]  # the order the totals sum in
        for record, _ in records:  # what the agents used (a record copied from a shared cache: nothing)
            if not record.cached_from:
                self.tokens_in += record.tokens_in or 0
                self.tokens_out += record.tokens_out or 0
                if record.judge is not None:
                    self.judge_tokens_in += record.judge.tokens_in
                    self.judge_tokens_out += record.judge.tokens_out
                    self.judge_cost_usd += record.judge.cost_usd
        return sorted(
            records, key=lambda rf: (rf[0].candidate, rf[0].target or "", rf[0].task_id, rf[0].replicate)
        )
