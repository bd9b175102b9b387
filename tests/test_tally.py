"""Figures over rollout records (skilltune/rollout/tally.py): per-unit scores in canonical order, the
accuracy that weighs every task the same whatever its number of replicates, and the units a gate
pairs: a task, or (agent, task) where the files name agents, named and ordered as the files name them."""

from __future__ import annotations

from skilltune.rollout.tally import Unit, accuracy, per_task_scores, unit_of
from skilltune.runfiles import RolloutRecord
from skilltune.score.base import Score


def _record(task: str, rep: int, hard: float | None, target: str | None = None) -> RolloutRecord:
    score = None if hard is None else Score(hard=hard, soft=hard, mixed=hard, contract="c")
    return RolloutRecord(
        task_id=task, split="val", phase="eval", replicate=rep, seed=0, candidate="c", agent="mock",
        target=target, options_hash="o", task_hash="t", status="ok" if score else "scoring_error",
        score=score, wall_s=0.0, attempts=1, started_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip


def test_per_task_scores_are_in_task_then_replicate_order_with_none_for_unscored() -> None:
    records = [_record("b", 1, 0.0), _record("a", 0, 1.0), _record("b", 0, None), _record("b", 2, 1.0)]
    assert per_task_scores(records, "hard") == {Unit("a"): [1.0], Unit("b"): [None, 0.0, 1.0]}


def test_accuracy_weighs_tasks_equally_and_skips_unscored() -> None:
    # a: one replicate at 1.0; b: three replicates, mean 0.5 over the two scored: (1.0 + 0.5) / 2
    records = [_record("a", 0, 1.0), _record("b", 0, 0.0), _record("b", 1, 1.0), _record("b", 2, None)]
    assert accuracy(records, "hard") == 0.75
    assert accuracy([_record("c", 0, None)], "hard") is None
    assert accuracy([], "hard") is None


def test_a_unit_is_its_task_or_its_agent_and_task_named_and_ordered_as_the_files_name_it() -> None:
    plain, labelled = _record("t1", 0, 1.0), _record("t1", 0, 1.0, target="a")
    assert (unit_of(plain), unit_of(labelled)) == (Unit("t1"), Unit("t1", "a"))
    assert (str(unit_of(plain)), str(unit_of(labelled))) == ("t1", "a/t1")
    # "a-b/t" sorts before "a/t" ('-' before '/'), as the names did; a tuple order would differ
    units = [Unit("t", "a"), Unit("t", "a-b"), Unit("s", "a")]
    assert [str(u) for u in sorted(units)] == sorted(str(u) for u in units) == ["a-b/t", "a/s", "a/t"]


def test_a_gate_pairs_each_agents_task_apart_and_the_accuracy_pools_them_unless_asked_not_to() -> None:
    # t1: agent a scored 1.0 twice, agent b once 0.0 (its other replicate unscored)
    records = [_record("t1", 0, 1.0, "a"), _record("t1", 1, 1.0, "a"), _record("t1", 0, 0.0, "b")]
    records.append(_record("t1", 1, None, "b"))
    assert per_task_scores(records, "hard") == {Unit("t1", "a"): [1.0, 1.0], Unit("t1", "b"): [0.0, None]}
    assert per_task_scores(records, "hard", pool_agents=True) == {Unit("t1"): [1.0, 0.0, 1.0, None]}
    assert accuracy(records, "hard") == round(2 / 3, 6)  # one task, its three scored replicates
    assert accuracy(records, "hard", pool_agents=False) == 0.5  # two units: 1.0 and 0.0
