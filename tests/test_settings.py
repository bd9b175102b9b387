"""The settings models (skilltune/settings.py): one family for every command that runs rollouts,
each command's model built on it, TrainConfig too; the order --help lists them; merging keywords."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilltune.errors import UsageError
from skilltune.runfiles import AgentSpec, TrainConfig
from skilltune.settings import (
    CalibrateSettings,
    CompareSettings,
    MetaEvalSettings,
    PlantedSettings,
    RolloutSettings,
    RunSettings,
    SeveralAgents,
)

ROLLOUT = list(RolloutSettings.model_fields)


def test_every_command_model_holds_the_rollout_settings_as_the_family_declares_them() -> None:
    """TrainConfig and each measure command's model are the family's fields, not copies: the same
    default, type and help (``agent`` of a command that runs several agents is repeatable)."""
    assert ROLLOUT == [
        "agent",
        "agent_options",
        "seed",
        "workers",
        "executor",
        "ray_address",
        "cache",
        "fresh",
        "sandbox",
        "prompt_variant",
        "judge_options",
    ]
    for model in (TrainConfig, RunSettings, CalibrateSettings, CompareSettings):
        assert issubclass(model, RolloutSettings)
        for name in ROLLOUT[1:]:
            assert repr(model.model_fields[name]) == repr(RolloutSettings.model_fields[name]), (model, name)
    assert issubclass(TrainConfig, SeveralAgents) and issubclass(CompareSettings, SeveralAgents)
    for model in (TrainConfig, CompareSettings):
        assert model.model_fields["agent"].json_schema_extra == {
            "path": False,
            "flags": ["--agent", "-a"],
            "repeatable": True,
        }


def test_each_command_has_its_own_defaults() -> None:
    assert (RunSettings().split, RunSettings().reps) == ("val", 1)
    assert (CalibrateSettings().split, CalibrateSettings().reps, CalibrateSettings().metric) == (
        "val",
        3,
        "mixed",
    )
    assert (CompareSettings().split, CompareSettings().reps) == ("test", 3)
    assert (MetaEvalSettings().runs, PlantedSettings().runs, PlantedSettings().agent) == (5, 3, "mock")
    assert "agent" not in MetaEvalSettings.model_fields  # the null suite's noise is the mock agent's
    assert PlantedSettings(gate=None, seed=4).train_settings() == {
        "agent": "mock",
        "proposer": "mock",
        "proposer_options": {},
        "max_steps": 6,
    }  # the gate left to train's default, the seed each run's own


def test_help_lists_a_command_own_settings_first_then_the_family() -> None:
    assert RunSettings.flag_names()[:3] == ["split", "reps", "agent"]
    assert CompareSettings.flag_names()[:4] == ["agent", "split", "reps", "metric"]
    names = TrainConfig.flag_names()
    assert names[:3] == ["skill", "tag", "agent"] and names[-len(ROLLOUT) + 1 :] == ROLLOUT[1:]
    assert "suite" not in names and "edit_budget" not in names and "agents" not in names  # no flag
    assert TrainConfig.flags("agent_options") == ["--agent-opt"] and TrainConfig.flags("suite") == []
    assert RunSettings.flags("ray_address") == ["--ray-address"]


def test_of_applies_the_keywords_given_and_refuses_a_misspelt_one() -> None:
    base = RunSettings(seed=3, workers=2)
    merged = RunSettings.of(base, reps=2, cache=None)  # None: not given
    assert (merged.seed, merged.workers, merged.reps, merged.cache) == (3, 2, 2, None)
    calibrate = RunSettings.of(CalibrateSettings(metric="hard"), split="train")
    assert isinstance(calibrate, CalibrateSettings) and calibrate.metric == "hard"  # the model given
    with pytest.raises(
        UsageError, match=r"unknown setting 'sandox' \(known: .*sandbox.*\): fix the spelling"
    ):
        RunSettings.of(sandox="none")
    with pytest.raises(UsageError, match="setting executor: Input should be 'local' or 'ray'"):
        CompareSettings.of(executor="dask")
    assert RolloutSettings.of(cache="c").cache == Path("c")


def test_one_of_several_agents_takes_its_own_backend_and_options_and_shares_the_rest() -> None:
    config = TrainConfig(
        suite="s",
        skill="k",
        tag="t",
        seed=5,
        workers=2,
        sandbox="none",
        agents=[{"label": "a", "agent": "mock", "options": {"crn": True}}, {"label": "b", "agent": "mock"}],
    )
    first = config.for_agent(config.agents[0])
    assert type(first) is RolloutSettings
    assert first == RolloutSettings(
        agent="mock", agent_options={"crn": True}, seed=5, workers=2, sandbox="none"
    )
    assert CompareSettings(agent="mock").targets() == [AgentSpec(label="mock", agent="mock")]
    with pytest.raises(UsageError, match="agent_options is ambiguous with several agents"):
        CompareSettings.of(agents=config.agents, agent_options={"x": 1})
