"""Rollouts of a training run: run jobs into a unit's folder, reuse what is on disk, stop when asked.

Replicate indices come from the unit's position in the run (``replicate_base``), so every
unit draws fresh replicates: the shared cache never hands a decision the rollouts that
selected its incumbent, and a resumed unit asks for exactly the jobs it asked for before.

With several target agents (training/agents.py) every job is made once per agent, and a batch
runs all the agents' jobs side by side through one map of the shared executor, each job by its
agent's runner (rollout/routes.py's ``Batches``): no worker waits for one agent's slowest rollout
while another agent has jobs left.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from skilltune.progress import Reporter, RunProgress
from skilltune.rollout.routes import Batches
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

        Every agent's jobs to run go through one executor map (``Batches``: interleaved, each job run
        by its agent's runner), so the workers are shared by all the agents at once rather than
        idling at each agent's tail. Returns (record, folder) pairs in canonical (candidate, agent,
        task, replicate) order. A stop request lets the running rollouts finish, then raises
        StopRequested.
        """
        mine: dict[str | None, Records] = {}  # per agent: its reused records, then those run, as they come
        batches: list[tuple[list[RolloutJob], RolloutRunner]] = []
        by_key: dict[tuple[str, str | None, str, int], RolloutJob] = {}
        for label in self.targets:
            runner = self._runner(out, label)
            mine[label] = []
            todo = []
            for job in (job for job in jobs if job.agent == label):
                by_key[job.key] = job
                record = runner.reusable(job)
                if record is not None:
                    mine[label].append((record, rollout_dir(out, job)))
                else:
                    todo.append(job)
            if todo:
                batches.append((todo, runner))
        self.session.check_stop()
        if batches:
            self._stream(out, batches, by_key, mine)
        self.session.check_stop()
        records = [
            pair for label in self.targets for pair in mine[label]
        ]  # the order the totals were summed in
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

    def _stream(
        self,
        out: Path,
        batches: list[tuple[list[RolloutJob], RolloutRunner]],
        by_key: dict[tuple[str, str | None, str, int], RolloutJob],
        mine: dict[str | None, Records],
    ) -> None:
        """Run the agents' batches side by side on the shared executor (one agent: its runner as
        ever), each record to its agent's list; a stop request lets the running rollouts finish."""
        if len(batches) == 1:
            todo, runner = batches[0]
            stream = self.targets[todo[0].agent].stream(todo, runner)
        else:  # every session has the first one's executor (share_executor)
            joined = Batches(batches)
            stream = next(iter(self.targets.values())).stream(joined.jobs, joined)
        with contextlib.closing(stream) as batch:
            for record in batch:
                job = by_key[(record.candidate[:12], record.target, record.task_id, record.replicate)]
                mine[job.agent].append((record, rollout_dir(out, job)))
                self.progress.rollouts_done += 1
                self.progress.session_rollouts += 1
                self.reporter.update(self.progress)
                if self.session.stop_requested():
                    break  # the executor finishes the rollouts already running, then stops
