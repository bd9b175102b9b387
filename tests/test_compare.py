"""Held-out comparison: build_comparison on crafted records, compare() end to end, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import ContractMismatchError, UsageError
from skilltune.measure.compare import build_comparison, compare
from skilltune.rollout.runner import NO_SKILL
from skilltune.runfiles import SCHEMA_VERSION, Comparison, RolloutRecord, RolloutStatus
from skilltune.score.base import Score
from skilltune.skill import Candidate, load_skill
from skilltune.stats import paired_t
from skilltune.suite import Suite, load_suite
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE, rule_task, write_suite

runner = CliRunner()

# --- build_comparison ----------------------------------------------------------------------------

Spec = tuple[int, float] | RolloutStatus  # (hard, soft) with mixed = (hard + soft) / 2, or an unscored status


def rec(task: str, replicate: int, spec: Spec, candidate: str, contract: str = "c") -> RolloutRecord:
    score = None
    status: RolloutStatus = "ok"
    if isinstance(spec, tuple):
        hard, soft = spec
        score = Score(hard=hard, soft=soft, mixed=(hard + soft) / 2, checks=[], contract=contract)
        status = "ok" if hard else "task_failed"
    else:
        status = spec
    return RolloutRecord(
        task_id=task,
        split="test",
        phase="test",
        replicate=replicate,
        seed=0,
        candidate=candidate,
        agent="mock",
        options_hash="o" * 64,
        task_hash="t" * 64,
        status=status,
        score=score,
        wall_s=0.0,
        started_at="2024-01-01T00:00:00+00:00",
    )


def records(candidate: str, plan: dict[str, list[Spec]]) -> list[RolloutRecord]:
    return [rec(task, k, spec, candidate) for task, specs in plan.items() for k, spec in enumerate(specs)]


# Task means of mixed: a = (0.5, 0.0, 0.5), b = (1.0, 0.5, 1.0), c = (0.0, 0.0, 0.25).
PLAN_A: dict[str, list[Spec]] = {
    "t1": [(1, 1.0), (0, 0.0)],
    "t2": [(0, 0.0), "scoring_error"],
    "t3": [(0, 1.0), (0, 1.0)],
}
PLAN_B: dict[str, list[Spec]] = {
    "t1": [(1, 1.0), (1, 1.0)],
    "t2": [(1, 0.0), (0, 1.0)],
    "t3": [(1, 1.0), (1, 1.0)],
}
PLAN_C: dict[str, list[Spec]] = {
    "t1": [(0, 0.0), (0, 0.0)],
    "t2": [(0, 0.0), (0, 0.0)],
    "t3": [(0, 0.5), (0, 0.5)],
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    root = tmp_path_factory.mktemp("suite")
    tasks = [rule_task(t, ["state-a-default"]) for t in ("t1", "t2", "t3")]
    return load_suite(write_suite(root, [rule_task("tr", ["x"])], [rule_task("v", ["x"])], tasks))


def arms(**plans: dict[str, list[Spec]]) -> dict[str, tuple[str, list[RolloutRecord]]]:
    return {name: (f"{name}-hash", records(f"{name}-hash", plan)) for name, plan in plans.items()}


def test_arm_results(suite: Suite) -> None:
    comp = build_comparison(suite, "test", "mock", 2, "mixed", arms(a=PLAN_A, b=PLAN_B, c=PLAN_C))
    assert list(comp.arms) == ["a", "b", "c"]
    a = comp.arms["a"]
    assert a.skill_hash == "a-hash"
    assert a.per_task == {"t1": [1.0, 0.0], "t2": [0.0, None], "t3": [0.5, 0.5]}
    # Means over tasks of task means: hard (0.5, 0, 0), soft (0.5, 0, 1), mixed (0.5, 0, 0.5).
    assert a.hard_acc == round(0.5 / 3, 6)
    assert a.soft_acc == 0.5
    assert a.mixed == round(1 / 3, 6)
    assert (a.n_tasks, a.n_rollouts, a.n_scored) == (3, 6, 5)
    assert a.statuses == {"ok": 1, "scoring_error": 1, "task_failed": 4}
    assert list(a.statuses) == sorted(a.statuses)
    b = comp.arms["b"]
    assert (b.hard_acc, b.soft_acc, b.mixed) == (round(2.5 / 3, 6), round(2.5 / 3, 6), round(2.5 / 3, 6))
    c = comp.arms["c"]
    assert (c.hard_acc, c.soft_acc, c.mixed) == (0.0, round(1 / 6, 6), round(0.25 / 3, 6))
    assert c.per_task == {"t1": [0.0, 0.0], "t2": [0.0, 0.0], "t3": [0.25, 0.25]}
    assert (comp.suite, comp.split, comp.agent, comp.reps, comp.metric) == (
        str(suite.source),
        "test",
        "mock",
        2,
        "mixed",
    )
    assert comp.contract == "c"
    assert not comp.contaminated
    assert Comparison.model_validate_json(comp.model_dump_json()) == comp


def test_pairs_in_arm_order_with_b_minus_a(suite: Suite) -> None:
    comp = build_comparison(suite, "test", "mock", 2, "mixed", arms(a=PLAN_A, b=PLAN_B, c=PLAN_C))
    assert [(p.a, p.b) for p in comp.pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    expected = {
        ("a", "b"): [0.5, 0.5, 0.5],
        ("a", "c"): [-0.5, 0.0, -0.25],
        ("b", "c"): [-1.0, -0.5, -0.75],
    }
    for pair in comp.pairs:
        res = paired_t(expected[pair.a, pair.b])
        assert pair.n_tasks == 3
        assert pair.diff == round(res.diff, 6)
        assert res.ci95 is not None and pair.ci95 is not None
        # the t interval, clipped to the range a difference of [0, 1] scores can take
        assert pair.ci95 == [round(max(-1.0, res.ci95[0]), 6), round(min(1.0, res.ci95[1]), 6)]
        assert pair.p_value == pytest.approx(res.p_value, abs=1e-6)
    ab, ac, bc = comp.pairs
    assert (ab.diff, ab.ci95, ab.p_value, ab.verdict) == (0.5, [0.5, 0.5], 0.0, "b_better")
    assert ac.diff == -0.25 and ac.verdict == "no_difference"
    assert ac.ci95 is not None and ac.ci95[0] < 0 < ac.ci95[1]
    assert bc.diff == -0.75 and bc.verdict == "a_better"
    assert bc.ci95 is not None and bc.ci95[1] < 0
    # Swapping the arm order flips the sign and the verdict.
    swapped = build_comparison(suite, "test", "mock", 2, "mixed", arms(c=PLAN_C, b=PLAN_B))
    (cb,) = swapped.pairs
    assert (cb.a, cb.b, cb.diff, cb.verdict) == ("c", "b", 0.75, "b_better")


def test_metric_chooses_per_task_and_pairs(suite: Suite) -> None:
    comp = build_comparison(suite, "test", "mock", 2, "hard", arms(a=PLAN_A, c=PLAN_C))
    assert comp.metric == "hard"
    assert comp.arms["a"].per_task == {"t1": [1.0, 0.0], "t2": [0.0, None], "t3": [0.0, 0.0]}
    # The accuracies do not depend on the chosen metric.
    mixed = build_comparison(suite, "test", "mock", 2, "mixed", arms(a=PLAN_A, c=PLAN_C))
    assert comp.arms["a"].hard_acc == mixed.arms["a"].hard_acc
    assert comp.arms["a"].mixed == mixed.arms["a"].mixed
    (pair,) = comp.pairs
    assert pair.diff == round(-0.5 / 3, 6)  # hard task means: a (0.5, 0, 0), c (0, 0, 0)


def test_unscored_tasks_and_stray_records(suite: Suite) -> None:
    plan: dict[str, list[Spec]] = {
        "t1": [(1, 1.0), (1, 1.0)],
        "t2": ["scoring_error", "scoring_error"],
        "t3": [(0, 0.0), (1, 1.0)],
    }
    a_recs = records("x", plan)
    # Not in the split, and a replicate beyond reps: counted as rollouts, left out of per_task.
    a_recs += [rec("elsewhere", 0, (1, 1.0), "x"), rec("t3", 5, (1, 1.0), "x")]
    comp = build_comparison(
        suite, "test", "mock", 2, "mixed", {"x": ("x", a_recs), "y": ("y", records("y", PLAN_C))}
    )
    x = comp.arms["x"]
    assert x.per_task == {"t1": [1.0, 1.0], "t2": [None, None], "t3": [0.0, 1.0]}
    assert (x.n_tasks, x.n_rollouts, x.n_scored) == (2, 8, 6)
    assert x.mixed == 0.75  # over the two scored tasks
    (pair,) = comp.pairs
    assert pair.n_tasks == 2
    assert pair.diff == round(((0.0 - 1.0) + (0.25 - 0.5)) / 2, 6)


def test_arm_with_nothing_scored(suite: Suite) -> None:
    dead: dict[str, list[Spec]] = {t: ["infra_error", "infra_error"] for t in ("t1", "t2", "t3")}
    comp = build_comparison(suite, "test", "mock", 2, "mixed", arms(a=PLAN_A, dead=dead))
    d = comp.arms["dead"]
    assert (d.hard_acc, d.soft_acc, d.mixed, d.n_tasks, d.n_scored) == (None, None, None, 0, 0)
    (pair,) = comp.pairs
    assert (pair.n_tasks, pair.diff, pair.ci95, pair.p_value, pair.verdict) == (
        0,
        0.0,
        None,
        None,
        "no_difference",
    )
    assert comp.contaminated


@pytest.mark.parametrize("status", ["infra_error", "crashed"])
def test_contaminated_flag(suite: Suite, status: RolloutStatus) -> None:
    plan = {**PLAN_B, "t2": [(1, 0.0), status]}
    comp = build_comparison(suite, "test", "mock", 2, "mixed", arms(a=PLAN_A, b=plan))
    assert comp.contaminated
    assert comp.arms["b"].statuses[status] == 1
    assert comp.arms["b"].per_task["t2"] == [0.5, None]


def test_no_scores_means_no_contract(suite: Suite) -> None:
    dead: dict[str, list[Spec]] = {"t1": ["infra_error"]}
    comp = build_comparison(suite, "test", "mock", 1, "mixed", arms(a=dead, b=dead))
    assert comp.contract is None


def test_mixed_contracts_are_refused(suite: Suite) -> None:
    built = arms(a=PLAN_A, b=PLAN_B)
    built["b"][1][0] = rec("t1", 0, (1, 1.0), "b-hash", contract="other")
    with pytest.raises(ContractMismatchError, match="different scoring contracts"):
        build_comparison(suite, "test", "mock", 2, "mixed", built)


# --- compare() on the mock demo ------------------------------------------------------------------


N_TEST = len(load_suite(MOCK_SUITE).tasks("test"))
N_VAL = len(load_suite(MOCK_SUITE).tasks("val"))


def _arms() -> dict[str, Candidate | None]:
    return {"seed": load_skill(MOCK_SKILL), "good": load_skill(GOOD_SKILL), "noskill": None}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    out = tmp_path_factory.mktemp("compare") / "out"
    return compare(MOCK_SUITE, _arms(), split="test", reps=2, seed=3, out=out), out


def test_compare_writes_a_valid_comparison(demo: tuple[Comparison, Path]) -> None:
    comp, out = demo
    path = out / "comparison.json"
    assert path.is_file()
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == SCHEMA_VERSION
    assert Comparison.model_validate(raw) == comp
    assert list(comp.arms) == ["seed", "good", "noskill"]
    assert [(p.a, p.b) for p in comp.pairs] == [("seed", "good"), ("seed", "noskill"), ("good", "noskill")]
    assert (comp.split, comp.reps, comp.agent, comp.metric) == ("test", 2, "mock", "mixed")
    assert comp.contract == load_suite(MOCK_SUITE).contract_hash
    assert not comp.contaminated
    for arm in comp.arms.values():
        assert (arm.n_tasks, arm.n_rollouts) == (N_TEST, 2 * N_TEST)
        assert all(len(v) == 2 for v in arm.per_task.values())


def test_compare_ranks_the_demo_skills(demo: tuple[Comparison, Path]) -> None:
    comp, _ = demo
    good, seed, noskill = comp.arms["good"].mixed, comp.arms["seed"].mixed, comp.arms["noskill"].mixed
    assert good is not None and seed is not None and noskill is not None
    assert good > seed > noskill
    pairs = {(p.a, p.b): p for p in comp.pairs}
    assert pairs["seed", "good"].diff > 0
    assert pairs["seed", "noskill"].diff < 0
    assert pairs["good", "noskill"].diff < 0
    assert pairs["good", "noskill"].verdict == "a_better"


def test_compare_records_on_disk(demo: tuple[Comparison, Path]) -> None:
    comp, out = demo
    cands = _arms()
    folders = sorted(p.name for p in (out / "rollouts" / "test").iterdir())
    expected = sorted(c.short if c else NO_SKILL for c in cands.values())
    assert folders == expected
    for name, cand in cands.items():
        folder = out / "rollouts" / "test" / (cand.short if cand else NO_SKILL)
        recs = [RolloutRecord.model_validate_json(p.read_text()) for p in folder.glob("*/record.json")]
        assert len(recs) == 2 * N_TEST
        assert {r.candidate for r in recs} == {cand.hash if cand else NO_SKILL}
        assert comp.arms[name].skill_hash == (cand.hash if cand else NO_SKILL)
        assert {r.phase for r in recs} == {"test"} and {r.seed for r in recs} == {3}


def test_compare_is_deterministic(demo: tuple[Comparison, Path], tmp_path: Path) -> None:
    comp, _ = demo
    again = compare(MOCK_SUITE, _arms(), split="test", reps=2, seed=3, workers=2, out=tmp_path / "again")
    assert again.arms == comp.arms
    assert again.pairs == comp.pairs


def test_compare_refuses_a_used_out(demo: tuple[Comparison, Path]) -> None:
    _, out = demo
    before = (out / "comparison.json").read_text()
    with pytest.raises(UsageError, match="already holds results"):
        compare(MOCK_SUITE, _arms(), split="test", reps=2, seed=3, out=out)
    assert (out / "comparison.json").read_text() == before


def test_compare_force_replaces(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cands: dict[str, Candidate | None] = {"good": load_skill(GOOD_SKILL), "noskill": None}
    compare(MOCK_SUITE, cands, split="val", reps=1, out=out)
    comp = compare(MOCK_SUITE, cands, split="val", reps=1, seed=1, out=out, force=True)
    assert json.loads((out / "comparison.json").read_text()) == json.loads(comp.model_dump_json())
    assert len(list((out / "rollouts" / "eval").glob("*/*/record.json"))) == 2 * N_VAL
    assert {json.loads(p.read_text())["seed"] for p in (out / "rollouts").glob("*/*/*/record.json")} == {1}


def test_compare_refuses_the_same_skill_twice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="same skill"):
        compare(MOCK_SUITE, {"x": load_skill(MOCK_SKILL), "y": load_skill(MOCK_SKILL)}, out=out)
    assert not out.exists()


@pytest.mark.parametrize("cands", [{}, {"only": None}], ids=["none", "one"])
def test_compare_needs_two_arms(tmp_path: Path, cands: dict[str, Candidate | None]) -> None:
    with pytest.raises(UsageError, match="at least two arms"):
        compare(MOCK_SUITE, cands, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compare_refuses_an_unknown_metric(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="setting metric: Input should be 'hard', 'soft' or 'mixed'"):
        compare(MOCK_SUITE, {"s": load_skill(MOCK_SKILL), "n": None}, metric="f1", out=tmp_path / "o")
    assert not (tmp_path / "o").exists()


# --- the CLI -------------------------------------------------------------------------------------

CLI_ARMS = [f"seed={MOCK_SKILL}", f"good={GOOD_SKILL}", "--no-skill"]


def _invoke(*args: str) -> Any:
    return runner.invoke(app, ["compare", str(MOCK_SUITE), *args])


def test_cli_compare(tmp_path: Path) -> None:
    out = tmp_path / "DIR"
    result = _invoke(*CLI_ARMS, "--reps", "2", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    for word in ("seed", "good", "noskill", "verdict", "a_better"):
        assert word in result.output, word
    assert "comparison.json" in result.output
    data = json.loads((out / "comparison.json").read_text())
    assert list(data["arms"]) == ["seed", "good", "noskill"]
    assert len(data["pairs"]) == 3
    assert data["reps"] == 2
    assert data["arms"]["noskill"]["skill_hash"] == NO_SKILL
    rows = [line.split("│")[1].strip() for line in result.output.splitlines() if line.startswith("│")]
    assert rows[:3] == ["seed", "good", "noskill"]
    for pair in data["pairs"]:
        assert pair["verdict"] in result.output


@pytest.mark.parametrize("command", ["compare", "calibrate", "train"])
def test_cli_refuses_an_unknown_metric_before_any_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.chdir(tmp_path)  # each command's default output folder is under ./runs
    arms = CLI_ARMS if command == "compare" else ["--skill", str(MOCK_SKILL)]
    result = runner.invoke(app, [command, str(MOCK_SUITE), *arms, "--metric", "f1"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())  # the error box's border and wrapping aside
    assert "'f1' is not one of 'hard', 'soft', 'mixed'" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        (["seed", f"good={GOOD_SKILL}"], "NAME=SKILL"),
        ([f"={MOCK_SKILL}", f"good={GOOD_SKILL}"], "NAME=SKILL"),
        (["seed=", f"good={GOOD_SKILL}"], "NAME=SKILL"),
        ([f"a={MOCK_SKILL}", f"a={GOOD_SKILL}"], "used twice"),
        ([f"noskill={MOCK_SKILL}", f"good={GOOD_SKILL}"], "reserved"),
        ([f"seed={MOCK_SKILL}"], "at least two arms"),
    ],
    ids=["no-equals", "no-name", "no-path", "twice", "reserved", "one-arm"],
)
def test_cli_bad_arms_exit_2(tmp_path: Path, arms: list[str], message: str) -> None:
    out = tmp_path / "DIR"
    result = _invoke(*arms, "--out", str(out), "--quiet")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_cli_prints_where_the_records_are(tmp_path: Path) -> None:
    out = tmp_path / "DIR"
    result = _invoke(f"good={GOOD_SKILL}", "--no-skill", "--split", "val", "--reps", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    printed = next(line for line in result.output.splitlines() if line.startswith("records:"))
    folder = Path(printed.removeprefix("records:").strip())
    assert folder.is_dir()
    assert list(folder.glob("*/*/record.json"))
