"""Figures over a batch of rollout records: per-task scores and the task-weighted accuracy."""

from __future__ import annotations

from collections.abc import Sequence

from skilltune.metric import Metric
from skilltune.runfiles import RolloutRecord
from skilltune.stats import mean, task_means


def per_task_scores(records: list[RolloutRecord], metric: Metric) -> dict[str, list[float | None]]:
    """task id -> the metric of each record in canonical (task, replicate) order (None: not scored)."""
    out: dict[str, list[float | None]] = {}
    for r in sorted(records, key=lambda r: (r.task_id, r.replicate)):
        out.setdefault(r.task_id, []).append(r.score.metric(metric) if r.score else None)
    return out


def accuracy(records: list[RolloutRecord], metric: Metric) -> float | None:
    """The mean over tasks of each task's mean over its scored replicates (tasks weigh the same)."""
    means = task_means(per_task_scores(records, metric))
    return round(mean(list(means.values())), 6) if means else None


def unit_id(record: RolloutRecord) -> str:
    """A record's unit: its task, or ``label/task`` in a run with several agents (``target`` set)."""
    return record.task_id if record.target is None else f"{record.target}/{record.task_id}"


def as_units(records: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    """The records with their task ids replaced by their units (unchanged without agent labels):
    what a gate or a comparison pairs across agents."""
    return [r if r.target is None else r.model_copy(update={"task_id": unit_id(r)}) for r in records]
