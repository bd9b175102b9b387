"""Figures over a batch of rollout records: per-unit scores and the task-weighted accuracy.

A record's unit (``Unit``) is what a gate pairs and a comparison lists: its task, on the agent that
ran it when the run files name agents (a training run with several: ``RolloutRecord.target``).
"""

from __future__ import annotations

from dataclasses import dataclass

from skilltune.metric import Metric
from skilltune.runfiles import RolloutRecord
from skilltune.stats import mean, task_means


@dataclass(frozen=True)
class Unit:
    """A task, on one agent (``agent``: its label; None where the files name no agent).

    ``str(unit)`` is its name in the run files (gate.json's pairs, comparison.json's rows, the
    report, trajectory ids): the task id, or ``label/task``, made here only. Units sort as their
    names do, so every decision and file orders them as the names ordered them before."""

    task: str
    agent: str | None = None

    def __str__(self) -> str:
        return self.task if self.agent is None else f"{self.agent}/{self.task}"

    def __lt__(self, other: Unit) -> bool:
        return str(self) < str(other)


def unit_of(record: RolloutRecord) -> Unit:
    return Unit(record.task_id, record.target)


def per_task_scores(
    records: list[RolloutRecord], metric: Metric, pool_agents: bool = False
) -> dict[Unit, list[float | None]]:
    """Each unit's metric per record in replicate order (None: not scored): what a gate pairs.
    ``pool_agents``: a task's records of every agent as one unit."""
    out: dict[Unit, list[float | None]] = {}
    for r in sorted(records, key=lambda r: (r.task_id, r.replicate)):
        unit = Unit(r.task_id) if pool_agents else unit_of(r)
        out.setdefault(unit, []).append(r.score.metric(metric) if r.score else None)
    return out


def accuracy(records: list[RolloutRecord], metric: Metric, pool_agents: bool = True) -> float | None:
    """The mean over units of each unit's mean over its scored replicates (units weigh the same).
    By default a task's records of several agents are one unit; a comparison's rows keep them apart."""
    means = task_means(per_task_scores(records, metric, pool_agents))
    return round(mean(list(means.values())), 6) if means else None
