"""Screen each rule on train: the step's base against a candidate on the tasks a rule targets.

Every distinct rule (after vet, merge and lint) runs alone on the train tasks its ask's failure group
failed plus one sample of the batch's passing tasks drawn for the step (``PASSING_SAMPLE``, to catch
breakage), at the train rollouts' replicates: each task compares with the very rollout of the skill
it builds on. A rule *fixed* the tasks whose score rose and *broke* those whose score fell.
Leave-one-out (training/select.py) runs on fresh replicates (``CONFIRM_OFFSET``). No alpha is spent:
the gate then decides on val as always. Screen rollouts go under ``rollouts/screen/`` of the step
(cached and counted like any other), and their figures into reflections.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skilltune.metric import Metric
from skilltune.proposal import Edit
from skilltune.propose.reflect import trajectory_id
from skilltune.runfiles import (
    ProposalRecord,
    ProposalStatus,
    RolloutRecord,
    ScreenFigures,
)
from skilltune.skill import Candidate
from skilltune.stats import mean
from skilltune.suite import Task
from skilltune.training.context import RunContext
from skilltune.training.proposals import Answered
from skilltune.training.rollouts import Records, replicate_base
from skilltune.training.units import Unit

# Passing train tasks of the batch each rule also runs on: 2 caught as much breakage as 4 in the simulated
# runs and left more of the budget to the gate (benchmarks/proposals.py: 2.61 against 2.26 times
# skill-trainer's held-out gain per rollout).
PASSING_SAMPLE = 2
CONFIRM_OFFSET = (
    200  # leave-one-out's replicates in the unit's range (the gate's rounds: 0..cap; pools: 500+)
)


@dataclass
class Tried:
    """One rule of an ask's answer on its way through the screen (``rule``: its place in the answer)."""

    answered: Answered
    edits: list[Edit]
    rule: int = 0
    candidate: Candidate | None = None
    tasks: list[Task] | None = None
    figures: ScreenFigures | None = None
    status: ProposalStatus | None = None
    reason: str = ""

    @property
    def index(self) -> int:
        return self.answered.ask.index

    @property
    def name(self) -> str:
        """How messages name it: ``ask 2`` (its answer's only rule), ``ask 2, rule 1``."""
        many = len(self.answered.edits) > 1
        return f"ask {self.index}" + (f", rule {self.rule + 1}" if many else "")

    def record(self) -> ProposalRecord:
        a = self.answered
        status = self.status or "kept"
        return ProposalRecord(
            index=a.ask.index,
            rule=self.rule,
            kind=a.ask.kind,
            label=a.ask.label,
            attempts=len(a.answers),
            edits=self.edits,
            candidate=self.candidate.hash if self.candidate else None,
            screen=self.figures,
            status=status,
            reason=self.reason,
        )


Key = tuple[str | None, str]  # (agent label, task id): a screen's unit


def unit_scores(records: list[RolloutRecord], metric: Metric) -> dict[Key, float]:
    """Each (agent, task) unit's mean score over its scored replicates."""
    values: dict[Key, list[float]] = {}
    for record in records:
        if record.score is not None:
            values.setdefault((record.target, record.task_id), []).append(record.score.metric(metric))
    return {key: mean(v) for key, v in sorted(values.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))}


def unit_name(key: Key) -> str:
    return key[1] if key[0] is None else f"{key[0]}/{key[1]}"


def figures_of(before: dict[Key, float], after: dict[Key, float], rollouts: int) -> ScreenFigures | None:
    """A screen's figures over the units both arms scored (None when they share none)."""
    units = [u for u in after if u in before]
    if not units:
        return None
    diffs = {u: after[u] - before[u] for u in units}
    return ScreenFigures(
        tasks=[unit_name(u) for u in units],
        before=round(mean([before[u] for u in units]), 6),
        after=round(mean([after[u] for u in units]), 6),
        gain=round(sum(diffs.values()), 6),
        fixed=[unit_name(u) for u in units if diffs[u] > 1e-9],
        broke=[unit_name(u) for u in units if diffs[u] < -1e-9],
        rollouts=rollouts,
    )


class Screen:
    """One step's screen: the base's train records, the passing sample, the rollouts it runs."""

    def __init__(
        self, ctx: RunContext, unit: Unit, base: Candidate, evidence: Records, batch: list[Task]
    ) -> None:
        self.ctx, self.unit, self.base, self.batch = ctx, unit, base, batch
        self.folder: Path = unit.folder(ctx.run)
        self.metric = ctx.config.metric
        self.before = unit_scores([r for r, _ in evidence], self.metric)
        self.task_of = {trajectory_id(r): r.task_id for r, _ in evidence}
        failed = {r.task_id for r, _ in evidence if r.score is not None and r.score.hard == 0}
        self.failed = [t for t in batch if t.id in failed]
        passing = [t for t in batch if t.id not in failed]
        picked = ctx.rng(unit.index, "screen-passing").sample(
            range(len(passing)), min(PASSING_SAMPLE, len(passing))
        )
        self.passing = [passing[i] for i in sorted(picked)]
        self.rollouts = 0

    def tasks_for(self, answered: Answered, edits: list[Edit]) -> list[Task]:
        """The failed tasks a proposal targets, then the passing sample (batch order)."""
        focus = answered.ask.focus
        cited = focus.trajectories if focus is not None else [s for e in edits for s in e.support]
        named = {self.task_of.get(tid, tid) for tid in cited}
        targets = [t for t in self.failed if t.id in named] or self.failed
        chosen = {t.id for t in [*targets, *self.passing]}
        return [t for t in self.batch if t.id in chosen]

    def run(self, runs: list[tuple[Candidate, list[Task]]], offset: int = 0) -> list[dict[Key, float]]:
        """Each candidate on its tasks (all in one batch of rollouts): its unit scores. ``offset``: 0 for
        the train rollouts' replicates (each task against the very rollout of the base), or
        ``CONFIRM_OFFSET`` for fresh ones (leave-one-out: a draw that did not select the rule)."""
        jobs = []
        for candidate, tasks in runs:
            jobs += self.ctx.rollouts.jobs(
                tasks, candidate, "screen", replicate_base(self.unit.seq, offset), self.ctx.config.reps
            )
        records = [r for r, _ in self.ctx.rollouts.run(self.folder, jobs)]
        self.rollouts += len(records)
        return [unit_scores([r for r in records if r.candidate == c.hash], self.metric) for c, _ in runs]

    def figures(self, scores: dict[Key, float], tasks: list[Task]) -> ScreenFigures | None:
        ids = {t.id for t in tasks}
        after = {u: s for u, s in scores.items() if u[1] in ids}
        reps = self.ctx.config.reps * max(1, len(self.ctx.rollouts.labels))
        return figures_of(self.before, after, len(tasks) * reps)
