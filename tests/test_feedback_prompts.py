"""Scorer feedback reaches the analyst (``--proposer api`` against the scripted server) for failed
train rollouts only, in every scoring mode, as far as scoring.md's ``feedback`` policy allows.

Each suite plants a distinctive marker in every task's expected answer: ``TRAIN-<id>`` in train
tasks, ``VALSECRET-<id>`` and ``TESTSECRET-<id>`` in val and test tasks. The val rollouts' own
score.json files hold their marker (so it could leak), and no proposer prompt may.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skilltune.progress import PlainReporter
from skilltune.runfiles import RolloutRecord
from skilltune.training import train
from tests.fakeserver import FakeModelServer, ModelRequest, Reply, ToolCall
from tests.helpers import prompt_section, rule_task, trajectory_blocks, write_skill, write_suite

RULE = "state-the-rule"
FIX = "- State the rule before anything else: state-the-rule."
MARKERS = {"train": "TRAIN", "val": "VALSECRET", "test": "TESTSECRET"}
HELD_OUT = re.compile(r"VALSECRET|TESTSECRET")
FOUND = re.compile(r"(TRAIN|VALSECRET|TESTSECRET)-[a-z0-9]+")

RUBRIC = """\
def score(task, workdir, mode):
    answer = task["scoring"]["answer"]
    return {"hard": 0, "soft": 0.0, "checks": ["symptom:wrong-answer"], "feedback": f"the answer was {answer}"}
"""

ENV = """\
from pathlib import Path

SPLITS = {"train": ["t1", "t2"], "val": ["v1", "v2"], "test": ["x1"]}
MARKERS = {"train": "TRAIN", "val": "VALSECRET", "test": "TESTSECRET"}


def tasks(split):
    return [
        {"id": i, "prompt": f"Do the {i} thing.", "requires": ["state-the-rule"],
         "failure_hints": {"state-the-rule": "symptom of missing state-the-rule"},
         "scoring": {"answer": f"{MARKERS[split]}-{i}"}}
        for i in SPLITS[split]
    ]


def prepare(task, workspace):
    Path(workspace, "notes.txt").write_text("notes")


def score(task, workspace, agent_result):
    solved = "RESULT: solved" in agent_result.final_text
    return {"hard": int(solved), "soft": float(solved), "checks": ["symptom:wrong-answer"],
            "feedback": ["the checker ran", f"expected {task.scoring['answer']}"]}
"""

# What the analyst must read in a failed train rollout's feedback, per mode (``{m}``: the marker).
FULL = {
    "exact": ["expected answer: {m} ("],
    "checklist": ["missing: 'RESULT: solved', '{m}'", "0 of 2 required items"],
    "command": ["exited 3 (failed)", "FAILED {m}"],
    "rubric": ["the answer was {m}"],
    "judge": ["- answer 0.00: the output lacks {m}"],
    "pyenv": ["the checker ran\nexpected {m}"],
}
NO_ANSWERS = {
    "exact": "the output did not hold the expected answer (the suite keeps it hidden; the agent answered: ",
    "checklist": "0 of 2 required items in the output (the suite keeps them hidden)",
    "command": "the scoring command exited 3 (failed; the suite keeps the command and its output hidden)",
    "rubric": None,  # free text of rubric.py is dropped; its checks (receipts) stay
    "judge": "- answer 0.00",
    "pyenv": None,
}


def suite_for(mode: str, root: Path, url: str, policy: str | None) -> Path:
    config: dict[str, Any] = {"mixed_weight": 0.5, **({"feedback": policy} if policy else {})}
    if mode == "pyenv":
        root.mkdir(parents=True)
        (root / "env.py").write_text(f"CONFIG = {config!r}\n{ENV}", encoding="utf-8")
        return root

    def task(task_id: str, split: str) -> dict[str, Any]:
        marker = f"{MARKERS[split]}-{task_id}"
        scoring: dict[str, dict[str, Any]] = {
            "exact": {"mode": "exact", "expected": marker},
            "checklist": {"mode": "checklist", "required": ["RESULT: solved", marker]},
            "command": {"mode": "command", "command": f"echo collected 1 item; echo FAILED {marker}; exit 3"},
            "rubric": {"mode": "rubric", "answer": marker},
            "judge": {"mode": "judge"},
        }
        extra: dict[str, Any] = (
            {"reference_text": f"A good answer names {marker}."} if mode == "judge" else {}
        )
        return rule_task(task_id, [RULE], scoring=scoring[mode], **extra)

    if mode == "judge":
        config["judge"] = {"model": "judge-model", "base_url": f"{url}/v1", "samples": 1, "timeout": 5}
    write_suite(
        root,
        [task("t1", "train"), task("t2", "train")],
        [task("v1", "val"), task("v2", "val")],
        [task("x1", "test")],
        config=config,
    )
    if mode == "rubric":
        (root / "rubric.py").write_text(RUBRIC, encoding="utf-8")
    if mode == "judge":
        (root / "judge.md").write_text("# Judge\n\n`answer`: the output names the expected answer.\n")
    return root


def judge(request: ModelRequest) -> Reply:
    """A judge that quotes the reference's marker in its evidence (evidence may hold the answer)."""
    reference = request.text.split("## The output under evaluation", 1)[0]
    marker = FOUND.search(reference)
    assert marker is not None, "the judge was not shown the reference"
    verdict = {
        "criteria": [{"name": "answer", "score": 0.0, "evidence": f"the output lacks {marker.group(0)}"}],
        "overall": 0.0,
        "passed": False,
        "reasoning": f"It should name {marker.group(0)}.",
    }
    return Reply(tool_calls=[ToolCall("record_verdict", verdict)])


def analyst(request: ModelRequest) -> Reply:
    """The analyst: one edit (the fix) citing the first failed trajectory; a request offering the
    verdict tool is the judge (the analyst is offered its own, record_edits, and answers in text)."""
    if "record_verdict" in request.tools:
        return judge(request)
    failed = list(trajectory_blocks(request.text))
    edit = {"op": "append", "text": FIX, "rationale": "r", "support": failed[:1], "kind": "failure"}
    return Reply(text=json.dumps({"edits": [edit]}))


def run(tmp_path: Path, mode: str, policy: str | None, **settings: Any) -> tuple[list[str], Path]:
    """Train one step with ``--proposer api``; the analyst's prompts as the server received them."""
    with FakeModelServer(analyst, side=analyst) as server:
        suite = suite_for(mode, tmp_path / "suite", server.url, policy)
        result = train(
            suite, write_skill(tmp_path / "skill", "- Be brief."), tag="fb", runs_dir=str(tmp_path / "runs"),
            proposer="api", proposer_options={"model": "analyst-model", "base_url": f"{server.url}/v1"},
            reporter=PlainReporter(quiet=True), seed=0, **{"max_steps": 1, "proposals": 1, **settings},
        )  # fmt: skip  # one ask: the whole batch's prompt (a focused one renders trajectories the same way)
        prompts = [r.text for r in server.requests if "record_verdict" not in r.tools]
    assert result.state not in ("blocked", "crash"), result.reason
    assert prompts, "the analyst was never asked"
    return prompts, Path(result.run_dir)


def assert_held_out_stays_in_the_gate(run_dir: Path, prompts: list[str], planted: bool) -> None:
    """No val or test marker in any proposer prompt, reflections.json or conversation.json, while
    the val rollouts' score.json holds its own (``planted``: the policy let the scorer say it)."""
    val_feedback = [
        RolloutRecord.read(p).score.feedback  # type: ignore[union-attr]
        for p in run_dir.rglob("record.json")
        if RolloutRecord.read(p).split == "val" and RolloutRecord.read(p).score is not None
    ]
    assert val_feedback, "no val rollout was scored"
    assert any("VALSECRET-v" in f for f in val_feedback) == planted
    for prompt in prompts:
        assert not HELD_OUT.search(prompt)
    for path in [*run_dir.rglob("reflections.json"), *run_dir.rglob("conversation.json")]:
        assert not HELD_OUT.search(path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("mode", list(FULL))
def test_the_analyst_reads_each_modes_feedback_for_failed_train_rollouts_only(
    tmp_path: Path, mode: str
) -> None:
    prompts, run_dir = run(tmp_path, mode, None)
    blocks = trajectory_blocks(prompts[0])
    assert sorted(b.split("#")[0] for b in blocks) == ["t1", "t2"]  # train only, both failed
    for trajectory, block in blocks.items():
        feedback = prompt_section(block, "scorer_feedback")
        marker = f"TRAIN-{trajectory.split('#')[0]}"
        for expected in FULL[mode]:
            assert expected.format(m=marker) in feedback, (mode, feedback)
    assert ("<checks>" in prompts[0]) == (mode in ("rubric", "judge", "pyenv"))
    assert f'Valid trajectory ids: "{next(iter(blocks))}"' in prompts[0]
    assert_held_out_stays_in_the_gate(run_dir, prompts, planted=True)


@pytest.mark.parametrize("mode", list(NO_ANSWERS))
def test_no_answers_keeps_every_expected_answer_out_of_the_analysts_prompt(tmp_path: Path, mode: str) -> None:
    prompts, run_dir = run(tmp_path, mode, "no-answers")
    for prompt in prompts:
        assert not FOUND.search(prompt), (mode, FOUND.search(prompt))
    blocks = trajectory_blocks(prompts[0])
    assert len(blocks) == 2
    for block in blocks.values():
        feedback, hidden = prompt_section(block, "scorer_feedback"), NO_ANSWERS[mode]
        assert feedback.startswith(hidden) if hidden else feedback == "", feedback
        if mode in ("rubric", "pyenv"):
            assert prompt_section(block, "checks") == "symptom:wrong-answer"
    assert_held_out_stays_in_the_gate(run_dir, prompts, planted=False)


@pytest.mark.parametrize("mode", ["checklist", "rubric"])
def test_no_feedback_leaves_the_analyst_the_numbers_alone(tmp_path: Path, mode: str) -> None:
    prompts, run_dir = run(tmp_path, mode, "none")
    blocks = trajectory_blocks(prompts[0])
    assert len(blocks) == 2
    assert all("<scorer_feedback>" not in b and "<checks>" not in b for b in blocks.values())
    assert_held_out_stays_in_the_gate(run_dir, prompts, planted=False)


def test_no_val_figure_reaches_the_proposer(tmp_path: Path) -> None:
    """Step 1's edit is rejected by the gate on val: step 2's analyst learns that it was (in the
    rejected-edit buffer and the memory), never by how much: no gain, bound or val score."""
    asked: list[str] = []

    def scripted(request: ModelRequest) -> Reply:
        asked.append(request.text)
        failed = list(trajectory_blocks(request.text))
        text = "- Be polite." if len(asked) == 1 else FIX  # a useless edit first: the gate rejects it
        return Reply(text=json.dumps({"edits": [{"op": "append", "text": text, "support": failed[:1]}]}))

    with FakeModelServer(scripted, side=scripted) as server:
        suite = suite_for("checklist", tmp_path / "suite", server.url, None)
        result = train(
            suite, write_skill(tmp_path / "skill", "- Be brief."), tag="vf", runs_dir=str(tmp_path / "runs"),
            proposer="api", proposer_options={"model": "analyst-model", "base_url": f"{server.url}/v1"},
            reporter=PlainReporter(quiet=True), seed=0, max_steps=2, proposals=1,
        )  # fmt: skip  # one ask a step: step 2's one prompt holds the buffer and the memory
    gate = json.loads((Path(result.run_dir) / "steps" / "step_0001" / "gate.json").read_text())
    assert gate["decision"] == "reject" and len(asked) == 2
    rejected = prompt_section(asked[1], "rejected_edits")
    assert "- Be polite." in rejected and "- Be polite." in prompt_section(asked[1], "memory")
    for prompt in asked:
        assert gate["reason"] not in prompt
        assert not re.search(r"gain [+-]?\d|upper bound|val [+-]?\d|\d -> [+-]?\d", prompt), prompt
