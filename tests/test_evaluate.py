"""``skilltune run`` (skilltune/measure/evaluate.py): summary.json's figures from the records (every task
weighs the same), statuses and the contaminated flag, the InfraFailure when nothing was scored, and
the --out folder's refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import ClassVar

import pytest

from skilltune.agents import AGENTS, AgentRequest, AgentResult
from skilltune.agents.mock import MockAgent
from skilltune.errors import InfraFailure, UsageError
from skilltune.measure.evaluate import EvalSummary, evaluate
from skilltune.rollout.runner import RetryPolicy
from skilltune.runfiles import RolloutRecord
from skilltune.skill import load_skill
from skilltune.suite import load_suite
from tests.helpers import rule_task, tree, write_skill, write_suite

NO_WAIT = RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0)
NO_RETRY = RetryPolicy(max_attempts=1, base_s=0.0, cap_s=0.0)
RULE = "state-a-default"


class FirstReplicateDown(MockAgent):
    """The mock agent, whose endpoint is down for replicate 0 of task ``a`` only."""

    name: ClassVar[str] = "first-replicate-down"

    def run(self, request: AgentRequest) -> AgentResult:
        if request.task.id == "a" and request.replicate == 0:
            return AgentResult(status="infra_error", reason="test: endpoint down for a#r0")
        return super().run(request)


@pytest.fixture
def half_down() -> Iterator[str]:
    AGENTS.register(FirstReplicateDown.name, FirstReplicateDown)
    try:
        yield FirstReplicateDown.name
    finally:
        AGENTS.unregister(FirstReplicateDown.name)


def _records(out: Path) -> list[RolloutRecord]:
    return [RolloutRecord.read(p) for p in sorted(out.glob("rollouts/eval/*/*/record.json"))]


def test_summary_figures_are_equal_weight_task_means_of_the_records(tmp_path: Path, half_down: str) -> None:
    """Task a has one scored replicate (a pass), b two (fails), c two (passes): each task weighs the
    same, so hard accuracy is (1 + 0 + 1) / 3, not the pooled 3 / 5."""
    tasks = [rule_task("a", [RULE]), rule_task("b", ["never-stated"]), rule_task("c", [RULE])]
    suite = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], tasks)
    skill = write_skill(tmp_path / "skill", f"- {RULE}")
    summary = evaluate(suite, skill, agent=half_down, out=tmp_path / "out", reps=2, workers=2, retry=NO_RETRY)
    records = _records(tmp_path / "out")
    assert len(records) == summary.n_rollouts == 6
    scored = {t: [r.score for r in records if r.task_id == t and r.score] for t in ("a", "b", "c")}
    assert {t: len(s) for t, s in scored.items()} == {"a": 1, "b": 2, "c": 2}
    for metric in ("hard", "soft", "mixed"):
        expected = mean(mean(getattr(s, metric) for s in scored[t]) for t in scored)
        figure = {"hard": summary.hard_acc, "soft": summary.soft_acc, "mixed": summary.mixed}[metric]
        assert figure == pytest.approx(expected, abs=1e-6), metric
    assert summary.hard_acc == pytest.approx(2 / 3, abs=1e-6)
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    assert summary.statuses == statuses and statuses["infra_error"] == 1
    assert summary.contaminated  # an infra error is left after the retries
    assert summary.n_scored == 5 and summary.per_task["a"].n_scored == 1
    assert summary.per_task["a"].mixed_per_replicate[0] is None
    assert summary.per_task["b"].hard == 0 and summary.per_task["c"].hard == 1
    assert summary.skill_hash == load_skill(skill).hash
    on_disk = EvalSummary.model_validate_json((tmp_path / "out" / "summary.json").read_text())
    assert on_disk.model_copy(update={"wall_s": summary.wall_s}) == summary


def test_a_clean_run_is_not_contaminated(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], [rule_task("v", [RULE])])
    summary = evaluate(suite, None, out=tmp_path / "out", reps=2, workers=1)
    assert not summary.contaminated and summary.n_scored == 2
    assert summary.hard_acc == 0.0 and summary.skill_hash == "noskill"  # no skill states the rule


def test_every_rollout_an_infra_error_raises_after_writing_the_summary(tmp_path: Path) -> None:
    tasks = [rule_task("v1", [RULE], mock_infra_errors=99), rule_task("v2", [RULE], mock_infra_errors=99)]
    suite = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], tasks)
    with pytest.raises(InfraFailure, match=r"all 2 rollout\(s\) ended infra_error.*HTTP 529") as caught:
        evaluate(suite, None, out=tmp_path / "out", workers=1, retry=NO_RETRY)
    assert str(tmp_path / "out" / "rollouts" / "eval") in str(caught.value)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["statuses"] == {"infra_error": 2} and summary["hard_acc"] is None
    assert len(_records(tmp_path / "out")) == 2  # the records stay, to be read


def test_out_is_refused_inside_the_suite_and_over_results_without_force(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite", [rule_task("t", [RULE])], [rule_task("v", [RULE])])
    suite = load_suite(root)
    before = tree(tmp_path)
    with pytest.raises(UsageError, match="lies inside the suite"):
        evaluate(suite, None, out=root / "results")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(UsageError, match="is a file; give a folder"):
        evaluate(suite, None, out=a_file)
    assert tree(tmp_path) == sorted([*before, "a-file"])
    out = tmp_path / "out"
    evaluate(suite, None, out=out)
    (out / "notes.txt").write_text("mine\n")
    old = _records(out)
    with pytest.raises(UsageError, match=r"already holds results; .*--force"):
        evaluate(suite, None, out=out, reps=2)
    assert _records(out) == old
    evaluate(suite, None, out=out, reps=2, force=True)
    assert len(_records(out)) == 2 and (out / "notes.txt").read_text() == "mine\n"  # only results replaced


def test_summary_excludes_infra_errors_and_flags_contamination(tmp_path: Path) -> None:
    tasks = [
        rule_task("good", ["state-a-default"]),
        rule_task("down", ["state-a-default"], mock_infra_errors=99),
    ]
    suite = load_suite(write_suite(tmp_path / "suite", [rule_task("t", ["x"])], tasks))
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    summary = evaluate(suite, skill, out=tmp_path / "out", split="val", reps=2, workers=2, retry=NO_WAIT)
    assert summary.statuses == {"infra_error": 2, "ok": 2}
    assert summary.contaminated
    assert summary.hard_acc == 1.0  # the infra errors are not counted as failures
    assert summary.per_task["down"].n_scored == 0
