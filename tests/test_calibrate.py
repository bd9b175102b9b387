"""skilltune calibrate and meta-eval on the mock examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.measure.calibrate import calibrate, rollouts_to_detect
from skilltune.meta_eval import ablate, noise_suite
from skilltune.skill import load_skill
from skilltune.stats.regime import regime_of
from skilltune.suite import load_suite, validate_suite
from tests.helpers import GOOD_SKILL, MOCK_SKILL, MOCK_SUITE, rule_task, write_skill, write_suite

runner = CliRunner()


def test_calibrate_the_mock_example(tmp_path: Path) -> None:
    result = calibrate(MOCK_SUITE, MOCK_SKILL, reps=3, out=tmp_path / "cal")
    assert result.regime == "gradient"
    assert result.pass_rate is not None and 0.3 <= result.pass_rate <= 0.8
    assert set(result.tasks) == {t.id for t in load_suite(MOCK_SUITE).tasks("val")}
    assert all(t.n == 3 for t in result.tasks.values())
    flat = [tid for tid, t in result.tasks.items() if not t.discriminates]
    assert flat == result.non_discriminating and flat  # deterministic tasks at the floor or the ceiling
    assert result.noise_sd is not None and result.noise_sd > 0
    needs = result.rollouts_to_detect
    assert needs["+0.05"] is not None and needs["+0.20"] is not None and needs["+0.05"] >= needs["+0.20"]
    saved = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert saved["regime"] == "gradient" and saved["schema_version"] == 2
    # a default run's sequential gate: 48 val tasks reach every level of its 12 decisions
    assert result.tasks_to_accept == {"first": 6, "last": 10}
    assert not any("cannot keep any edit" in lever for lever in result.levers)
    n = len(result.tasks)
    size, harm = result.suite_size
    assert size.startswith(
        "suite size: an edit is kept only if it changes at least 6 val tasks at this run's first "
    )
    assert "and 10 at its last" in size and "needs 40 val tasks to be keepable at every decision" in size
    assert harm.endswith("53 (25) val tasks keep that under alpha 0.05 over 12 decisions")
    assert f"with chance {0.9**n:.0%} ({0.8**n:.1%}) per decision" in harm
    assert saved["suite_size"] == result.suite_size


def test_calibrate_on_trigger_queries_says_how_many_val_queries_a_gain_needs(tmp_path: Path) -> None:
    """A trigger suite's calibration counts the val queries a description edit's trade-off needs at
    a default run's levels, and points to the drafting command when the split is short."""
    demo = Path(__file__).resolve().parents[1] / "examples" / "trigger-null"
    result = calibrate(demo / "suite", demo.parent / "trigger-demo" / "skill", reps=1, out=tmp_path / "cal")
    lines = [line for line in result.suite_size if line.startswith("trigger queries:")]
    n = len(load_suite(demo / "suite").tasks("val"))
    assert lines and f"these {n} keep a net gain from +" in lines[0] and "+0.20 needs" in lines[0]
    short = n < int(lines[0].split("+0.20 needs ")[1].split()[0])
    assert short == any("skilltune draft triggers" in line for line in lines)
    skill = demo.parent / "trigger-demo" / "skill"
    argv = ["calibrate", str(demo / "suite"), "--skill", str(skill), "--agent", "mock", "--reps", "1"]
    out = runner.invoke(app, [*argv, "--out", str(tmp_path / "cli")])
    assert out.exit_code == 0, out.output
    assert " ".join(out.output.split()).count("trigger queries:") == len(lines)


def test_an_unknown_metric_is_refused_before_any_rollout(tmp_path: Path) -> None:
    """The Python API's edge: calibrate(metric="bogus") is a UsageError naming the metrics, before
    anything runs (it ran every rollout, then failed with a KeyError on the first record)."""
    with pytest.raises(UsageError, match="setting metric: Input should be 'hard', 'soft' or 'mixed'"):
        calibrate(MOCK_SUITE, MOCK_SKILL, reps=1, metric="bogus", out=tmp_path / "cal")
    assert not (tmp_path / "cal").exists()


def test_regimes_flaky_tasks_and_levers(tmp_path: Path) -> None:
    tasks = [rule_task(f"v{i}", ["state-a-default"]) for i in range(4)] + [
        {
            "id": "coin",
            "prompt": "p",
            "requires": [],
            "noise": 0.5,
            "scoring": {"required": ["RESULT: solved"]},
        }
    ]
    suite = write_suite(tmp_path / "suite", [rule_task("t", ["x"])], tasks)
    good = write_skill(tmp_path / "good", "State a default.")
    saturated = calibrate(suite, good, reps=6, out=tmp_path / "a")
    assert saturated.regime == "saturated"
    assert any("restrict the agent's tools" in lever for lever in saturated.levers)
    # five val tasks: the smallest sign-flip p-value is 1/32, above every level of a default run
    assert any(
        "with 5 val tasks the gate cannot keep any edit at decisions 1-12 of 12" in lever
        for lever in saturated.levers
    )
    assert "coin" in saturated.flaky
    hard = calibrate(suite, write_skill(tmp_path / "bad", "Nothing useful."), reps=2, out=tmp_path / "b")
    assert hard.regime == "too hard"
    assert any("reps 3" in lever for lever in hard.levers)
    assert regime_of(None) is None and regime_of(0.5) == "gradient"
    assert rollouts_to_detect(None, 20, 0.1) is None
    # (z_0.99 + z_0.8) * sqrt(2) * 0.5 / 0.1, squared: 502 pairs, rounded up to whole rounds of 20 tasks
    assert rollouts_to_detect(0.5, 20, 0.1) == 520


def test_calibrate_cli(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    args = ["calibrate", str(MOCK_SUITE), "--skill", str(MOCK_SKILL), "--reps", "2", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "regime" in result.output and "calibration.json" in result.output
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "--force" in refused.output
    bad = runner.invoke(app, ["calibrate", str(MOCK_SUITE), "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and not (tmp_path / "x").exists()


def test_ablate_removes_every_line_holding_the_text() -> None:
    good = load_skill(GOOD_SKILL)
    seed, removed = ablate(good, "Quantify customer impact")
    assert len(removed) == 1 and "Quantify customer impact" in removed[0]
    assert "Quantify customer impact" not in seed.text and seed.name == good.name
    with pytest.raises(UsageError, match="matches no line"):
        ablate(good, "no such rule text")


def test_noise_suite_keeps_tasks_and_is_pure_noise(tmp_path: Path) -> None:
    source = load_suite(MOCK_SUITE)
    folder = noise_suite(source, tmp_path / "null")  # type: ignore[arg-type]
    assert validate_suite(folder) == []
    noisy = load_suite(folder)
    assert [t.id for t in noisy.all_tasks()] == [t.id for t in source.all_tasks()]
    assert all(t.field("requires") == [] and t.field("noise") == 0.5 for t in noisy.all_tasks())
    assert noisy.config.model_extra and noisy.config.model_extra["proposer_pool"]


def test_meta_eval_cli_planted_and_null(tmp_path: Path) -> None:
    planted = runner.invoke(
        app,
        [
            "meta-eval", "planted", str(MOCK_SUITE), "--skill", str(GOOD_SKILL), "--ablate", "Quantify customer impact",
            "--runs", "1", "--max-steps", "2", "--gate", "strict", "--out", str(tmp_path / "p"),
        ],
    )  # fmt: skip
    assert planted.exit_code == 0, planted.output
    report = json.loads((tmp_path / "p" / "meta_eval.json").read_text())
    assert report["kind"] == "planted" and report["lost"] > 0
    assert report["summary"]["recovered"] == 1.0, report
    null = runner.invoke(
        app,
        [
            "meta-eval",
            "null",
            str(MOCK_SUITE),
            "--skill",
            str(MOCK_SKILL),
            "--runs",
            "2",
            "--max-steps",
            "2",
            "--out",
            str(tmp_path / "n"),
        ],
    )
    assert null.exit_code == 0, null.output
    report = json.loads((tmp_path / "n" / "meta_eval.json").read_text())
    assert report["kind"] == "null" and len(report["runs"]) == 2
    assert "runs_accepting" in report["summary"]
