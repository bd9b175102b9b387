"""What each scoring mode says beside its score (score.json's ``feedback``), under each policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skilltune.agents.base import AgentResult
from skilltune.errors import ScoringError
from skilltune.judge.verdict import verdict_feedback
from skilltune.runfiles import Criterion, JudgeVerdict
from skilltune.score import Score, make_score
from skilltune.score.base import FEEDBACK_LIMIT
from skilltune.suite import Suite, load_suite, validate_suite
from tests.helpers import write_suite

POLICIES = ("full", "no-answers", "none")


def suite(tmp_path: Path, scoring: dict[str, Any], policy: str | None = None, rubric: str = "") -> Suite:
    config = {"feedback": policy} if policy else {}
    task = {"id": "t1", "prompt": "Route the ticket.", "scoring": scoring}
    root = write_suite(tmp_path / f"suite-{policy}", [task], [{**task, "id": "v1"}], config=config)
    if rubric:
        (root / "rubric.py").write_text(rubric, encoding="utf-8")
    return load_suite(root)


def feedback(loaded: Suite, text: str, workspace: Path | None = None) -> str:
    task = loaded.task("t1")
    ws = workspace or loaded.root.parent / "ws"
    ws.mkdir(exist_ok=True)
    score = loaded.scorer(task).score(task, ws, AgentResult(status="ok", final_text=text))
    assert isinstance(score, Score)
    return score.feedback


def test_exact_says_the_answer_the_pattern_encodes_and_what_the_agent_answered(tmp_path: Path) -> None:
    full = suite(tmp_path, {"mode": "exact", "expected": r"\bbilling\b"})
    assert feedback(full, "support") == "expected answer: billing (as a word; the agent answered: 'support')"
    assert feedback(full, "route: billing") == "the output held the expected answer: billing (as a word)"
    alone = suite(tmp_path / "a", {"mode": "exact", "expected": r"(?i)^\W*account\W*$"})
    assert feedback(alone, "Customer Support") == (
        "expected answer: account (alone in the output, ignoring case; the agent answered: 'Customer Support')"
    )
    assert feedback(alone, "**Account**") == (
        "the output held the expected answer: account (alone in the output, ignoring case; "
        "matched: '**Account**')"
    )
    regex = suite(tmp_path / "r", {"mode": "exact", "expected": r"answer:\s*4[0-9]", "ignore_case": True})
    assert feedback(regex, "") == (
        r"expected a match for the regex `answer:\s*4[0-9]` (ignoring case; the final output was empty)"
    )
    assert feedback(regex, "Answer: 42") == r"the output matched the regex `answer:\s*4[0-9]`: 'Answer: 42'"
    loose = suite(tmp_path / "l", {"mode": "exact", "expected": r"^yes\.?$"})
    assert feedback(loose, "yes!") == (
        r"expected answer: yes (alone in the output; the regex `^yes\.?$`; the agent answered: 'yes!')"
    )
    hidden = suite(tmp_path, {"mode": "exact", "expected": r"\bbilling\b"}, "no-answers")
    said = feedback(hidden, "support")
    assert "billing" not in said and said == (
        "the output did not hold the expected answer (the suite keeps it hidden; the agent answered: 'support')"
    )
    assert feedback(hidden, "billing") == "the output matched the expected answer"
    assert feedback(suite(tmp_path, {"mode": "exact", "expected": "billing"}, "none"), "support") == ""


@pytest.mark.parametrize(
    "expected",
    [r"(?i)^\W*account\W*$", r"^(yes|no)$", r"\d{5}", r"^\W*t\.meyer@example\.de\W*$", "forty-two"],
)
def test_exact_no_answers_names_nothing_of_the_pattern(tmp_path: Path, expected: str) -> None:
    said = feedback(suite(tmp_path, {"mode": "exact", "expected": expected}, "no-answers"), "wrong")
    assert said == (
        "the output did not hold the expected answer (the suite keeps it hidden; the agent answered: 'wrong')"
    )


def test_exact_shows_the_end_of_a_long_output(tmp_path: Path) -> None:
    said = feedback(suite(tmp_path, {"mode": "exact", "expected": "42"}), "x" * 1000 + " the end")
    assert said.startswith("expected answer: 42 (the agent's output ended: ...'x")
    assert said.endswith("the end')") and len(said) < 600


def test_checklist_names_the_items_found_and_missing(tmp_path: Path) -> None:
    scoring = {"mode": "checklist", "required": ["owner", "timeline", "impact"]}
    assert feedback(suite(tmp_path, scoring), "owner and impact") == (
        "2 of 3 required items in the output (found: 'owner', 'impact'; missing: 'timeline')"
    )
    said = feedback(suite(tmp_path, scoring, "no-answers"), "owner and impact")
    assert said == "2 of 3 required items in the output (the suite keeps them hidden)"
    assert feedback(suite(tmp_path, scoring, "none"), "owner") == ""


FAILING_RUN = (
    "printf 'collected 40 items\\n'; printf 'FAILED tests/test_routes.py::test_refund_goes_to_billing\\n'; "
    "for i in $(seq 1 40); do echo \"log line $i\"; done; echo '1 failed, 39 passed'; exit 1"
)


def test_command_gives_the_command_its_exit_code_and_the_failing_tests(tmp_path: Path) -> None:
    full = suite(tmp_path, {"mode": "command", "command": FAILING_RUN})
    said = feedback(full, "done")
    assert said.startswith(f"the scoring command `{FAILING_RUN}` exited 1 (failed); its output ends:\n")
    assert "FAILED tests/test_routes.py::test_refund_goes_to_billing" in said  # above the tail, kept
    assert said.endswith("log line 40\n1 failed, 39 passed") and "log line 10\n" not in said
    hidden = feedback(suite(tmp_path, {"mode": "command", "command": FAILING_RUN}, "no-answers"), "done")
    assert (
        hidden == "the scoring command exited 1 (failed; the suite keeps the command and its output hidden)"
    )
    passed = feedback(suite(tmp_path / "p", {"mode": "command", "command": "echo fine"}), "done")
    assert passed == "the scoring command `echo fine` exited 0 (passed)"


RUBRIC = """\
def score(task, workdir, mode):
    text = (workdir / "output.txt").read_text()
    if "list" in text:
        return {"hard": 0, "soft": 0.2, "checks": ["symptom:late"], "feedback": ["line one", "line two"]}
    if "number" in text:
        return {"hard": 0, "soft": 0.2, "checks": [], "feedback": 7}
    return {"hard": 0, "soft": 0.2, "checks": ["symptom:late"], "feedback": "the timeline misses 10:42"}
"""


def rubric_feedback(loaded: Suite, text: str) -> Score:
    task = loaded.task("t1")
    ws = loaded.root.parent / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "output.txt").write_text(text, encoding="utf-8")
    return loaded.scorer(task).score(task, ws, AgentResult(status="ok", final_text=text))


def test_rubric_feedback_is_kept_in_full_and_dropped_otherwise(tmp_path: Path) -> None:
    full = suite(tmp_path, {"mode": "rubric"}, rubric=RUBRIC)
    assert rubric_feedback(full, "text").feedback == "the timeline misses 10:42"
    assert rubric_feedback(full, "list").feedback == "line one\nline two"
    with pytest.raises(ScoringError, match="returned feedback of type int; expected a string"):
        rubric_feedback(full, "number")
    for policy in ("no-answers", "none"):
        score = rubric_feedback(suite(tmp_path, {"mode": "rubric"}, policy, rubric=RUBRIC), "text")
        assert score.feedback == "" and score.checks == ["symptom:late"]


ENV = """\
CONFIG = {CONFIG}


def tasks(split):
    return [] if split == "test" else [{{"id": f"{{split}}-1", "prompt": "p", "scoring": {{"answer": "42"}}}}]


def prepare(task, workspace):
    pass


def score(task, workspace, agent_result):
    return {{"hard": 0, "soft": 0.0, "checks": ["ran"], "feedback": "expected " + task.scoring["answer"]}}
"""


@pytest.mark.parametrize("policy", POLICIES)
def test_a_python_env_score_may_return_feedback(tmp_path: Path, policy: str) -> None:
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "env.py").write_text(ENV.format(CONFIG={"feedback": policy}), encoding="utf-8")
    loaded = load_suite(folder)
    task = loaded.task("train-1")
    score = loaded.scorer(task).score(task, tmp_path, AgentResult(status="ok", final_text="x"))
    assert score.feedback == ("expected 42" if policy == "full" else "")
    assert score.checks == ["ran"]


def test_the_judges_feedback_is_its_evidence_or_its_scores_alone() -> None:
    verdict = JudgeVerdict(
        criteria=[Criterion(name="timeline", score=0.25, evidence="no  times, the\nreference has 10:42")],
        overall=0.3,
        reasoning="The timeline is missing. ",
    )
    assert (
        verdict_feedback(verdict)
        == "The timeline is missing.\n- timeline 0.25: no times, the reference has 10:42"
    )
    assert verdict_feedback(verdict, evidence=False) == "- timeline 0.25"


def test_feedback_is_capped() -> None:
    score = make_score(0, 0.0, [], weight=0.5, contract="c", feedback="x" * (FEEDBACK_LIMIT * 2))
    assert len(score.feedback) <= FEEDBACK_LIMIT and score.feedback.endswith("[feedback truncated]")


def test_an_unknown_feedback_policy_is_refused_with_the_file(tmp_path: Path) -> None:
    task = {"id": "t1", "prompt": "p", "scoring": {"required": ["x"]}}
    root = write_suite(tmp_path / "s", [task], [{**task, "id": "v1"}], config={"feedback": "partial"})
    problems = validate_suite(root)
    assert any(
        "scoring.md" in str(p) and "feedback" in str(p) and "no-answers" in str(p) for p in problems
    ), problems
