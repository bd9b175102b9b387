"""Several target agents in one training run, piece by piece (skilltune/training/agents.py and the
files it adds to): the settings, the files of a one-agent run as before, each agent's evidence and
the no-worse veto, the job folders, the evidence ids, the plan. The runs themselves:
tests/test_multitrain.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skilltune.cli.settings import agent_settings
from skilltune.errors import UsageError
from skilltune.propose.reflect import trajectory_id
from skilltune.rollout.runner import RolloutJob, rollout_dir
from skilltune.rollout.tally import Unit, unit_of
from skilltune.runfiles import AgentSpec, RolloutRecord, RunConfigFile, UnitRecord, Verdict
from skilltune.score.base import Score
from skilltune.suite import load_suite
from skilltune.training.agents import agent_evidence, agents_veto, harm_groups, trade_offs
from skilltune.training.budget import Plan
from skilltune.training.config import config_file, make_config, settings_for_resume
from tests.helpers import MOCK_SKILL, MOCK_SUITE

TWO = [
    {"label": "a", "agent": "mock", "options": {"ignores": "x"}},
    {"label": "b", "agent": "mock", "options": {}},
]


def _config(**settings: Any) -> Any:
    return make_config(suite=str(MOCK_SUITE), skill=str(MOCK_SKILL), tag="t", **settings)


def _record(
    task: str, candidate: str, hard: int, target: str | None = None, replicate: int = 0
) -> RolloutRecord:
    score = Score(hard=hard, soft=float(hard), mixed=float(hard), contract="c")
    return RolloutRecord(
        task_id=task, split="val", phase="gate", replicate=replicate, seed=0, candidate=candidate, agent="mock",
        target=target, options_hash="o", task_hash="h", status="ok" if hard else "task_failed", score=score,
        wall_s=0.0, started_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip


# --- settings --------------------------------------------------------------------------------------


def test_one_agent_value_is_a_run_as_before_and_several_are_agents() -> None:
    assert agent_settings(["mock"]) == {"agent": "mock"}
    assert agent_settings(["mock:crn=true"]) == {"agent": "mock", "agent_options": {"crn": True}}
    several = agent_settings(["a=mock:ignores=x", "b=mock"])
    assert several == {"agents": TWO}
    config = _config(**several)
    assert config.several and [t.label for t in config.targets()] == ["a", "b"]
    assert config.agents_gate == "no-worse"  # the default with several agents
    assert _config().targets() == [AgentSpec(label="mock", agent="mock")]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"agents": [TWO[0], TWO[0]]}, "2 agents are named 'a'"),
        ({"agents": TWO[:1]}, "give two or more"),
        ({"agents": TWO, "agent_options": {"crn": True}}, "agent_options is ambiguous"),
        ({"agents_gate": "mean"}, "give --agent more than once"),
        ({"agents": [{"label": "a/b", "agent": "mock"}, TWO[1]]}, "label"),
    ],
    ids=["same-label", "one", "agent-opt", "gate-without-agents", "bad-label"],
)
def test_bad_agent_settings_are_refused_naming_the_fix(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match="invalid training settings") as caught:
        _config(**settings)
    assert message in str(caught.value)


def test_config_json_of_one_agent_holds_no_agent_list_and_of_several_holds_them(tmp_path: Path) -> None:
    one = config_file(_config(), "s", "c")
    one.write(tmp_path / "one.json")
    raw = json.loads((tmp_path / "one.json").read_text())
    assert "agents" not in raw and "agents_gate" not in raw  # byte for byte as before the feature
    assert RunConfigFile.read(tmp_path / "one.json").settings() == _config()
    several = config_file(_config(agents=TWO, agents_gate="mean"), "s", "c")
    several.write(tmp_path / "two.json")
    raw = json.loads((tmp_path / "two.json").read_text())
    assert raw["agents"] == TWO and raw["agents_gate"] == "mean"
    stored = RunConfigFile.read(tmp_path / "two.json")
    assert settings_for_resume(stored, {}).agents == [AgentSpec.model_validate(a) for a in TWO]
    with pytest.raises(UsageError, match="--agents-gate"):  # a resume keeps what a keep means
        settings_for_resume(stored, {"agents_gate": "no-worse"})


def test_a_redacted_secret_in_an_agent_option_stops_a_resume_saying_where_it_comes_from(
    tmp_path: Path,
) -> None:
    secret = [TWO[0] | {"options": {"api_key": "sk-1"}}, TWO[1]]
    config_file(_config(agents=secret), "s", "c").write(tmp_path / "config.json")
    assert "sk-1" not in (tmp_path / "config.json").read_text()
    with pytest.raises(UsageError, match="from the environment"):
        settings_for_resume(RunConfigFile.read(tmp_path / "config.json"), {})


# --- records, folders, units -------------------------------------------------------------------------


def test_a_record_says_its_agent_only_in_a_run_with_several(tmp_path: Path) -> None:
    _record("t", "c" * 64, 1).write(tmp_path / "one.json")
    assert "target" not in json.loads((tmp_path / "one.json").read_text())
    _record("t", "c" * 64, 1, target="a").write(tmp_path / "two.json")
    assert RolloutRecord.read(tmp_path / "two.json").target == "a"


def test_two_agents_jobs_never_share_a_folder_and_one_agents_folder_is_as_before() -> None:
    task = load_suite(MOCK_SUITE).tasks("val")[0]
    one = RolloutJob(task, "gate", None, 3, 0)
    assert rollout_dir(Path("u"), one) == Path("u/rollouts/gate/noskill") / f"{task.id}_r3"
    a, b = RolloutJob(task, "gate", None, 3, 0, "a", True), RolloutJob(task, "gate", None, 3, 0, "b", True)
    assert rollout_dir(Path("u"), a).parent.name == "noskill@a" and a.target == "a"
    assert len({rollout_dir(Path("u"), j) for j in (one, a, b)}) == 3
    lone = RolloutJob(task, "gate", None, 3, 0, "mock")  # a lone agent's job names it, its files do not
    assert rollout_dir(Path("u"), lone) == rollout_dir(Path("u"), one) and lone.target is None


def test_units_and_trajectory_ids_name_the_agent_only_when_there_are_several() -> None:
    plain, labelled = _record("t1", "c", 1), _record("t1", "c", 1, target="a", replicate=2)
    assert (str(unit_of(plain)), str(unit_of(labelled))) == ("t1", "a/t1")
    assert (trajectory_id(plain), trajectory_id(labelled)) == ("t1#r0", "a/t1#r2")


# --- each agent's evidence and the veto --------------------------------------------------------------


def _gate_records() -> tuple[list[RolloutRecord], list[RolloutRecord]]:
    """Agent ``up``: the candidate fixes 8 of 10 tasks; agent ``down``: it breaks 6 of 10."""
    cand, inc = [], []
    for i in range(10):
        cand += [_record(f"t{i}", "C", int(i < 8), "up"), _record(f"t{i}", "C", int(i >= 6), "down")]
        inc += [_record(f"t{i}", "I", 0, "up"), _record(f"t{i}", "I", 1, "down")]
    return cand, inc


def test_each_agents_evidence_holds_its_means_and_whether_it_is_hurt() -> None:
    cand, inc = _gate_records()
    up, down = agent_evidence(["up", "down"], cand, inc, "hard", 0.05)
    assert (up.val_candidate, up.val_incumbent, up.hurt) == (0.8, 0.0, False)
    assert (down.val_candidate, down.val_incumbent, down.hurt, down.n_tasks) == (0.4, 1.0, True, 10)
    assert down.mean_diff == -0.6 and down.p_value is not None and down.p_value < 0.05
    assert down.cell().startswith("down 1.000 -> 0.400 HURT p=")  # from the incumbent to the candidate


def _accept() -> Verdict:
    return Verdict(
        decision="accept", reason="pooled gain", metric="hard", val_candidate=0.6, val_incumbent=0.5,
        rounds=[], rollouts=40,
    )  # fmt: skip


def test_no_worse_turns_an_accept_into_a_reject_when_an_agent_is_hurt_and_mean_does_not() -> None:
    cand, inc = _gate_records()
    evidence = agent_evidence(["up", "down"], cand, inc, "hard", 0.05)
    vetoed = agents_veto(_accept(), evidence, "no-worse")
    assert vetoed.decision == "reject" and "down -0.600 over 10 task(s)" in vetoed.reason
    assert "the pooled gate had accepted: pooled gain" in vetoed.reason
    kept = agents_veto(_accept(), evidence, "mean")
    assert kept.accept and kept.agents == evidence and kept.agents_gate == "mean"
    rejected = _accept().model_copy(update={"decision": "reject", "reason": "futile"})
    assert agents_veto(rejected, evidence, "no-worse").reason == "futile"  # never a reject into an accept
    fine = [e.model_copy(update={"hurt": False}) for e in evidence]
    assert agents_veto(_accept(), fine, "no-worse").accept


def test_the_harm_veto_pools_a_tasks_agents_only_under_mean_and_never_vetoes_trigger_units() -> None:
    ids = [t.id for t in load_suite(MOCK_SUITE).tasks("val")[:2]]
    units = [Unit(t, a) for a in ("x", "y") for t in ids]
    assert harm_groups(units, "mean") == {f"{a}/{t}": t for a in ("x", "y") for t in ids}
    assert harm_groups(units, "no-worse") == {}
    assert trade_offs([ids[0]], units) == {f"x/{ids[0]}", f"y/{ids[0]}"}
    assert trade_offs([ids[0]], [Unit(t) for t in ids]) == {ids[0]}  # one agent: the tasks


def test_gate_json_and_the_unit_record_leave_the_agents_out_with_one_agent(tmp_path: Path) -> None:
    _accept().write(tmp_path / "gate.json")
    assert not {"agents", "agents_gate"} & set(json.loads((tmp_path / "gate.json").read_text()))
    cand, inc = _gate_records()
    evidence = agent_evidence(["up", "down"], cand, inc, "hard", 0.05)
    agents_veto(_accept(), evidence, "mean").write(tmp_path / "gate2.json")
    assert Verdict.read(tmp_path / "gate2.json").agents == evidence
    unit = UnitRecord(
        kind="step", index=1, step=1, epoch=1, candidate="C", parent="I", verdict="keep", decision="accept",
        reason="r", metric="hard",
    )  # fmt: skip
    assert "agents" not in unit.row()
    assert unit.model_copy(update={"agents": evidence}).row()["agents"].startswith("up 0.000 -> 0.800; down")


def test_the_plan_counts_every_agents_rollouts() -> None:
    suite = load_suite(MOCK_SUITE)
    one = Plan.of(suite, 8, 1, 3, True, 6, 8)
    three = Plan.of(suite, 8, 1, 3, True, 6, 8, agents=3)
    assert (three.baseline, three.step, three.epoch, three.final) == (
        3 * one.baseline, 3 * one.step, 3 * one.epoch, 3 * one.final,
    )  # fmt: skip
    assert three.total(2, 1) == 3 * one.total(2, 1)
    assert "each x3 agents" in three.explain_step() and "agents" not in one.explain_step()


def test_a_config_file_names_several_agents_in_agents_tables(tmp_path: Path) -> None:
    from skilltune.cli.train import read_config_file

    path = tmp_path / "run.toml"
    path.write_text(
        'agents-gate = "mean"\n\n[[agents]]\nlabel = "a"\nagent = "mock"\noptions = { ignores = ["x"] }\n\n'
        '[[agents]]\nlabel = "b"\nagent = "mock"\n'
    )
    settings = read_config_file(path)
    config = _config(**settings)
    assert [(a.label, a.options) for a in config.agents] == [("a", {"ignores": ["x"]}), ("b", {})]
    assert config.agents_gate == "mean"
    path.write_text('[[agents]]\nlabel = "a"\nagent = "mock"\n')
    with pytest.raises(UsageError, match="give two or more"):  # checked with the whole run's settings
        _config(**read_config_file(path))
