"""The settings models of the commands that run rollouts: one field per setting, one flag per field.

``RolloutSettings`` holds what every such command shares (the target agent and its options, the
seed, where and how many rollouts run, the cache, the sandbox, how the suite is read); each
command's model adds its own fields: ``RunSettings`` (``run``), ``CalibrateSettings``
(``calibrate``), ``CompareSettings`` (``compare``, one agent or several) and, in
skilltune/runfiles/config.py, ``TrainConfig`` (``train``, through ``SeveralAgents``). ``smoke``
takes a ``RolloutSettings``.

A field's default and description are its flag's default and help, and its ``cli()`` spec names
the flag: skilltune/cli/settings.py generates every flag of these commands from their model, and
the Python API (``skilltune.evaluate``, ``compare``, ...) takes the same model, or its fields as
keywords. Adding a setting is adding a field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from skilltune.errors import UsageError
from skilltune.metric import Metric
from skilltune.sandbox import SandboxChoice
from skilltune.validation import field_problems


def cli(*flags: str, path: bool = False, repeatable: bool = False) -> dict[str, Any]:
    """A setting's command-line spec (a field's ``json_schema_extra``): its flag's names (without:
    ``--its-name``), whether the value is a path, and whether the flag may be given more than once."""
    spec: dict[str, Any] = {"path": path} | ({"flags": list(flags)} if flags else {})
    return spec | ({"repeatable": True} if repeatable else {})


def key_value_flag(flag: str, description: str) -> Any:
    """A setting given as repeatable ``FLAG key=value`` pairs (``--agent-opt``...): a dict, empty by
    default."""
    return Field(default_factory=dict, description=description, json_schema_extra=cli(flag))


# The spec of a setting that is no flag (train's SUITE argument; what only --config sets).
NO_FLAG: dict[str, Any] = {"flags": []}


class Settings(BaseModel):
    """A command's settings: unknown keys are refused (a misspelt keyword fails loudly), values are
    fixed once made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def flags(cls, name: str) -> list[str]:
        """A setting's command-line flags, long name first (none: set in --config only)."""
        spec = cls.model_fields[name].json_schema_extra
        flags = spec.get("flags") if isinstance(spec, dict) else None
        if isinstance(flags, list):
            return [str(flag) for flag in flags]
        return ["--" + name.replace("_", "-")]

    @classmethod
    def flag_names(cls) -> list[str]:
        """The settings that have a flag, in the order ``--help`` lists them: the command's own
        fields first (as its class declares them), then those of the family it builds on."""
        ordered: list[str] = []
        for klass in cls.__mro__:
            for name in vars(klass).get("__annotations__", {}):
                if name in cls.model_fields and name not in ordered:
                    ordered.append(name)
        return [name for name in ordered if cls.flags(name)]

    @classmethod
    def of(cls, settings: Self | None = None, **given: Any) -> Self:
        """``settings`` (default: this model's defaults) with the keywords in ``given`` applied; a None
        value is "not given". Raises UsageError naming each refused setting and the fix."""
        given = {key: value for key, value in given.items() if value is not None}
        model = type(settings) if settings is not None else cls
        try:
            return model.model_validate((settings.model_dump() if settings else {}) | given)
        except ValidationError as exc:
            problems = field_problems(exc, model=model, noun="setting", unknown_hint="fix the spelling")
            raise UsageError("\n".join(problems)) from None


class AgentSpec(BaseModel):
    """One target agent of a command that runs several: its label (the name of its output folder,
    of its column in the transfer table, of its units in a training run's gate), its backend and
    that backend's options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    agent: str
    options: dict[str, Any] = Field(default_factory=dict)


def distinct_labels(agents: list[AgentSpec]) -> list[AgentSpec]:
    """``agents`` when no two share a label (their folders, transfer columns and gate units would be
    one); else ValueError naming the label and the fix. The one check of a list of agents: ``AgentSpecs``
    holds it, and whatever takes several agents (the CLI's ``--agent``, ``compare_agents``) makes one."""
    labels = [a.label for a in agents]
    for label in dict.fromkeys(labels):
        if labels.count(label) > 1:
            backend = next(a.agent for a in agents if a.label == label)
            raise ValueError(
                f"{labels.count(label)} agents are named {label!r}; name each one, e.g. --agent a={backend} "
                f"--agent b={backend}:key=value (NAME=BACKEND:options)"
            )
    return agents


AgentSpecs = Annotated[list[AgentSpec], AfterValidator(distinct_labels)]


Agent = Annotated[
    str,
    Field(
        description="Target agent backend (see `skilltune agents`).", json_schema_extra=cli("--agent", "-a")
    ),
]


class RolloutSettings(Settings):
    """How a command's rollouts run and how it reads the suite: the settings of every command that
    runs rollouts (run, calibrate, compare, smoke, train)."""

    agent: Agent = "mock"
    agent_options: dict[str, Any] = key_value_flag(
        "--agent-opt", "Agent backend option key=value (repeatable), e.g. placement=system."
    )
    seed: int = Field(default=0, description="Run seed: every random choice derives from it.")
    workers: int = Field(default=4, ge=1, description="Rollouts in parallel.")
    executor: Literal["local", "ray"] = Field(
        default="local", description="Where rollouts run: worker threads here (local) or Ray (ray)."
    )
    ray_address: str | None = Field(
        default=None, description="A Ray cluster to join (unset: a new local instance)."
    )
    cache: Path | None = Field(
        default=None,
        description="A rollout cache folder shared between runs (finished rollouts are reused).",
        json_schema_extra=cli(path=True),
    )
    fresh: bool = Field(default=False, description="Run rollouts even when --cache holds them.")
    sandbox: SandboxChoice = Field(
        default="auto",
        description="Seal each rollout's agent (bwrap: it sees its workspace and the system folders only); "
        "auto seals where bwrap runs (see `skilltune agents`), none never.",
    )
    prompt_variant: Literal["cheap", "full"] = Field(
        default="cheap",
        description="skill-trainer's prompt variant: cheap (prompt_cheap, else prompt) or full (prompt_full); "
        "reaches rubric.py.",
    )
    judge_options: dict[str, Any] = key_value_flag(
        "--judge-opt",
        "Override a setting of the suite's judge key=value (repeatable), e.g. model=gpt-4.1, "
        "api_key_env=MY_KEY; part of the scoring contract.",
    )

    def for_agent(self, spec: AgentSpec) -> RolloutSettings:
        """The rollout settings of one of several agents: ``spec``'s backend and options, the rest
        shared by every agent."""
        shared = self.model_dump(include=set(RolloutSettings.model_fields))
        return RolloutSettings.model_validate(shared | {"agent": spec.agent, "agent_options": spec.options})


def several_agents_flag(purpose: str) -> Any:
    """The ``agent`` field of a command that runs one agent or several (``--agent`` repeatable)."""
    return Field(
        default="mock",
        description="Target agent backend (see `skilltune agents`); repeatable, each "
        f"[NAME=]BACKEND[:key=value,...], {purpose}",
        json_schema_extra=cli("--agent", "-a", repeatable=True),
    )


class SeveralAgents(RolloutSettings):
    """Rollout settings of a command that runs one agent (``agent``, ``agent_options``) or several
    (``agents``: ``--agent`` given more than once, each with its label and options)."""

    agents: AgentSpecs = Field(
        default_factory=list,
        description="Several target agents (--agent given more than once, or [[agents]] tables with label, "
        "agent and options): every stage runs each of them; agent and agent_options are then unused.",
        json_schema_extra=NO_FLAG,
    )

    @model_validator(mode="after")
    def _several_agents(self) -> Self:
        if len(self.agents) == 1:
            raise ValueError("agents: give two or more (one agent is --agent BACKEND with --agent-opt)")
        if self.agents and self.agent_options:
            raise ValueError(
                "agent_options is ambiguous with several agents: give each agent's options in its own "
                "--agent value (--agent NAME=BACKEND:key=value,...)"
            )
        return self

    def targets(self) -> list[AgentSpec]:
        """The target agents: ``agents``, else the one ``agent`` (labelled by its backend)."""
        if self.agents:
            return list(self.agents)
        return [AgentSpec(label=self.agent, agent=self.agent, options=self.agent_options)]

    @property
    def several(self) -> bool:
        """Whether several agents run (each job, record and gate unit names its agent)."""
        return bool(self.agents)


Split = Annotated[Literal["train", "val", "test"], Field(description="The split to run.")]
Reps = Annotated[int, Field(ge=1, description="Replicates per task.")]


class RunSettings(RolloutSettings):
    """``run``: one skill on one split, ``reps`` rollouts per task."""

    split: Split = "val"
    reps: Reps = 1


class CalibrateSettings(RunSettings):
    """``calibrate``: a run with enough replicates to see noise, read for one metric."""

    reps: Reps = 3
    metric: Metric = Field(default="mixed", description="The score to calibrate (the gate's metric).")


class CompareSettings(SeveralAgents):
    """``compare``: every arm on one split, ``reps`` rollouts per task and arm, on one agent or several."""

    agent: str = several_agents_flag(
        "one column each in the transfer table (e.g. --agent claude --agent codex:model=gpt-5.5)."
    )
    split: Split = "test"
    reps: Reps = Field(default=3, description="Replicates per task and arm.")
    metric: Metric = Field(default="mixed", description="The score the pairs compare.")


Runs = Annotated[int, Field(ge=1, description="Training runs.")]


class MetaEvalSettings(Settings):
    """``meta-eval null``: the training runs it makes (a setting not here: train's default; the agent
    is the mock, whose noise the null suite is)."""

    runs: Runs = 5
    proposer: str = Field(default="mock", description="Proposer under test.")
    proposer_options: dict[str, Any] = key_value_flag("--proposer-opt", "Proposer option key=value.")
    gate: str | None = Field(default=None, description="Gate (default: train's default).")
    max_steps: int = Field(default=6, ge=1, description="Steps of each training run.")
    seed: int = Field(default=0, description="Seed of the first run (run k uses seed + k).")

    def train_settings(self) -> dict[str, Any]:
        """What every training run takes as ``train``'s keywords (not its seed: run k's is seed + k)."""
        return self.model_dump(exclude={"runs", "seed"}, exclude_none=True)


class PlantedSettings(MetaEvalSettings):
    """``meta-eval planted``: its training runs, on the agent given."""

    runs: Runs = 3
    agent: Agent = "mock"
