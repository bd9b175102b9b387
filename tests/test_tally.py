"""Figures over rollout records (skilltune/rollout/tally.py): per-task scores in canonical order and the
accuracy that weighs every task the same whatever its number of replicates."""

from __future__ import annotations

from skilltune.rollout.tally import accuracy, per_task_scores
from skilltune.runfiles import RolloutRecord
from skilltune.score.base import Score


def _record(task: str, rep: int, hard: float | None) -> RolloutRecord:
    score = None if hard is None else Score(hard=hard, soft=hard, mixed=hard, contract="c")
    return RolloutRecord(
        task_id=task, split="val", phase="eval", replicate=rep, seed=0, candidate="c", agent="mock",
        options_hash="o", task_hash="t", status="ok" if score else "scoring_error", score=score,
        wall_s=0.0, attempts=1, started_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip


def test_per_task_scores_are_in_task_then_replicate_order_with_none_for_unscored() -> None:
    records = [_record("b", 1, 0.0), _record("a", 0, 1.0), _record("b", 0, None), _record("b", 2, 1.0)]
    assert per_task_scores(records, "hard") == {"a": [1.0], "b": [None, 0.0, 1.0]}


def test_accuracy_weighs_tasks_equally_and_skips_unscored() -> None:
    # a: one replicate at 1.0; b: three replicates, mean 0.5 over the two scored: (1.0 + 0.5) / 2
    records = [_record("a", 0, 1.0), _record("b", 0, 0.0), _record("b", 1, 1.0), _record("b", 2, None)]
    assert accuracy(records, "hard") == 0.75
    assert accuracy([_record("c", 0, None)], "hard") is None
    assert accuracy([], "hard") is None
