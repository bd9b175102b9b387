"""The rollout records of a run, read once and tallied per unit, phase and task.

A run of 50,000 rollouts is read in one pass into sums and per-task score lists; nothing
per rollout is kept but the train rollouts an edit may cite and the infra errors.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from skilltune.metric import Metric
from skilltune.rollout.tally import unit_of
from skilltune.rundir import RunDir
from skilltune.runfiles import SCHEMA_VERSION, RolloutRecord


@dataclass
class Tally:
    """What a unit's rollouts (or one phase of them) used. ``rollouts`` counts those run here, each
    once, with its tokens and USD (the agent's and its judge's, as the budgets count them); records
    copied from a shared cache cost nothing and are counted in ``cached``."""

    rollouts: int = 0
    cached: int = 0
    tokens: int = 0
    usd: float = 0.0
    usd_estimated: bool = False
    statuses: Counter[str] = field(default_factory=Counter)

    def add(self, record: RolloutRecord) -> None:
        self.statuses[record.status] += 1
        if record.cached_from:
            self.cached += 1
            return
        self.rollouts += 1
        self.tokens += record.spent_tokens
        self.usd += record.spent_usd
        self.usd_estimated = self.usd_estimated or record.cost_estimated


@dataclass(frozen=True)
class TrainRollout:
    """A train rollout an edit may cite: where its files are (relative to the run directory)."""

    folder: str
    status: str
    score: float | None
    output: str
    conversation: str
    feedback: str = ""  # the scorer's feedback on it (score.json's, kept in its record)


@dataclass(frozen=True)
class FailedRollout:
    """A rollout that ended in an infra error, a crash or a scoring error."""

    unit: str
    task_id: str
    status: str
    reason: str


FAILURES = ("infra_error", "crashed", "scoring_error")


@dataclass
class RolloutTally:
    """Every rollout record of a run, tallied. Units are folder names (``step_0003``,
    ``epoch_0001``; ``step_0000`` holds the seed's baseline, ``final`` the held-out test)."""

    metric: Metric
    total: Tally = field(default_factory=Tally)
    units: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    phases: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    # (unit, phase, candidate hash, task id) -> the metric of each scored replicate
    scores: dict[tuple[str, str, str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    # (candidate hash, task id, replicate) -> the metric of a val rollout of the gate or the baseline,
    # wherever it lies: a decision reuses its incumbent's rollouts from earlier units' folders
    replicates: dict[tuple[str, str, int], float] = field(default_factory=dict)
    # (unit, candidate hash, task id) -> the hard outcomes seen in the unit's gate
    outcomes: dict[tuple[str, str, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    train: dict[tuple[str, str, int], TrainRollout] = field(default_factory=dict)
    failures: list[FailedRollout] = field(default_factory=list)
    task_order: list[str] = field(default_factory=list)  # val tasks in the order first met
    _seen: set[str] = field(default_factory=set)

    def add(self, unit: str, folder: str, record: RolloutRecord) -> None:
        """Count ``record``, found in ``folder`` (relative to the run directory, POSIX). A run with
        several agents counts (agent, task) units (``label/task``), as its gate does."""
        task = str(unit_of(record))
        self.total.add(record)
        self.units[unit].add(record)
        self.phases[(unit, record.phase)].add(record)
        value = record.score.metric(self.metric) if record.score else None
        if value is not None:
            self.scores[(unit, record.phase, record.candidate, task)].append(value)
        if record.phase in ("gate", "eval") and record.split == "val":
            if task not in self._seen:
                self._seen.add(task)
                self.task_order.append(task)
            if record.phase == "gate" and record.score is not None:
                self.outcomes[(unit, record.candidate, task)].add(record.score.hard)
            if value is not None:
                self.replicates.setdefault((record.candidate, task, record.replicate), value)
        if record.phase == "train":
            rel = folder
            self.train[(unit, task, record.replicate)] = TrainRollout(
                folder=rel,
                status=record.status,
                score=value,
                output=f"{rel}/{record.files.output}",
                conversation=f"{rel}/{record.files.conversation}",
                feedback=record.score.feedback if record.score is not None else "",
            )
        if record.status in FAILURES:
            self.failures.append(FailedRollout(unit, task, record.status, record.reason or ""))

    def task_mean(self, unit: str, phase: str, candidate: str, task: str) -> float | None:
        values = self.scores.get((unit, phase, candidate, task))
        return sum(values) / len(values) if values else None

    def replicate_mean(self, candidate: str, task: str, replicates: list[int]) -> float | None:
        """The mean of ``candidate``'s scored val rollouts of ``task`` with these replicate indices,
        in whichever unit's folder they lie."""
        found = [self.replicates.get((candidate, task, r)) for r in replicates]
        values = [v for v in found if v is not None]
        return sum(values) / len(values) if values else None

    def accuracy(self, unit: str, phase: str, candidate: str) -> float | None:
        """Mean over tasks of each task's mean over replicates (tasks weigh the same), as the run
        computes val scores."""
        means = [
            sum(v) / len(v)
            for (u, p, c, _), v in self.scores.items()
            if (u, p, c) == (unit, phase, candidate)
        ]
        return round(sum(means) / len(means), 6) if means else None

    def flaky_tasks(self) -> set[str]:
        """Val tasks whose replicates disagreed (solved and failed) for one skill within one gate."""
        return {task for (_, _, task), seen in self.outcomes.items() if len(seen) > 1}


def record_paths(run: RunDir, units: Collection[str] | None = None) -> list[tuple[str, str]]:
    """(unit, record folder relative to the run) of every rollout under ``steps/<unit>/`` for each
    unit folder named in ``units`` (None: all) and under ``final/``, in path order. The layout is fixed
    (rollouts/PHASE/CAND12/ID_rK/), so folders are listed level by level, as strings: far cheaper
    than a recursive glob over 50,000 rollouts."""
    found: list[tuple[str, str]] = []
    folders = [(e.name, f"steps/{e.name}") for e in _dirs(str(run.steps)) if units is None or e.name in units]
    folders.append(("final", "final"))
    root = str(run.root)
    for unit, folder in folders:
        for phase in _dirs(os.path.join(root, folder, "rollouts")):  # noqa: PTH118 (strings: Path objects for 50,000 rollouts cost seconds)
            for cand in _dirs(phase.path):
                for rollout in _dirs(cand.path):
                    found.append((unit, f"{folder}/rollouts/{phase.name}/{cand.name}/{rollout.name}"))
    found.sort(key=lambda item: item[1])
    return found


def _dirs(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return [e for e in entries if e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_record(path: str) -> RolloutRecord | None:
    """A record.json through its model (None when the folder has none: a rollout never finished).

    Validated straight from the bytes when it is of this schema version (the common case, and
    twice as fast), else through ``RolloutRecord.read``, which migrates an older file and refuses
    a newer one with its message."""
    try:
        with open(path, "rb") as handle:  # noqa: PTH123 (see record_paths)
            data = handle.read()
    except FileNotFoundError:
        return None
    try:
        record = RolloutRecord.model_validate_json(data)
    except ValidationError:
        return RolloutRecord.read(Path(path))
    if "schema_version" not in record.model_fields_set or record.schema_version != SCHEMA_VERSION:
        return RolloutRecord.read(Path(path))
    return record


def read_rollouts(run: RunDir, metric: Metric, units: Collection[str] | None = None) -> RolloutTally:
    """Tally the records of the unit folders named in ``units`` (None: all) and of ``final/``."""
    tally = RolloutTally(metric)
    root = str(run.root)
    for unit, folder in record_paths(run, units):
        record = read_record(os.path.join(root, folder, "record.json"))  # noqa: PTH118
        if record is not None:
            tally.add(unit, folder, record)
    return tally
