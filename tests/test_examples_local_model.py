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
    assert len(records) == 3 * len(load_suite(EXAMPLE / "suite").tasks("test")) and all(
        r["status"] == "ok" for r in records
    )
    assert {r["score"]["hard"] for r in records} == {0, 1}
    assert summary.hard_acc is not None and 0.2 < summary.hard_acc < 0.8


def test_the_benchmark_plans_the_most_steps_then_the_highest_replicate_cap() -> None:
    from benchmarks.local_model import plan, sizes, worst_case

    n = sizes()
    assert n == {"train": 12, "val": 24, "test": 18}

    def minutes(steps: int, reps: int, analyst_s: float = 0.0) -> float:
        rollouts = sum(worst_case(n, steps, reps, 1, ceiling=analyst_s > 0).values())
        return (rollouts * 7.5 + 2 * steps * 4 * analyst_s) / 60

    assert minutes(3, 3) <= 200 < minutes(3, 4) and minutes(2, 4) <= 200
    assert plan(n, 7.5, 200, 3, 4, 1) == (3, 3)  # three steps at a cap of 3, not two at 4
    assert plan(n, 0.3, 150, 3, 4, 2) == (3, 4)
    with pytest.raises(SystemExit, match="lower --test-reps"):
        plan(n, 30.0, 150, 3, 4, 2)


def test_the_benchmark_budgets_the_analyst_calls_and_the_ceiling_run() -> None:
    """With --proposer api each ask of each step of the analyst's run and its null twin may wait out an
    analyst call, and the mock proposer's ceiling run adds its own steps; a step's screens count (each
    of the four asks at most on the batch, the candidate and a leave-one-out screen per edit)."""
    from benchmarks.local_model import EDITS, PROPOSALS, plan, sizes, worst_case

    n = sizes()
    with_ceiling = worst_case(n, 1, 4, 1, ceiling=True)
    assert with_ceiling.keys() - worst_case(n, 1, 4, 1).keys() == {"ceiling train"}
    step = 8 * (1 + PROPOSALS + 1 + EDITS) + 2 * 24 * 4
    assert with_ceiling["ceiling train"] == step + 18  # S0's val baseline is shared
    assert worst_case(n, 1, 4, 1, proposals=1)["train"] == 24 + 8 * 2 + 2 * 24 * 4 + 2 * 18  # one ask a step
    assert plan(n, 5.0, 150, 3, 4, 1, 300.0) == (1, 4)  # (3, 3) without the analyst's calls
    with pytest.raises(SystemExit, match="--analyst-timeout-s"):
        plan(n, 7.5, 150, 3, 4, 1, 300.0)


def test_the_benchmark_counts_the_run_s_own_test_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run (mock target): the rollouts stay within the worst case the plan printed."""
    from benchmarks.local_model import main

    assert (
        main(["--base-url", "http://unused", "--model", "m", "--agent", "mock", "--out", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    worst = dict(
        (phase.strip(), int(count))
        for phase, count in (
            item.rsplit(" ", 1)
            for item in out.split("rollouts (")[1].split("): ")[1].split(";")[0].split(", ")
        )
    )
    table = out.split("\nphase ")[1].split("\ntotal")[0].splitlines()[1:]
    made = {line[:14].strip(): int(line[14:].split()[0]) for line in table}
    assert made.keys() == worst.keys() and made["train"] > 0
    # A run that kept nothing did not test S0: compare runs it, within the run's unused share.
    for phase in ("train", "null train"):
        following = phase.replace("train", "compare")
        made[phase] += made.pop(following)
        worst[phase] += worst.pop(following)
    assert all(made[phase] <= worst[phase] for phase in made), (made, worst)


def test_the_benchmark_with_an_analyst_reports_what_its_answers_became(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run (mock target) with --proposer api against a scripted analyst on its own
    endpoint: one edit citing a failed trajectory, one citing nothing. The printout counts
    them (proposed 2, dropped 1 with its reason), shows the answer, and runs the mock ceiling."""
    from benchmarks.local_model import main
    from tests.fakeserver import FakeModelServer, ModelRequest, Reply
    from tests.helpers import trajectory_blocks

    def analyst(request: ModelRequest) -> Reply:
        cited = sorted(trajectory_blocks(request.text))[:1]
        edits = [
            {"op": "append", "text": "- Reply with the answer alone.", "rationale": "r", "support": cited},
            {"op": "append", "text": "- Be kind.", "rationale": "r", "support": []},
        ]
        return Reply(text=json.dumps({"edits": edits}))

    with FakeModelServer(analyst, side=analyst) as server:
        argv = ["--base-url", "http://unused", "--model", "m", "--agent", "mock", "--out", str(tmp_path),
                "--steps", "1", "--proposer", "api", "--analyst-base-url", f"{server.url}/v1",
                "--analyst-model", "analyst-test", "--analyst-max-tokens", "300", "--analyst-timeout-s", "120",
                "--proposals", "1"]  # fmt: skip  # one ask: its two edits counted as they are
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "analyst: analyst-test at " in out and "max_tokens 300, at most 120 s per call" in out
    assert server.requests and all(r.body.get("max_tokens") == 300 for r in server.requests)
    api_line = next(line for line in out.splitlines() if line.startswith("  proposer (api):"))
    assert "; edits proposed 2, dropped 1, merged into equal ones 0," in api_line, api_line
    assert "dropped: " in out and "Be kind." in out and "Reply with the answer alone." in out
    assert "\nceiling: " in out and "  proposer (mock): " in out and "; edits proposed " in out
    assert "\nceiling train " in out  # its rollouts in the phase table
