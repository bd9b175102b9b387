"""Trigger mode: whether the agent loaded the skill when it should have, and nothing else.

A trigger task carries ``should_trigger`` (true or false) beside its ``scoring``, as
skill-creator's trigger evals do; the agent backend reports its load decision in
``AgentResult.skill_loaded``. hard = soft = 1 when the decision was the right one. A backend
that cannot tell (``skill_loaded`` None) leaves the rollout a scoring error, never a 0; the
rollout session refuses such a backend up front (``rollout.workspace.check_target``).

``trigger_stats`` sums decisions into the confusion counts and precision, recall and accuracy
with Wilson 95% intervals: what ``compare``, ``run`` and the report show for trigger tasks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skilltune.contracts import AgentResult, Task
from skilltune.errors import ScoringError
from skilltune.score.base import Score, Scored, Scorer
from skilltune.stats.proportion import wilson

TRIGGER_FIELD = "should_trigger"


class TriggerScorer(Scorer):
    """The load decision against ``should_trigger``: hard = soft = 1 when they agree."""

    mode = "trigger"

    @classmethod
    def check_task(cls, task: Mapping[str, Any], suite_root: Path) -> list[str]:
        if task.get(TRIGGER_FIELD) is None:
            return [
                f"trigger mode needs '{TRIGGER_FIELD}': true or false beside 'scoring' (whether the agent "
                "should load the skill for this prompt)"
            ]
        return []  # its type is the Task model's to check

    def score(self, task: Task, workspace: Path, result: AgentResult) -> Score:
        return self._judge(task, result.skill_loaded)

    def rescore(self, task: Task, record_dir: Path, result: AgentResult) -> Scored:
        return Scored(self._judge(task, result.skill_loaded))  # the decision is in the record

    def _judge(self, task: Task, loaded: bool | None) -> Score:
        should = task.should_trigger
        if should is None:
            raise ScoringError(f"task {task.id}: trigger mode needs '{TRIGGER_FIELD}' (true or false)")
        if loaded is None:
            raise ScoringError(
                "the agent backend did not report whether it loaded the skill: trigger mode cannot score "
                "this rollout (see `skilltune agents` for the backends that can)"
            )
        right = loaded == should
        did = "loaded the skill" if loaded else "did not load the skill"
        checks = [
            "skill_loaded" if loaded else "skill_not_loaded",
            "decision_right" if right else "decision_wrong",
        ]
        if right:
            feedback = self.context.allowed_feedback(
                f"the agent {did}, as it should for this prompt", "the load decision was right"
            )
        else:
            wanted = "should have loaded it" if should else "should not have loaded it"
            feedback = self.context.allowed_feedback(
                f"the agent {did}; it {wanted} for this prompt",
                f"the agent {did}, and that was the wrong decision for this prompt",
            )
        return self.make(int(right), float(right), checks, feedback)


class Proportion(BaseModel):
    """``k`` of ``n``: its value and Wilson 95% interval (None when ``n`` is 0)."""

    k: int
    n: int
    value: float | None
    ci95: list[float] | None

    @classmethod
    def of(cls, k: int, n: int) -> Proportion:
        interval = wilson(k, n)
        return cls(
            k=k,
            n=n,
            value=round(k / n, 6) if n else None,
            ci95=[round(interval[0], 6), round(interval[1], 6)] if interval else None,
        )


class TriggerStats(BaseModel):
    """Load decisions on trigger tasks, one per scored rollout (replicates count as trials).

    ``tp``: loaded when it should; ``fp``: loaded when it should not; ``fn``: not loaded when
    it should; ``tn``: not loaded when it should not. precision = tp / (tp + fp), recall =
    tp / (tp + fn), accuracy = (tp + tn) / n. ``undecided``: rollouts of trigger tasks with no
    decision (not scored, or a backend that cannot tell), left out of every figure.
    """

    n_tasks: int
    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    undecided: int = 0
    precision: Proportion
    recall: Proportion
    accuracy: Proportion


def trigger_stats(decisions: Iterable[tuple[str, bool, bool | None]]) -> TriggerStats | None:
    """The statistics of ``(task id, should_trigger, skill_loaded)`` triples (None when empty)."""
    rows = list(decisions)
    if not rows:
        return None
    decided = [(t, should, bool(loaded)) for t, should, loaded in rows if loaded is not None]
    tp = sum(1 for _, should, loaded in decided if should and loaded)
    fp = sum(1 for _, should, loaded in decided if not should and loaded)
    fn = sum(1 for _, should, loaded in decided if should and not loaded)
    tn = sum(1 for _, should, loaded in decided if not should and not loaded)
    n = len(decided)
    return TriggerStats(
        n_tasks=len({t for t, _, _ in decided}),
        n=n,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        undecided=len(rows) - n,
        precision=Proportion.of(tp, tp + fp),
        recall=Proportion.of(tp, tp + fn),
        accuracy=Proportion.of(tp + tn, n),
    )
