"""One rollout end to end: layout, statuses, retries, the diff, record reuse (workspaces: test_workspace.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from skilltune.agents import AGENTS, AgentBackend, AgentRequest, AgentResult, get_backend
from skilltune.agents.mock import MockOptions
from skilltune.measure.evaluate import evaluate
from skilltune.rollout.runner import RetryPolicy, RolloutJob, RolloutRunner, load_record, rollout_dir
from skilltune.skill import load_skill
from skilltune.store import write_json
from skilltune.suite import load_suite
from tests.helpers import MOCK_SKILL, MOCK_SUITE, rule_task, write_skill, write_suite

NO_WAIT = RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0)
NO_RETRY = RetryPolicy(max_attempts=1, base_s=0, cap_s=0)


def _runner(suite_path: Path, out: Path, **kw: object) -> RolloutRunner:
    suite = load_suite(suite_path)
    return RolloutRunner(
        suite=suite,
        backend=get_backend("mock"),
        options=MockOptions(),
        out=out,
        retry=NO_WAIT,
        **kw,  # type: ignore[arg-type]
    )


def test_layout_and_record(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "suite", [rule_task("a/b c", ["state-a-default"])], [rule_task("v1", ["state-a-default"])]
    )
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    runner = _runner(suite, tmp_path / "out")
    job = RolloutJob(task=runner.suite.task("a/b c"), phase="train", candidate=skill, replicate=2, seed=7)
    record = runner.run(job)
    folder = tmp_path / "out" / "rollouts" / "train" / skill.short / "a_b_c_r2"
    assert rollout_dir(tmp_path / "out", job) == folder
    assert sorted(p.name for p in folder.iterdir()) == [
        "conversation.json",
        "diff.patch",
        "events.jsonl",
        "output.txt",
        "record.json",
        "score.json",
    ]
    assert record.status == "ok"
    assert record.score is not None and record.score.hard == 1
    assert record.candidate == skill.hash
    assert (record.task_id, record.split, record.replicate, record.seed) == ("a/b c", "train", 2, 7)
    assert load_record(folder) == record
    score = json.loads((folder / "score.json").read_text())
    assert set(score) == {"schema_version", "hard", "soft", "mixed", "checks", "contract", "feedback"}
    assert score["contract"] == runner.suite.contract_hash
    assert score["feedback"].startswith("2 of 2 required items in the output (found: 'PASS:state-a-default'")
    conversation = json.loads((folder / "conversation.json").read_text())
    assert [m["role"] for m in conversation] == ["user", "assistant", "system"]
    assert conversation[0]["content"] == "Do the a/b c thing."
    # No reference answer in the conversation: the summary has numbers, not checks or feedback.
    assert "PASS:state-a-default" not in conversation[2]["content"]
    assert "required items" not in conversation[2]["content"]


def test_diff_holds_the_agents_changes_only(tmp_path: Path) -> None:
    fixture = tmp_path / "suite" / "fixtures" / "draft.md"
    fixture.parent.mkdir(parents=True)
    fixture.write_text("draft\n")
    task = rule_task(
        "t",
        ["state-a-default"],
        files=["fixtures/draft.md"],
        mock_writes={"draft.md": "final\n", "new/x.txt": "x\n"},
    )
    suite = write_suite(tmp_path / "suite", [task], [rule_task("v", ["x"])])
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    runner = _runner(suite, tmp_path / "out")
    record = runner.run(
        RolloutJob(task=runner.suite.task("t"), phase="eval", candidate=skill, replicate=0, seed=0)
    )
    diff = (
        rollout_dir(tmp_path / "out", RolloutJob(runner.suite.task("t"), "eval", skill, 0, 0)) / "diff.patch"
    ).read_text()
    assert record.status == "ok"
    assert "-draft" in diff and "+final" in diff
    assert "new/x.txt" in diff  # new files are part of the diff
    assert "SKILL.md" not in diff  # the placed skill is in the baseline, not the agent's diff


def test_infra_errors_are_retried_and_never_task_failures(tmp_path: Path) -> None:
    tasks = [
        rule_task("flaky", ["state-a-default"], mock_infra_errors=2),
        rule_task("down", ["state-a-default"], mock_infra_errors=99),
    ]
    suite = write_suite(tmp_path / "suite", tasks, [rule_task("v", ["x"])])
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    runner = _runner(suite, tmp_path / "out")
    flaky = runner.run(RolloutJob(runner.suite.task("flaky"), "train", skill, 0, 0))
    assert flaky.status == "ok" and flaky.attempts == 3 and flaky.score is not None
    down = runner.run(RolloutJob(runner.suite.task("down"), "train", skill, 0, 0))
    assert down.status == "infra_error" and down.attempts == 3
    assert down.score is None
    assert not (
        rollout_dir(tmp_path / "out", RolloutJob(runner.suite.task("down"), "train", skill, 0, 0))
        / "score.json"
    ).exists()


def test_scoring_error_does_not_crash_the_batch(tmp_path: Path) -> None:
    tasks = [
        {"id": "slow", "prompt": "p", "scoring": {"mode": "command", "command": "sleep 20", "timeout": 0.3}},
        {"id": "fine", "prompt": "p", "scoring": {"mode": "command", "command": "true"}},
    ]
    suite = load_suite(write_suite(tmp_path / "suite", [rule_task("t", ["x"])], tasks))
    summary = evaluate(suite, None, out=tmp_path / "out", split="val", workers=2)
    assert summary.statuses == {"ok": 1, "scoring_error": 1}
    assert summary.per_task["slow"].n_scored == 0
    assert summary.hard_acc == 1.0


class _ExplodingAgent(AgentBackend):
    name = "exploding"
    calls: ClassVar[int] = 0

    def run(self, request: AgentRequest) -> AgentResult:
        type(self).calls += 1
        raise RuntimeError("harness bug")


def test_harness_exceptions_become_crashed_after_two_tries(tmp_path: Path) -> None:
    AGENTS.register("exploding", _ExplodingAgent)
    try:
        suite = write_suite(tmp_path / "suite", [rule_task("t", ["x"])], [rule_task("v", ["x"])])
        runner = RolloutRunner(
            suite=load_suite(suite),
            backend=get_backend("exploding"),
            options=MockOptions(),
            out=tmp_path / "out",
            retry=NO_WAIT,
        )
        record = runner.run(RolloutJob(runner.suite.task("t"), "train", None, 0, 0))
        assert record.status == "crashed"
        assert "harness bug" in (record.reason or "")
        assert _ExplodingAgent.calls == 2
        assert record.score is None
    finally:
        AGENTS.unregister("exploding")


def test_records_are_reused_only_for_the_same_job(tmp_path: Path) -> None:
    """RolloutRunner.reusable: same runner and job -> the record; other options, seed or infra_error -> None."""
    suite = load_suite(MOCK_SUITE)
    skill = load_skill(MOCK_SKILL)

    def runner(options: MockOptions) -> RolloutRunner:
        return RolloutRunner(suite=suite, backend=get_backend("mock"), options=options, out=tmp_path)

    job = RolloutJob(suite.tasks("val")[0], "gate", skill, 3, 7)
    record = runner(MockOptions()).run(job)
    assert runner(MockOptions()).reusable(job) == record
    assert runner(MockOptions(placement="system")).reusable(job) is None
    other_seed = RolloutJob(job.task, job.phase, skill, job.replicate, 8)
    assert rollout_dir(tmp_path, other_seed) == rollout_dir(tmp_path, job)
    assert runner(MockOptions()).reusable(other_seed) is None
    broken = record.model_copy(update={"status": "infra_error", "score": None})
    write_json(rollout_dir(tmp_path, job) / "record.json", broken)
    assert runner(MockOptions()).reusable(job) is None


def test_a_scoring_errors_reason_stays_out_of_the_conversation(tmp_path: Path) -> None:
    """A timed-out scoring command quoting an answer is in record.json's reason, not in conversation.json."""
    secret = "ANSWER-XYZZY-42"
    scoring = {"mode": "command", "command": f'sleep 5; grep -q {secret} "$TASK_OUTPUT"', "timeout": 0.3}
    task = rule_task("t", ["state-a-default"], scoring=scoring)
    suite = load_suite(write_suite(tmp_path / "suite", [task], [rule_task("v", ["state-a-default"])]))
    skill = load_skill(write_skill(tmp_path / "skill", "State a default."))
    runner = RolloutRunner(
        suite=suite, backend=get_backend("mock"), options=MockOptions(), out=tmp_path / "out", retry=NO_RETRY
    )
    job = RolloutJob(suite.task("t"), "train", skill, 0, 0)
    record = runner.run(job)
    assert record.status == "scoring_error"
    assert record.reason is not None and secret in record.reason
    folder = rollout_dir(tmp_path / "out", job)
    assert secret in (folder / "record.json").read_text()
    assert secret not in (folder / "conversation.json").read_text()
