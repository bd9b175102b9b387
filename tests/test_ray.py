"""The Ray executor on a local Ray instance: same contract, same scores as local workers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from skilltune.compare import compare
from skilltune.evaluate import evaluate
from skilltune.execute.ray import RayExecutor
from skilltune.skill import load_skill
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE, PYENV_SUITE

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[RayExecutor]:
    executor = RayExecutor(workers=2)
    try:
        yield executor
    finally:
        executor.shutdown()


def _records(out: Path) -> dict[str, dict[str, object]]:
    found = {}
    for path in sorted(out.glob("rollouts/*/*/*/record.json")):
        record = json.loads(path.read_text())
        key = f"{record['candidate'][:12]}/{record['task_id']}#{record['replicate']}"
        found[key] = {"status": record["status"], "score": record["score"], "phase": record["phase"]}
        for name in ("conversation.json", "events.jsonl", "diff.patch", "output.txt"):
            assert (path.parent / name).is_file(), path.parent / name
    return found


def test_ray_gives_the_same_scores_as_local_workers(tmp_path: Path, ray_executor: RayExecutor) -> None:
    local = evaluate(MOCK_SUITE, MOCK_SKILL, split="val", reps=2, out=tmp_path / "local", workers=2)
    remote = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="val", reps=2, out=tmp_path / "ray", executor=ray_executor
    )
    assert remote.per_task == local.per_task
    assert (remote.hard_acc, remote.mixed) == (local.hard_acc, local.mixed)
    assert _records(tmp_path / "ray") == _records(tmp_path / "local")


def test_ray_compare_and_python_env_suites(tmp_path: Path, ray_executor: RayExecutor) -> None:
    from skilltune.agents import get_backend
    from skilltune.agents.mock import MockOptions
    from skilltune.compare import build_comparison, run_arms
    from skilltune.rollout import RolloutRunner
    from skilltune.suite import load_suite

    suite = load_suite(MOCK_SUITE)
    arms = {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL)}
    runner = RolloutRunner(
        suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path / "cmp"
    )
    on_ray = build_comparison(
        suite, "test", "mock", 2, "mixed", run_arms(suite, arms, runner, ray_executor, "test", 2, 0, "test")
    )
    local = compare(MOCK_SUITE, arms, split="test", reps=2, out=tmp_path / "local")
    assert on_ray.arms == local.arms and on_ray.pairs == local.pairs
    env_local = evaluate(
        PYENV_SUITE, PYENV_SUITE / "skill", split="train", out=tmp_path / "env-local", workers=1
    )
    env_ray = evaluate(
        PYENV_SUITE, PYENV_SUITE / "skill", split="train", out=tmp_path / "env-ray", executor=ray_executor
    )
    assert env_ray.per_task == env_local.per_task


def test_ray_fills_and_reads_the_cache_on_the_driver(tmp_path: Path, ray_executor: RayExecutor) -> None:
    cache = tmp_path / "cache"
    first = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "a", executor=ray_executor, cache=cache
    )
    assert len(list(cache.rglob("record.json"))) == len(first.per_task)
    again = evaluate(
        MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "b", executor=ray_executor, cache=cache
    )
    assert again.per_task == first.per_task
    records = [json.loads(p.read_text()) for p in (tmp_path / "b").glob("rollouts/eval/*/*/record.json")]
    assert records and all(r["cached_from"] for r in records)


def test_a_worker_that_dies_is_requeued_once_then_recorded_as_crashed(
    tmp_path: Path, ray_executor: RayExecutor
) -> None:
    """An agent that kills its Ray worker: the rollout runs twice, then it is a crashed record (never a
    task failure), the batch is contaminated, and the other rollouts land as usual."""
    import stat
    import textwrap

    from tests.helpers import write_suite

    counter = tmp_path / "starts.txt"
    killer = tmp_path / "killer"
    killer.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            [ "$1" = --version ] && echo 1.0 && exit 0
            echo start >> {counter}
            kill -9 $PPID
            """)
    )
    killer.chmod(killer.stat().st_mode | stat.S_IXUSR)
    task = {"id": "t", "prompt": "p", "scoring": {"mode": "exact", "expected": "x"}}
    suite = write_suite(tmp_path / "suite", [dict(task, id="train-t")], [task])
    summary = evaluate(
        suite,
        None,
        agent="claude",
        out=tmp_path / "out",
        executor=ray_executor,
        agent_options={"executable": str(killer), "wall_limit_s": 60},
    )
    assert counter.read_text().split() == ["start", "start"]
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("record.json")]
    assert record["status"] == "crashed" and record["score"] is None and record["attempts"] == 2
    assert "Ray lost this rollout twice" in record["reason"]
    assert summary.contaminated and summary.statuses == {"crashed": 1}
    after = evaluate(MOCK_SUITE, MOCK_SKILL, split="test", out=tmp_path / "after", executor=ray_executor)
    assert after.n_scored == after.n_rollouts  # the executor still works
