"""``--carry``: a candidate's edits carried into the next step (training/carry.py ``CarryPolicy``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilltune.rundir import RunDir
from skilltune.runfiles import TrainConfig, UnitDecision, UnitRecord, Verdict
from skilltune.runfiles.units import HarmCheck, SecondaryCheck
from skilltune.skill import load_skill
from skilltune.training import train
from skilltune.training.carry import Carried, CarryPolicy, Gate
from skilltune.training.gating import Draft
from skilltune.training.units import Unit
from tests.helpers import MOCK_SKILL, MOCK_SKILL_16, MOCK_SUITE_16, quiet, stopped_run


def _record(index: int, decision: str, verdict: str = "discard", alpha: float | None = None) -> UnitRecord:
    return UnitRecord.model_validate(
        {
            "kind": "step",
            "index": index,
            "step": index,
            "epoch": 1,
            "candidate": f"c{index}",
            "parent": "p",
            "verdict": verdict,
            "decision": decision,
            "reason": "",
            "metric": "mixed",
            "alpha": alpha,
            "edits": [f"append@x: rule {index}"],
        }
    )


def carried(run: RunDir, done: list[UnitRecord], mode: str) -> UnitRecord | None:
    return CarryPolicy(mode).carried(run, done)  # type: ignore[arg-type]  # the modes as the tests name them


def _gate(run: RunDir, index: int, gain: float, **update: object) -> None:
    folder = run.unit_dir("step", index)
    folder.mkdir(parents=True, exist_ok=True)
    Verdict(
        decision="reject", reason="futility", metric="mixed", val_candidate=0.5 + gain, val_incumbent=0.5,
        rounds=[], rollouts=32,
    ).model_copy(update=update).write(folder / "gate.json")  # fmt: skip


def _rounds() -> list[object]:
    from skilltune.runfiles.units import Round

    return [Round(index=0, replicates=1, candidate=0.6, incumbent=0.5, n_pairs=16, rollouts=32)]


def test_a_futile_candidate_is_carried_a_harmed_or_regressed_or_worse_one_is_not(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    rounds = _rounds()
    _gate(run, 1, +0.1, rounds=rounds)
    futile = [_record(1, "reject", alpha=0.01)]
    assert carried(run, futile, "gate") == futile[0]
    assert carried(run, futile, "screen") is None and carried(run, futile, "off") is None
    # a step discarded before its gate leaves the carry as it was; a keep or another gate ends it
    assert carried(run, [*futile, _record(2, "screen")], "gate") == futile[0]
    assert carried(run, [*futile, _record(2, "accept", "keep", 0.01)], "gate") is None
    _gate(run, 1, -0.1, rounds=rounds)
    assert carried(run, futile, "gate") is None  # no val gain
    harm = HarmCheck(tolerance=0.5, confidence=0.9, suspects={"t1": -1.0}, harmed={"t1": -0.7}, noise=0.1)
    _gate(run, 1, +0.1, rounds=rounds, harm=harm)
    assert carried(run, futile, "gate") is None  # the harm veto
    regressed = SecondaryCheck(
        suite="s2", alpha=0.05, n_tasks=4, mean_diff=-0.3, p_value=0.01, regression=True
    )
    _gate(run, 1, +0.1, rounds=rounds, secondary=regressed)
    assert carried(run, futile, "gate") is None  # the secondary suite's regression veto
    _gate(run, 1, +0.1)
    assert carried(run, futile, "gate") is None  # no rounds run: it could not accept


def test_a_deferred_candidate_is_carried_until_a_gate_decides(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    defer = _record(1, "carry", "carried")
    assert carried(run, [defer], "screen") == defer
    assert carried(run, [defer], "off") is None
    assert carried(run, [defer, _record(2, "empty")], "screen") == defer
    _gate(run, 2, +0.1, rounds=_rounds())
    assert carried(run, [defer, _record(2, "reject", alpha=0.01)], "screen") is None


def test_carry_screen_builds_on_a_deferred_candidate_and_shows_it(tmp_path: Path) -> None:
    """On the 16-val-task demo at seed 13 step 1's candidate (two of the three missing rules) beats
    the seed on train and is carried ungated; step 2 adds the third rule on top of it, and the gate
    keeps the three together (without --carry step 1 keeps two and the third cannot be kept)."""
    result = train(
        MOCK_SUITE_16, MOCK_SKILL_16, tag="c", runs_dir=str(tmp_path), max_steps=3, seed=13, carry="screen",
        reporter=quiet(),
    )  # fmt: skip
    run = RunDir(Path(result.run_dir))
    first = UnitRecord.read(run.unit_dir("step", 1) / "step.json")
    assert first.verdict == "carried" and first.decision == "carry" and first.alpha is None
    assert not (run.unit_dir("step", 1) / "gate.json").exists()  # no val rollout, no alpha
    kept = [UnitRecord.read(run.unit_dir("step", i) / "step.json") for i in (2, 3)]
    keep = next(r for r in kept if r.verdict == "keep")
    assert keep.carried is not None and keep.carried_edits >= len(first.edits)
    assert keep.edits[: len(first.edits)] == first.edits
    text = (run.unit_dir(keep.kind, keep.index) / "candidate_skill.md").read_text()
    assert all(t in text for t in first.edit_texts)
    verdict = Verdict.read(run.unit_dir(keep.kind, keep.index) / "gate.json")
    assert verdict.carried == keep.carried and verdict.carried_edits == keep.edits[: keep.carried_edits]
    assert f"carried from step {keep.carried}" in run.results.read_text()
    from skilltune.report import write_report

    html = write_report(run.root).read_text()
    assert f"carried from step {keep.carried}" in html


def test_a_carried_candidate_survives_a_stop_and_resume(tmp_path: Path) -> None:
    from skilltune.training import resume

    run = stopped_run(
        tmp_path, "s", 3, MOCK_SUITE_16, skill=MOCK_SKILL_16, gate="sequential", seed=13, carry="screen"
    )
    assert UnitRecord.read(run.unit_dir("step", 1) / "step.json").verdict == "carried"
    (run.root / "STOP").unlink()
    resume(run.root, reporter=quiet())
    train(
        MOCK_SUITE_16, MOCK_SKILL_16, tag="u", runs_dir=str(tmp_path), max_steps=3, seed=13, carry="screen",
        reporter=quiet(),
    )  # fmt: skip
    assert run.results.read_text() == (tmp_path / "u" / "results.tsv").read_text()


@pytest.mark.parametrize(
    ("why", "said"),
    [
        (
            ("empty", "every train rollout of the batch passed: no failure to ask about"),
            "this step added nothing (every train rollout of the batch passed: no failure to ask about), "
            "so step 1's carried candidate was gated as it was: ",
        ),
        (
            ("screen", "screen: no rule fixed more train tasks than it broke (6 screened)"),
            "this step added nothing (the screen kept none: no rule fixed more train tasks than it broke "
            "(6 screened)), so step 1's carried candidate was gated as it was: ",
        ),
        (None, "step 1's carried candidate was gated as it was: "),
    ],
)
def test_a_step_that_adds_nothing_gates_the_carried_candidate_and_says_so(
    why: tuple[UnitDecision, str] | None, said: str
) -> None:
    """The step's reason starts with a sentence saying why the carried candidate was gated alone
    (the gate's reason follows it)."""
    config = TrainConfig(suite="s", skill=str(MOCK_SKILL), tag="t", max_steps=2)
    seed = load_skill(MOCK_SKILL)
    record = _record(1, "carry", "carried")
    draft = Draft(Unit("step", 2, 2), 2, 1, "p", "mixed", edits=record.edits, edit_texts=["rule 1"], carried=1,
                  carried_edits=1)  # fmt: skip
    route = CarryPolicy("run").route(config, draft, None, None, Carried(record, seed), why)
    assert isinstance(route, Gate) and route.candidate == seed
    assert route.draft.note == said


def test_a_config_without_carry_reads_as_off_whatever_the_default(tmp_path: Path) -> None:
    """A config.json that does not name ``carry`` (written before the setting existed, when every run
    ran without it) reads as ``off`` even if TrainConfig's default changes, so it resumes as it ran."""
    from skilltune.runfiles import RunConfigFile

    raw = {"schema_version": 9, "suite": "/s", "skill": "/k", "tag": "t", "suite_hash": "h", "contract": "c"}
    old = RunConfigFile.parse(raw, "config.json")
    assert old.carry == "off" and old.settings().carry == "off"
    assert RunConfigFile.model_fields["carry"].default == "off"
    new = RunConfigFile.parse(raw | {"carry": "screen"}, "config.json")
    assert new.settings().carry == "screen"
    path = tmp_path / "config.json"
    old.write(path)  # written again (a resumed run), it names what it ran
    assert RunConfigFile.read(path).carry == "off"
