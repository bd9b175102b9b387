"""Failure groups in code (skilltune/propose/groups.py) and a step's asks (propose/asks.py): the keys of a
failed rollout by scoring mode and feedback policy, the groups largest first, the summary every prompt
opens with, and the focused and sample packets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skilltune.proposal import EvidencePacket, Trajectory
from skilltune.propose.asks import ASK_EDITS, SAMPLE_TEMPERATURE, ask_packet, plan_asks
from skilltune.propose.groups import NOT_ALONE, OTHER_ANSWERS, failure_groups, failure_keys, summary
from skilltune.runfiles import RolloutRecord
from skilltune.score import make_score
from skilltune.suite import load_suite
from tests.helpers import write_suite


def _record(task: str, hard: int, checks: list[str], status: str = "ok") -> RolloutRecord:
    return RolloutRecord.model_validate(
        {
            "task_id": task,
            "split": "train",
            "phase": "train",
            "replicate": 1000,
            "seed": 0,
            "candidate": "c" * 64,
            "agent": "mock",
            "options_hash": "o",
            "task_hash": "h",
            "status": status,
            "wall_s": 0.1,
            "started_at": "2026-01-01T00:00:00+00:00",
            "score": make_score(hard, float(hard), checks, weight=0.5, contract="x"),
        }
    )


def _routing(root: Path, feedback: str = "full") -> Any:
    tasks = [
        {"id": f"t{i}", "prompt": f"Ticket {i}: where does it go?",
         "scoring": {"mode": "exact", "expected": rf"(?i)^\W*{label}\W*$"}}
        for i, label in enumerate(["outage", "outage", "billing", "account", "outage"])
    ]  # fmt: skip
    tasks.append(
        {
            "id": "ticket",
            "prompt": "Which ticket?",
            "scoring": {"mode": "exact", "expected": r"^\W*48213\W*$"},
        }
    )
    val = [tasks[0] | {"id": "v0"}]
    return load_suite(write_suite(root, tasks, val, config={"default_mode": "exact", "feedback": feedback}))


def test_exact_keys_name_the_plain_answer_or_that_it_was_not_alone(tmp_path: Path) -> None:
    suite = _routing(tmp_path / "s")
    miss = _record("t0", 0, ["expected_missing"])
    assert failure_keys(miss, suite.task("t0"), suite, "Customer Support") == ["answer:outage"]
    assert failure_keys(miss, suite.task("t0"), suite, "It is an Outage, clearly.") == [NOT_ALONE]
    assert failure_keys(_record("t0", 1, ["expected_found"]), suite.task("t0"), suite, "outage") == []
    timeout = _record("ticket", 0, ["expected_missing"], status="timeout")
    assert failure_keys(timeout, suite.task("ticket"), suite, "") == ["status:timeout", "answer:48213"]
    hidden = _routing(tmp_path / "h", feedback="no-answers")  # the key names no answer the policy hides
    assert failure_keys(miss, hidden.task("t0"), hidden, "Customer Support") == ["exact:missing"]


def test_checklist_and_receipt_keys(tmp_path: Path) -> None:
    task = {"id": "c", "prompt": "p", "scoring": {"mode": "checklist", "required": ["PASS:a", "PASS:b"]}}
    suite = load_suite(write_suite(tmp_path / "c", [task], [task | {"id": "v"}]))
    record = _record("c", 0, ["found:PASS:a", "missing:PASS:b"])
    assert failure_keys(record, suite.task("c"), suite, "") == ["missing:PASS:b"]
    # receipt modes (rubric, judge, a Python env): read from the checks their authors write as receipts
    from skilltune.propose.groups import _receipt_keys

    assert _receipt_keys(["symptom:too-long", "crit:x=1"]) == ["symptom:too-long"]
    assert _receipt_keys(["crit:clarity=0.5", "crit:facts=0.25", "crit:tone=1.0"]) == ["criterion:facts"]
    assert _receipt_keys(["crit:tone=1.0"]) == []


def _trajectory(tid: str, keys: list[str], output: str = "x", hard: int = 0) -> Trajectory:
    return Trajectory(
        id=f"{tid}#r1000", task_id=tid, prompt="p", output=output, hard=hard, soft=float(hard), status="ok",
        mode="exact", failure_keys=keys,
    )  # fmt: skip


def test_groups_largest_first_answers_seen_once_pooled_and_the_summary() -> None:
    failures = [
        _trajectory("a", ["answer:outage"], "Customer Support"),
        _trajectory("b", ["answer:outage"], "Customer Support"),
        _trajectory("c", ["answer:billing"], "account"),
        _trajectory("d", ["answer:48213"], "The ticket is 48"),
        _trajectory("e", [NOT_ALONE], "It is outage."),
        _trajectory("f", ["answer:outage"], "billing"),
    ]
    groups = failure_groups(failures)
    assert [(g.key, len(g.trajectories)) for g in groups] == [
        ("answer:outage", 3), (OTHER_ANSWERS, 2), (NOT_ALONE, 1)
    ]  # fmt: skip
    assert groups[0].label == "expected answer: outage"
    assert groups[0].gave == ["'Customer Support' x2", "'billing'"]
    text = summary(groups, failed=6, total=8)
    assert text.splitlines()[0] == "6 of 8 rollouts failed. By what went wrong:"
    assert "- expected answer: outage (3 rollouts; the agent gave 'Customer Support' x2, 'billing')" in text
    assert summary([], failed=0, total=8) == "All 8 rollouts passed."


def _packet(failures: list[Trajectory], successes: list[Trajectory]) -> EvidencePacket:
    return EvidencePacket(
        step=1, mode="patch", skill_files={"SKILL.md": "x"}, skill_main="SKILL.md", failures=failures,
        successes=successes, max_edits=8, seed=1,
    )  # fmt: skip


def test_asks_one_focused_per_group_then_samples_and_their_packets() -> None:
    failures = [
        _trajectory("a", ["missing:PASS:x", "missing:RESULT"]),
        _trajectory("b", ["missing:PASS:y", "missing:RESULT"]),
        _trajectory("c", ["missing:PASS:y", "missing:RESULT"]),
    ]
    successes = [_trajectory(s, [], hard=1) for s in ("s1", "s2", "s3")]
    packet = _packet(failures, successes)
    asks = plan_asks(packet, 4)
    # RESULT, which every failure shares, singles nothing out: no focused ask of its own
    # then round the groups again, each repeat hotter with its own seed
    assert [(a.focus.key if a.focus else None, a.repeat) for a in asks] == [
        ("missing:PASS:y", 0), ("missing:PASS:x", 0), ("missing:PASS:y", 1), ("missing:PASS:x", 1)
    ]  # fmt: skip
    assert [a.kind for a in plan_asks(packet, 1)] == ["focus"]
    assert plan_asks(_packet([], successes), 4) == []  # nothing failed: nothing to ask
    repeat = ask_packet(packet, asks[2], seed=5, spent=[], reask=False)
    assert repeat.temperature == SAMPLE_TEMPERATURE and repeat.focus == asks[0].focus
    focused = ask_packet(packet, asks[0], seed=7, spent=["- old rule"], reask=False)
    assert [t.task_id for t in focused.failures] == ["b", "c"] and len(focused.successes) == 2
    assert focused.max_edits == ASK_EDITS and focused.temperature is None and focused.spent == []
    assert (focused.ask, focused.seed) == (1, 7)
    again = ask_packet(packet, asks[0], seed=8, spent=["- old rule"], reask=True)
    assert again.spent == ["- old rule"] and again.temperature == SAMPLE_TEMPERATURE
    description = packet.model_copy(update={"component": "description"})
    assert [a.kind for a in plan_asks(description, 3)] == ["sample"] * 3
    sample = ask_packet(description, plan_asks(description, 3)[0], seed=9, spent=[], reask=False)
    assert sample.focus is None and len(sample.failures) == 3 and sample.temperature == SAMPLE_TEMPERATURE


def test_a_focused_answer_in_plain_words_is_read_rule_by_rule() -> None:
    from skilltune.propose.llm import read_rules

    answer = (
        "Here are the rules:\n1. **Reply with the answer alone**, no sentence\n- Route outages to outage."
    )
    assert read_rules(answer) == ["Reply with the answer alone, no sentence.", "Route outages to outage."]
    assert read_rules('{"edits": [{"op": "append", "text": "Answer with the label only."}]}') == [
        "Answer with the label only."
    ]
    assert read_rules('```json\n{"edits": [{"text": "<the rule>"}]}\n```') == []  # the placeholder
    assert read_rules("exports") == [] and read_rules("# Rules:\n") == []  # a label, a heading
