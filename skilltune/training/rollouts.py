"""Rollouts of a training run: run jobs into a unit's folder, reuse what is on disk, stop when asked.

Replicate indices come from the unit's position in the run (``replicate_base``), so every
unit draws fresh replicates: the shared cache never hands a decision the rollouts that
selected its incumbent, and a resumed unit asks for exactly the jobs it asked for before.

With several target agents (training/agents.py) every job is made once per agent, and a batch
runs each agent's jobs in turn through its own runner on the shared executor.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from skilltune.progress import Reporter, RunProgress
from skilltune.rollout.runner import RolloutJob, RolloutRunner, rollout_dir
from skilltune.runfiles import Phase, RolloutRecord, TrainConfig
from skilltune.skill import Candidate
from skilltune.suite import Task
from skilltune.training.agents import Targets, describe, refusal, share_executor
from skilltune.training.session import Session

REPLICATE_STRIDE = 1000  # replicate indices of the unit in position u start at u * stride
POOL_OFFSET = 500  # a kept candidate's val pool as the incumbent: its unit's range from here
Records = list[tuple[RolloutRecord, Path]]


def replicate_base(seq: int, offset: int = 0) -> int:
    """The first replicate index of the unit in run position ``seq`` (plus a gate round's offset)."""
    return seq * REPLICATE_STRIDE + offset


class RunRollouts:
    """Runs a training run's rollouts through one executor (shared by every unit of the run)."""

    def __init__(
        self,
        config: TrainConfig,
        targets: Targets,
        session: Session,
        progress: RunProgress,
        reporter: Reporter,
    ) -> None:
        self.config = config
        self.targets = targets
        share_executor(targets)
        self.suite = next(iter(targets.values())).suite
        self.session = session
        self.progress = progress
        self.reporter = reporter
        self.tokens_in = 0  # the agents' tokens over this session's rollouts
        self.tokens_out = 0
        self.judge_tokens_in = 0  # and the judge's, with its USD
        self.judge_tokens_out = 0
        self.judge_cost_usd = 0.0

    def judge_usage(self) -> tuple[float, float, float]:
        return (self.judge_tokens_in, self.judge_tokens_out, self.judge_cost_usd)

    @property
    def agent(self) -> str:
        return describe(self.targets)

    @property
    def labels(self) -> list[str]:
        """The agents' labels in a run with several (empty for one agent)."""
        return [label for label in self.targets if label is not None]

    def refusal(self, candidate: Candidate) -> str | None:
        return refusal(self.targets, candidate)

    def jobs(
        self, tasks: list[Task], candidate: Candidate | None, phase: Phase, base: int, reps: int
    ) -> list[RolloutJob]:
        """The jobs of ``tasks`` x ``reps`` for each agent in turn (one agent: unlabelled, as before)."""
        return [
            job if label is None else replace(job, agent=label)
            for label, target in self.targets.items()
            for job in target.jobs(tasks, candidate, phase, reps, base)
        ]

    def _runner(self, out: Path, label: str | None) -> RolloutRunner:
        return self.targets[label].runner(out)

    def finished(self, out: Path, job: RolloutJob) -> RolloutRecord | None:
        """The finished record of ``job`` under ``out`` when this run's runner would reuse it."""
        return self._runner(out, job.agent).reusable(job)

    def run(self, out: Path, jobs: list[RolloutJob]) -> Records:
        """Run ``jobs`` into ``out``, reusing finished records (never an infra error or a crash).

        Returns (record, folder) pairs in canonical (candidate, task, replicate) order. A stop
        request lets the running rollouts finish, then raises StopRequested.
        """
        records: Records = []
        for label in self.targets:
            mine = [job for job in jobs if job.agent == label]
            if mine:
                records += self._run_agent(out, mine, label)
        self.session.check_stop()
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

    def _run_agent(self, out: Path, jobs: list[RolloutJob], label: str | None) -> Records:
        """One agent's jobs: the finished ones reused, the others run; a stop request lets the
        running rollouts finish."""
        runner = self._runner(out, label)
        by_key = {j.key: j for j in jobs}
        records: Records = []
        todo = []
        for job in jobs:
            record = runner.reusable(job)
            if record is not None:
                records.append((record, rollout_dir(out, job)))
            else:
                todo.append(job)
        self.session.check_stop()
        with contextlib.closing(self.targets[label].stream(todo, runner)) as batch:
            for record in batch:
                job = by_key[(record.candidate[:12], record.target, record.task_id, record.replicate)]
                records.append((record, rollout_dir(out, job)))
                self.progress.rollouts_done += 1
                self.progress.session_rollouts += 1
                self.reporter.update(self.progress)
                if self.session.stop_requested():
                    break  # the executor finishes the rollouts already running, then stops
        return records
