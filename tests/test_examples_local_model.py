"""examples/local-model: the support-triage suite's scoring and its pure-noise twin (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skilltune.agents.base import AgentResult
from skilltune.errors import ScoringError
from skilltune.suite import PythonSuite, Suite, load_suite, validate_suite
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "local-model"


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(EXAMPLE / "suite")


@pytest.fixture(scope="module")
def null() -> PythonSuite:
    loaded = load_suite(EXAMPLE / "null")
    assert isinstance(loaded, PythonSuite)
    return loaded


def test_both_suites_validate() -> None:
    assert validate_suite(EXAMPLE / "suite") == []
    assert validate_suite(EXAMPLE / "null") == []


@pytest.mark.parametrize(
    ("reply", "hard"),
    [
        ("billing", 1),
        ("Billing.", 1),
        ("  billing\n", 1),
        ("**billing**", 1),
        ("The message is about billing.", 0),
        ("billing or exports", 0),
        ("reports", 0),
        ("Hello! Thanks for writing in. billing", 0),
    ],
)
def test_only_the_right_label_alone_scores(suite: Suite, reply: str, hard: int, tmp_path: Path) -> None:
    task = suite.task("area-double-charge")  # a message about billing
    score = suite.scorer(task).score(task, tmp_path, AgentResult(status="ok", final_text=reply))
    assert score.hard == hard


def test_every_kind_of_question_and_every_label_is_in_every_split(suite: Suite) -> None:
    for split in ("train", "val", "test"):
        tasks = suite.tasks(split)
        assert {t.id.split("-")[0] for t in tasks} == {"ticket", "email", "area"}, split
        labels = {t.scoring["expected"][4:-4] for t in tasks if t.id.startswith("area-")}
        assert labels == {"billing", "calendar", "exports", "reports"}, (split, labels)


def test_the_twin_has_the_same_tasks_without_their_answers(suite: Suite, null: PythonSuite) -> None:
    for split in ("train", "val", "test"):
        twin = {t.id: t.prompt for t in null.tasks(split)}
        assert twin == {t.id: t.prompt for t in suite.tasks(split)}
    assert all(not t.scoring for t in null.all_tasks())
    assert null.config.model_extra is not None and suite.config.model_extra is not None
    assert null.config.model_extra["proposer_pool"] == suite.config.model_extra["proposer_pool"]


def rollout_folder(root: Path, phase: str, candidate: str, task_id: str, replicate: int) -> Path:
    folder = root / "rollouts" / phase / candidate / f"{task_id}_r{replicate}"
    folder.mkdir(parents=True)
    return folder


def coin_score(null: PythonSuite, task_id: str, folder: Path, reply: str) -> int:
    (folder / "output.txt").write_text(reply)
    result = AgentResult(status="ok", final_text=reply, output_file=folder / "output.txt")
    task = null.task(task_id)
    return null.scorer(task).score(task, folder, result).hard


def test_the_coin_ignores_the_reply_and_is_fixed_per_rollout(null: PythonSuite, tmp_path: Path) -> None:
    folder = rollout_folder(tmp_path, "gate", "0123456789ab", "area-double-charge", 3)
    first = coin_score(null, "area-double-charge", folder, "billing")
    assert all(
        coin_score(null, "area-double-charge", folder, reply) == first
        for reply in ("reports", "", "billing " * 50)
    )


def test_the_coin_is_fair_and_differs_by_arm_and_replicate(null: PythonSuite, tmp_path: Path) -> None:
    heads = {}
    for arm in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        for task in null.tasks("val"):
            for replicate in range(25):
                folder = rollout_folder(tmp_path, "gate", arm, task.id, replicate)
                heads[arm, task.id, replicate] = coin_score(null, task.id, folder, "billing")
    rate = sum(heads.values()) / len(heads)
    assert 0.4 < rate < 0.6, rate
    same = sum(heads["aaaaaaaaaaaa", t, r] == heads["bbbbbbbbbbbb", t, r] for _, t, r in heads) / 2
    assert 0.35 < same / (len(heads) / 2) < 0.65  # the arms' coins are independent, not shared


def test_the_coin_refuses_to_guess_without_a_rollout_folder(null: PythonSuite, tmp_path: Path) -> None:
    task = null.task("area-double-charge")
    with pytest.raises(ScoringError, match="no rollout folder"):
        null.scorer(task).score(task, tmp_path, AgentResult(status="ok", final_text="billing"))


def test_a_mock_run_on_the_twin_scores_both_ways(tmp_path: Path) -> None:
    """Through skilltune's rollouts, the coin sees the layout it is seeded on."""
    import skilltune

    summary = skilltune.evaluate(
        EXAMPLE / "null", EXAMPLE / "skill", agent="mock", split="test", reps=3, out=tmp_path / "out"
    )
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("record.json")]
    assert len(records) == 36 and all(r["status"] == "ok" for r in records)
    assert {r["score"]["hard"] for r in records} == {0, 1}
    assert summary.hard_acc is not None and 0.2 < summary.hard_acc < 0.8
