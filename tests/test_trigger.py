"""Trigger mode: the scorer, which tasks it scores, validation, the refusal of a backend that cannot
report loads, and precision / recall / accuracy with Wilson intervals in run and compare."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltune.agents import AGENTS, AgentRequest, AgentResult
from skilltune.agents.mock import MockAgent
from skilltune.cli import app
from skilltune.errors import ScoringError
from skilltune.measure.compare import build_comparison, compare
from skilltune.runfiles import RolloutRecord
from skilltune.score.base import Score
from skilltune.score.trigger import TriggerScorer, trigger_stats
from skilltune.skill import load_skill
from skilltune.stats.proportion import wilson
from skilltune.suite import load_suite, validate_suite
from tests.helpers import rule_task, write_skill, write_suite

runner = CliRunner()

DESCRIPTION = "Writes release notes from merged pull requests. Use when the user asks for a changelog."


def trig(task_id: str, prompt: str, should: Any, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "prompt": prompt, "should_trigger": should, **extra}


def _suite(root: Path) -> Path:
    """val: two that should load the skill (one the mock misses), two that should not (one it takes),
    and a body task scored by checklist beside them."""
    val = [
        trig("yes-hit", "Update the changelog for 2.1", True),
        trig("yes-miss", "Write up what shipped in 2.1", True),
        trig("no-hit", "Explain the changelog format we use", False),
        trig("no-miss", "Rename getUser to fetchUser", False),
        rule_task("body", ["state-a-default"]),
    ]
    return write_suite(root, [trig("train-a", "Update the changelog", True)], val)


def _skill(root: Path, description: str = DESCRIPTION) -> Path:
    folder = write_skill(root, "- State a default.\n")
    text = (folder / "SKILL.md").read_text()
    head, _, body = text.partition("\n---\n")
    lines = [line for line in head.splitlines() if not line.startswith("description:")]
    (folder / "SKILL.md").write_text("\n".join([*lines, f"description: {description}"]) + "\n---\n" + body)
    return folder


def test_a_task_that_says_should_trigger_is_scored_in_trigger_mode(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path / "s"))
    assert suite.scoring_mode(suite.task("yes-hit")) == "trigger"  # whatever the default (checklist)
    assert suite.scoring_mode(suite.task("body")) == "checklist"
    own = write_suite(tmp_path / "own", [trig("t", "p", True, scoring={"mode": "exact", "expected": "x"})],
                      [trig("v", "p", False)])  # fmt: skip
    loaded = load_suite(own)
    assert loaded.scoring_mode(loaded.task("t")) == "exact"  # a mode of its own wins
    assert loaded.task("t").should_trigger is True


def test_the_scorer_scores_the_load_decision_alone(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path / "s"))
    scorer = suite.scorer(suite.task("yes-hit"))
    assert isinstance(scorer, TriggerScorer)
    cases = [("yes-hit", True, 1), ("yes-hit", False, 0), ("no-hit", True, 0), ("no-hit", False, 1)]
    for task_id, loaded, hard in cases:
        result = AgentResult(status="ok", final_text="anything", skill_loaded=loaded)
        score = scorer.score(suite.task(task_id), tmp_path, result)
        assert (score.hard, score.soft) == (hard, float(hard)), (task_id, loaded)
        assert ("decision_right" if hard else "decision_wrong") in score.checks
    wrong = scorer.score(suite.task("no-hit"), tmp_path, AgentResult(status="ok", skill_loaded=True))
    assert "should not have loaded it" in wrong.feedback
    with pytest.raises(ScoringError, match="did not report whether it loaded the skill"):
        scorer.score(suite.task("yes-hit"), tmp_path, AgentResult(status="ok"))


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (trig("v", "p", "yes"), "'should_trigger'"),
        (trig("v", "p", 1), "true or false"),
        ({"id": "v", "prompt": "p", "scoring": {"mode": "trigger"}}, "trigger mode needs 'should_trigger'"),
    ],
)
def test_bad_trigger_tasks_name_file_line_and_fix(tmp_path: Path, task: dict[str, Any], message: str) -> None:
    root = write_suite(tmp_path / "s", [trig("t", "p", True)], [trig("ok", "q", False), task])
    problems = [p for p in validate_suite(root) if not p.warning]
    assert len(problems) == 1 and problems[0].line == 2, problems
    assert problems[0].file.endswith("val.jsonl") and message in problems[0].message
    result = runner.invoke(app, ["validate", str(root)])
    assert result.exit_code == 2 and "val.jsonl:2" in result.output and "Traceback" not in result.output


class _Deaf(MockAgent):
    """The mock, but a backend that cannot say whether the agent loaded the skill."""

    name = "deaf"
    reports_skill_loads = False

    def run(self, request: AgentRequest) -> AgentResult:
        return super().run(request).model_copy(update={"skill_loaded": None})


@pytest.fixture
def deaf() -> Iterator[str]:
    AGENTS.register(_Deaf.name, _Deaf)
    try:
        yield _Deaf.name
    finally:
        AGENTS.unregister(_Deaf.name)


def test_a_backend_that_cannot_report_loads_is_refused_up_front(tmp_path: Path, deaf: str) -> None:
    root = _suite(tmp_path / "s")
    out = tmp_path / "out"
    skill = _skill(tmp_path / "skill")
    result = runner.invoke(app, ["run", str(root), "--skill", str(skill), "--agent", deaf, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"{root / 'val.jsonl'}:1: task yes-hit: trigger mode" in " ".join(result.output.split())
    assert "--agent mock" in result.output and "Traceback" not in result.output
    assert not out.exists()
    checked = runner.invoke(app, ["validate", str(root), "--agent", deaf])
    assert checked.exit_code == 2 and "cannot report" in checked.output
    listed = runner.invoke(app, ["agents"])
    assert "skill loads" in listed.output and "reported" in listed.output


def _record(task: str, replicate: int, loaded: bool | None, hard: int, candidate: str) -> RolloutRecord:
    score = Score(hard=hard, soft=hard, mixed=hard, checks=[], contract="c")
    return RolloutRecord(
        task_id=task, split="test", phase="test", replicate=replicate, seed=0, candidate=candidate,
        agent="mock", options_hash="o", task_hash="t", status="ok", score=score, wall_s=0.0,
        started_at="2026-01-01T00:00:00+00:00", skill_loaded=loaded,
    )  # fmt: skip


def test_compare_counts_decisions_by_hand(tmp_path: Path) -> None:
    """Two replicates: yes-hit loads twice (TP 2), yes-miss once (TP 1, FN 1), no-hit loads twice
    (FP 2), no-miss never (TN 2); the body task is no trigger task and counts nowhere."""
    suite = load_suite(_suite(tmp_path / "s"))
    plan = {
        "yes-hit": [True, True],
        "yes-miss": [True, False],
        "no-hit": [True, True],
        "no-miss": [False, False],
    }
    recs = [
        _record(task, k, loaded, int(loaded == suite.task(task).should_trigger), "a")
        for task, decided in plan.items()
        for k, loaded in enumerate(decided)
    ]
    recs += [_record("body", k, True, 1, "a") for k in range(2)]
    other = [_record(r.task_id, r.replicate, None, 0, "b") for r in recs]
    comparison = build_comparison(suite, "val", "mock", 2, "hard", {"a": ("a", recs), "b": ("b", other)})
    stats = comparison.arms["a"].trigger
    assert stats is not None
    assert (stats.tp, stats.fp, stats.fn, stats.tn, stats.n, stats.n_tasks) == (3, 2, 1, 2, 8, 4)
    assert (stats.precision.k, stats.precision.n, stats.precision.value) == (3, 5, 0.6)
    assert (stats.recall.k, stats.recall.n, stats.recall.value) == (3, 4, 0.75)
    assert (stats.accuracy.k, stats.accuracy.n, stats.accuracy.value) == (5, 8, 0.625)
    low, high = wilson(3, 5) or (0.0, 0.0)
    assert stats.precision.ci95 == [round(low, 6), round(high, 6)]
    assert stats.precision.ci95 == pytest.approx([0.2307, 0.8824], abs=1e-4)  # Wilson 95%, 3 of 5
    undecided = comparison.arms["b"].trigger
    assert undecided is not None and (undecided.n, undecided.undecided) == (0, 8)
    assert undecided.accuracy.value is None and undecided.accuracy.ci95 is None
    assert trigger_stats([]) is None


def test_run_and_compare_show_the_trigger_table_end_to_end(tmp_path: Path) -> None:
    """The mock loads the skill when the prompt holds a key term of the description's "use when"
    clause (here: changelog): yes-hit and no-hit load it, yes-miss and no-miss do not."""
    root = _suite(tmp_path / "s")
    skill = _skill(tmp_path / "skill")
    comparison = compare(
        root, {"seed": load_skill(skill), "noskill": None}, split="val", reps=2, out=tmp_path / "cmp",
        agent="mock", workers=2,
    )  # fmt: skip
    seed = comparison.arms["seed"].trigger
    assert seed is not None and (seed.tp, seed.fp, seed.fn, seed.tn) == (2, 2, 2, 2)
    none = comparison.arms["noskill"].trigger
    assert none is not None and (none.tp, none.fp, none.fn, none.tn) == (0, 0, 4, 4)
    saved = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert saved["arms"]["seed"]["trigger"]["recall"]["value"] == 0.5
    folders = tmp_path / "cmp" / "rollouts" / "eval"
    loaded = json.loads((folders / load_skill(skill).short / "yes-hit_r0" / "record.json").read_text())
    unloaded = json.loads((folders / "noskill" / "yes-hit_r0" / "record.json").read_text())
    assert (loaded["skill_loaded"], unloaded["skill_loaded"]) == (True, False)
    shown = runner.invoke(app, ["run", str(root), "--skill", str(skill), "--split", "val", "-q",
                                "--out", str(tmp_path / "run"), "--workers", "2"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "trigger decisions" in shown.output and "precision" in shown.output
    assert "TP 1, FP 1, FN 1, TN 1" in shown.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["trigger"]["accuracy"]["k"] == 2 and summary["schema_version"] == 2


def test_the_cli_trigger_table_counts_each_query_once_as_the_report_does(tmp_path: Path) -> None:
    """compare's (and so train's) trigger table: with 3 replicates of a deterministic agent, each
    query is one trial (the report's per_query over the records), not three."""
    from skilltune.report.trigger import decisions, per_query

    root, skill, folder = _suite(tmp_path / "s"), _skill(tmp_path / "skill"), tmp_path / "cmp"
    shown = runner.invoke(app, ["compare", str(root), f"seed={skill}", "--no-skill", "--split", "val",
                                "--reps", "3", "--workers", "2", "-q", "--out", str(folder)])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.replace("│", " ").split())  # the table's cells, wrapped lines joined
    assert "each query counted once" in text and "one per rollout" not in text
    comparison = json.loads((folder / "comparison.json").read_text())
    loads = decisions(folder, "eval")
    for name, arm in comparison["arms"].items():
        assert arm["trigger"]["n"] == 12  # the file counts each of the 3 replicates of 4 queries
        stats = per_query(loads[arm["skill_hash"]])
        assert stats is not None and stats.queries == 4 and stats.decisions == 12
        low, high = stats.accuracy.ci95 or [0, 0]
        assert (
            f"accuracy {stats.accuracy.value:.3f} [{low:.3f}, {high:.3f}] {stats.accuracy.k} / 4" in text
        ), name
        counts = f"TP {stats.tp}, FP {stats.fp}, FN {stats.fn}, TN {stats.tn} on 4 queries (12 decisions)"
        assert counts in text, name
    assert "TP 1, FP 1, FN 1, TN 1 on 4 queries" in text  # the seed: one of each


def test_the_report_shows_trigger_decisions_when_the_comparison_has_them(tmp_path: Path) -> None:
    """The report renders the held-out comparison's trigger statistics (a demo run whose
    comparison.json is given an arm's statistics, as a suite with trigger tasks would have)."""
    from skilltune.report import render_report
    from skilltune.runfiles import Comparison
    from tests.report_runs import train_demo

    run = train_demo(tmp_path / "runs", max_steps=2)
    path = run / "comparison.json"
    if not path.is_file():
        pytest.skip("the demo run kept nothing, so it has no held-out comparison")
    assert "Trigger decisions" not in render_report(run)  # a suite without trigger tasks: no section
    comparison = Comparison.read(path)
    stats = trigger_stats(
        [("q1", True, True), ("q2", True, False), ("q3", False, False), ("q4", False, True)]
    )
    first = next(iter(comparison.arms))
    comparison.arms[first] = comparison.arms[first].model_copy(update={"trigger": stats})
    comparison.write(path)
    html = render_report(run)
    assert "Trigger decisions" in html and "(1/2)" in html
    low, high = wilson(1, 2) or (0.0, 0.0)
    assert f"[{low:.3f}, {high:.3f}]" in html


def test_train_on_trigger_queries_says_how_many_val_queries_a_gain_needs(tmp_path: Path) -> None:
    """`train --component description` prints the trigger-query note before any step, with the
    drafting command when the val split is too short, and a body run on body tasks prints none."""
    demo = Path(__file__).resolve().parents[1] / "examples"
    argv = ["train", str(demo / "trigger-null" / "suite"), "--skill", str(demo / "trigger-demo" / "skill")]
    argv += ["--agent", "mock", "--proposer", "mock", "--max-steps", "1", "--runs-dir", str(tmp_path)]
    out = runner.invoke(app, [*argv, "--component", "description", "--tag", "d"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    n = len(load_suite(demo / "trigger-null" / "suite").tasks("val"))
    assert "trigger queries: at 3 val queries won for each one lost" in text and f"these {n} keep" in text
    needed = int(text.split("+0.20 needs ")[1].split()[0])
    assert (n < needed) == ("skilltune draft triggers" in text)
    body_argv = ["train", str(demo / "mock-demo" / "suite"), "--skill", str(demo / "mock-demo" / "skill")]
    body = runner.invoke(app, [*body_argv, *argv[4:], "--tag", "b"])
    assert body.exit_code == 0 and "trigger queries" not in body.output


def test_the_null_twin_is_the_demo_relabelled_by_its_documented_coin(tmp_path: Path) -> None:
    """examples/trigger-null is trigger-demo's requests under the coin of salt `coin`, byte for byte
    (benchmarks/trigger_seeds.py draws its other labellings by the same rule), and another salt
    gives a suite that loads with the same requests in the same jsonl splits and other labels."""
    from benchmarks.trigger_seeds import DEMO, NULL, relabelled

    twin = relabelled(DEMO / "suite", tmp_path / "coin", "coin")
    for name in ("scoring.md", "trigger_evals.json", "train.jsonl", "val.jsonl", "test.jsonl"):
        assert (twin / name).read_bytes() == (NULL / "suite" / name).read_bytes(), name
    other = load_suite(relabelled(DEMO / "suite", tmp_path / "coin-7", "coin-7"))
    demo = load_suite(DEMO / "suite")
    for split in ("train", "val", "test"):
        grown = {t.id: t.prompt for t in demo.tasks(split) if not t.id.startswith("trigger-")}
        assert grown and grown.items() <= {t.id: t.prompt for t in other.tasks(split)}.items()
    labels = [t.should_trigger for t in other.all_tasks()]
    fixed = [t.should_trigger for t in load_suite(NULL / "suite").all_tasks()]
    assert len(labels) == 319 and 0.4 < sum(map(bool, labels)) / 319 < 0.6 and labels != fixed
