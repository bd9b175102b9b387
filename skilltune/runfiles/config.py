"""config.json (a run's settings) and seed.json (how to rebuild the seed)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skilltune.metric import Metric
from skilltune.runfiles.base import Migration, RunFile
from skilltune.settings import NO_FLAG, SeveralAgents, cli, key_value_flag, several_agents_flag


class EditBudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedule: Literal["constant", "linear", "cosine"] = "cosine"
    start: int = Field(default=4, ge=1)
    end: int = Field(default=2, ge=1)


AgentsGate = Literal["mean", "no-worse"]
# Settings of a run with several agents: config.json leaves them out for one agent (as before them).
SEVERAL_AGENTS_SETTINGS = ("agents", "agents_gate")


class TrainConfig(SeveralAgents):
    """Every setting of a run: the rollout settings ``SeveralAgents`` holds (skilltune/settings.py),
    and training's own. config.json stores it (secrets redacted) so ``resume`` can continue.

    Each field's default and description are the ``train`` flag's default and help (the CLI is
    generated from this model): write descriptions as the help sentence, without the default.
    A ``dict`` field is a repeatable ``key=value`` flag; a bool one ``--name/--no-name``.
    """

    suite: str = Field(description="The suite (the SUITE argument).", json_schema_extra=NO_FLAG)
    skill: str = Field(
        description="Seed skill folder or instruction file.",
        json_schema_extra=cli("--skill", "-s", path=True),
    )
    tag: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Run name: the run lives in RUNS_DIR/TAG."
    )
    agent: str = several_agents_flag(
        "to tune for several agents at once (e.g. --agent a=mock:ignores=x --agent b=mock)."
    )
    agents_gate: AgentsGate = Field(
        default="no-worse",
        description="With several --agent, what a keep means: mean (the gate on the pooled (agent, task) "
        "units) or no-worse (that, and no agent significantly hurt).",
    )
    proposer: str = Field(default="mock", description="Proposer: mock, or a model backend.")
    proposer_options: dict[str, Any] = key_value_flag(
        "--proposer-opt", "Proposer option key=value (repeatable), e.g. model=gpt-4.1."
    )
    mode: Literal["patch", "rewrite"] = Field(
        default="patch",
        description="What the proposer writes: anchored edits (patch) or a whole new document.",
    )
    component: Literal["body", "description", "both"] = Field(
        default="body",
        description="What the steps tune: the skill's body, the front matter's description (trigger tasks), "
        "or both (odd steps the description, even steps the body, each candidate gated on its own).",
    )
    gate: str = Field(default="sequential", description="Gate: sequential, paired-z or strict.")
    gate_options: dict[str, Any] = key_value_flag(
        "--gate-opt", "Gate option key=value (repeatable): max_reps, min_effect, futility_confidence, rho."
    )
    metric: Metric = Field(default="mixed", description="The score the gate compares.")
    alpha: float = Field(
        default=0.05,
        gt=0.0,
        lt=0.5,
        description="Run-wide error rate of the sequential gate (above 0, below 0.5).",
    )
    alpha_policy: Literal["lord", "spend"] = Field(
        default="spend",
        description="How the gate spends alpha: spend (family-wise, under any dependence) or lord (alpha-investing).",
    )
    max_steps: int = Field(default=10, ge=1, description="Steps to run.")
    epochs: int | None = Field(
        default=None,
        ge=1,
        description="Epochs to run: at most epochs x --epoch-steps steps (and --max-steps).",
    )
    epoch_steps: int = Field(default=5, ge=1, description="Steps per epoch; a slow update follows each.")
    batch: int = Field(default=8, ge=1, description="Train minibatch size.")
    reps: int = Field(default=1, ge=1, description="Replicates per task in train and gate passes.")
    test_reps: int = Field(default=3, ge=1, description="Replicates per task in the final test.")
    screen: bool = Field(default=True, description="Screen candidates on the train batch before the gate.")
    proposals: int = Field(
        default=4,
        ge=1,
        le=32,
        description="Asks to the proposer a step: one focused ask per failure group of the train batch, then "
        "independent samples; each proposal is screened on the train tasks it targets and the ones that "
        "fix more than they break make the step's candidate (1: one ask, its edits merged, as before; "
        "one ask with --no-screen or --mode rewrite, which have no screen to choose between proposals).",
    )
    carry: Literal["off", "screen", "run", "gate"] = Field(
        default="run",
        description="Carry a candidate's edits into the next step: run (one that beats its parent on the "
        "train screen is not gated yet; the next steps build on it and the run's last step gates it), screen "
        "(the same, gated at the last step of its epoch, or alone by a step that adds nothing), gate (one "
        "the gate did not keep for lack of evidence, with a positive val gain and no harm) or off (each "
        "candidate gated in its step).",
    )
    budget_rollouts: int | None = Field(
        default=None, ge=1, description="Most rollouts to spend (unset: no limit)."
    )
    budget_tokens: int | None = Field(
        default=None, ge=1, description="Most tokens, agents and proposer together (unset: no limit)."
    )
    budget_usd: float | None = Field(
        default=None, gt=0, description="Most USD, reported or estimated (unset: no limit)."
    )
    budget_hours: float | None = Field(default=None, gt=0, description="Most active hours (unset: no limit).")
    runs_dir: str = Field(default="runs", description="Where runs live.", json_schema_extra=cli(path=True))
    edit_budget: EditBudgetConfig = Field(
        default_factory=EditBudgetConfig,
        description="Edits a step may keep, scheduled from start to end (the TOML table edit_budget only).",
        json_schema_extra=NO_FLAG,
    )
    growth_cap: float = Field(
        default=0.5,
        ge=0.0,
        description="Most a step may grow the skill, as a share of its text (plus 200 characters).",
    )
    patience: int = Field(default=5, ge=1, description="Discarded candidates in a row that end the run.")
    slow_update_sample: int = Field(
        default=6, ge=1, description="Train tasks each slow update runs the two skills on."
    )
    evidence_from: str | None = Field(
        default=None,
        description="Use the train rollouts recorded by another run (its directory).",
        json_schema_extra=cli(path=True),
    )
    findings: str | None = Field(
        default=None,
        description="A findings file shared across runs: the finished run appends its entry once.",
        json_schema_extra=cli(path=True),
    )

    @model_validator(mode="after")
    def _agents_gate(self) -> Self:
        if not self.agents and self.agents_gate != "no-worse":
            raise ValueError("agents_gate chooses among several agents: give --agent more than once")
        return self

    @property
    def asks(self) -> int:
        """Asks a step makes: ``proposals``, or one where proposals cannot be told apart on a screen
        (``--no-screen``; rewrite mode, whose whole documents are not bundled)."""
        return self.proposals if self.screen and self.mode == "patch" else 1

    @property
    def total_steps(self) -> int:
        return min(self.max_steps, self.epochs * self.epoch_steps) if self.epochs else self.max_steps

    @property
    def total_epochs(self) -> int:
        """Epoch slow updates (none when only the description is tuned: they write the body)."""
        return 0 if self.component == "description" else self.total_steps // self.epoch_steps

    @property
    def planned_decisions(self) -> int:
        """Gate decisions the run may make: one per step and per epoch update."""
        return self.total_steps + self.total_epochs

    def component_at(self, step: int) -> Literal["body", "description"]:
        """What step ``step`` tunes: ``both`` alternates, the description first."""
        if self.component == "both":
            return "description" if step % 2 == 1 else "body"
        return self.component


class RunConfigFile(RunFile, TrainConfig):
    """config.json: the settings (secrets redacted), the suite's content hash and its scoring contract."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {7: lambda raw: {"sandbox": "none"} | raw}  # ran unsealed

    suite_hash: str
    contract: str
    # A config.json without ``carry`` was written before --carry existed, when every run ran as
    # ``off``: it reads as the run ran, not as today's default ``screen`` (every config.json written
    # since names it).
    carry: Literal["off", "screen", "run", "gate"] = "off"
    # Likewise without ``proposals`` (schema 9 and older): every step asked once.
    proposals: int = 1

    def omitted(self, data: dict[str, Any]) -> list[str]:
        """A run with one agent leaves the settings of several out (its config.json as before them)."""
        return [] if data.get("agents") else [k for k in SEVERAL_AGENTS_SETTINGS if k in data]

    def settings(self) -> TrainConfig:
        return TrainConfig.model_validate(
            self.model_dump(exclude={"schema_version", "suite_hash", "contract"})
        )


class SeedFile(RunFile):
    """seed.json: how to rebuild the seed candidate from the files under seed/."""

    main: str
    kind: Literal["folder", "file"]
    fallback_name: str
    hash: str
