"""The run's budgets (skilltune/training/budget.py): what counts as spent, what a resumed unit owes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skilltune.agents import get_backend
from skilltune.agents.mock import MockOptions
from skilltune.progress import PlainReporter
from skilltune.rollout.runner import RolloutJob, RolloutRunner, rollout_dir
from skilltune.rundir import RunDir
from skilltune.skill import load_skill
from skilltune.store import read_json
from skilltune.suite import load_suite
from skilltune.training import train
from skilltune.training.budget import Budget, BudgetExhausted
from tests.helpers import MOCK_SKILL, MOCK_SUITE


def _record_json(tmp_path: Path) -> str:
    suite = load_suite(MOCK_SUITE)
    runner = RolloutRunner(suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path)
    job = RolloutJob(suite.tasks("val")[0], "gate", load_skill(MOCK_SKILL), 0, 0)
    runner.run(job)
    return (rollout_dir(tmp_path, job) / "record.json").read_text()


def _place_records(run: RunDir, unit: str, n: int, text: str) -> None:
    for i in range(n):
        path = run.steps / unit / "rollouts" / "gate" / "c" / f"t_r{i}" / "record.json"
        path.parent.mkdir(parents=True)
        path.write_text(text)


def test_rollout_budget_counts_a_resumed_units_own_rollouts_once(tmp_path: Path) -> None:
    """Budget.check raises only when (spent - already) + need > budget, with the message of an uninterrupted run."""
    text = _record_json(tmp_path / "one")
    run = RunDir(tmp_path / "run")
    _place_records(run, "step_0001", 5, text)  # earlier units
    fresh_message = ""
    try:
        Budget(rollouts=8).check(run, need=4, already=0)
    except BudgetExhausted as exc:
        fresh_message = str(exc)
    assert "rollout budget" in fresh_message
    Budget(rollouts=9).check(run, need=4, already=0)

    _place_records(run, "step_0002", 3, text)  # the interrupted unit's own rollouts
    Budget(rollouts=9).check(run, need=4, already=3)  # 8 - 3 + 4 = 9: paid
    with pytest.raises(BudgetExhausted) as caught:
        Budget(rollouts=8).check(run, need=4, already=3)
    assert str(caught.value) == fresh_message
    with pytest.raises(BudgetExhausted):
        Budget(rollouts=9).check(run, need=4, already=0)  # the same 8 records, not the unit's own


def test_rollouts_copied_from_a_shared_cache_cost_the_run_nothing(tmp_path: Path) -> None:
    """A second run replaying every rollout from the shared cache spends no rollout budget."""
    from skilltune.training.budget import spent

    cache = str(tmp_path / "cache")
    kwargs: dict[str, Any] = {"runs_dir": str(tmp_path), "max_steps": 2, "seed": 4, "cache": cache}
    first = train(MOCK_SUITE, MOCK_SKILL, tag="a", reporter=PlainReporter(quiet=True), **kwargs)
    second = train(MOCK_SUITE, MOCK_SKILL, tag="b", reporter=PlainReporter(quiet=True), **kwargs)
    assert first.best_hash == second.best_hash
    ran = spent(RunDir(tmp_path / "a"))
    replayed = spent(RunDir(tmp_path / "b"))
    assert ran.rollouts > 0 and replayed.rollouts == 0 and replayed.cost_usd == 0
    units = list((tmp_path / "b" / "steps").glob("*/step.json"))
    assert units and all(read_json(u)["rollouts"] == 0 for u in units)
    cached = list((tmp_path / "b").rglob("record.json"))
    assert cached and all(read_json(p)["cached_from"] for p in cached)
