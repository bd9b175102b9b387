"""config.json (a run's settings) and seed.json (how to rebuild the seed)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltune.runfiles.base import RunFile
from skilltune.score.base import Metric


class EditBudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schedule: Literal["constant", "linear", "cosine"] = "cosine"
    start: int = Field(default=4, ge=1)
    end: int = Field(default=2, ge=1)


class TrainConfig(BaseModel):
    """Every setting of a run. config.json stores it (secrets redacted) so ``resume`` can continue."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    skill: str
    tag: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    agent: str = "mock"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    proposer: str = "mock"
    proposer_options: dict[str, Any] = Field(default_factory=dict)
    mode: Literal["patch", "rewrite"] = "patch"
    gate: str = "sequential"
    gate_options: dict[str, Any] = Field(default_factory=dict)
    metric: Metric = "mixed"
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="run-wide error rate of the gate")
    alpha_policy: Literal["lord", "spend"] = "spend"
    max_steps: int = Field(default=10, ge=1)
    epochs: int | None = Field(default=None, ge=1)
    epoch_steps: int = Field(default=5, ge=1)
    batch: int = Field(default=8, ge=1)
    reps: int = Field(default=1, ge=1)
    test_reps: int = Field(default=3, ge=1)
    screen: bool = True
    budget_rollouts: int | None = Field(default=None, ge=1)
    budget_tokens: int | None = Field(default=None, ge=1)
    budget_usd: float | None = Field(default=None, gt=0)
    budget_hours: float | None = Field(default=None, gt=0)
    seed: int = 0
    workers: int = Field(default=4, ge=1)
    runs_dir: str = "runs"
    edit_budget: EditBudgetConfig = Field(default_factory=EditBudgetConfig)
    growth_cap: float = Field(default=0.5, ge=0.0)
    patience: int = Field(default=5, ge=1)
    slow_update_sample: int = Field(default=6, ge=1)
    evidence_from: str | None = None
    cache: str | None = Field(default=None, description="a rollout cache folder shared between runs")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    fresh: bool = Field(default=False, description="run rollouts even when the shared cache holds them")
    findings: str | None = Field(
        default=None, description="a findings file shared across runs: the finished run appends its entry"
    )
    prompt_variant: Literal["cheap", "full"] = Field(
        default="cheap", description="skill-trainer's prompt variant: prompt_cheap or prompt_full"
    )
    judge_options: dict[str, Any] = Field(
        default_factory=dict, description="overrides of the suite's judge block (--judge-opt)"
    )

    @property
    def total_steps(self) -> int:
        return min(self.max_steps, self.epochs * self.epoch_steps) if self.epochs else self.max_steps

    @property
    def total_epochs(self) -> int:
        return self.total_steps // self.epoch_steps

    @property
    def planned_decisions(self) -> int:
        """Gate decisions the run may make: one per step and per epoch update."""
        return self.total_steps + self.total_epochs


class RunConfigFile(RunFile, TrainConfig):
    """config.json: the settings (secrets redacted), the suite's content hash and its scoring contract."""

    suite_hash: str
    contract: str

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
