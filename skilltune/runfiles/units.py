"""A unit's files: reflections.json, slow_update.json, gate.json, and its record step.json / epoch.json."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from skilltune.propose.model import Edit, ProposerCall
from skilltune.runfiles.base import Migration, OldRunFileError, RunFile
from skilltune.score.base import Metric


def _calls_without_cost(raw: dict[str, Any]) -> dict[str, Any]:
    # Proposer calls before schema 4 had no cost or notes: unknown, none.
    calls = [call | {"cost_usd": None, "notes": []} for call in raw.get("calls") or []]
    return raw | {"calls": calls}


class ReflectionsFile(RunFile):
    """reflections.json: the proposer's answer (edits in patch mode, whole files in rewrite mode)."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {3: _calls_without_cost}

    edits: list[Edit] = Field(default_factory=list)
    files: dict[str, str] | None = None
    calls: list[ProposerCall] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)


class SlowUpdateFile(RunFile):
    """slow_update.json: the epoch's longitudinal guidance for the skill's slow-update block."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {3: _calls_without_cost}

    guidance: str
    calls: list[ProposerCall] = Field(default_factory=list)


Decision = Literal["accept", "reject", "contaminated"]


class Pair(BaseModel):
    """One task in one gate round: the candidate's and the incumbent's replicate and score
    (None: not scored). The incumbent's replicate may come from an earlier decision."""

    task: str
    candidate_replicate: int
    incumbent_replicate: int
    candidate: float | None
    incumbent: float | None


class Round(BaseModel):
    """A gate round. ``rollouts`` were run for it; ``reused`` incumbent rollouts came from
    earlier decisions of the same incumbent (never the decision that accepted it)."""

    index: int
    replicates: int
    candidate: float | None
    incumbent: float | None
    n_pairs: int
    rollouts: int
    reused: int = 0
    statistic: dict[str, Any] = Field(default_factory=dict)
    pairs: list[Pair] = Field(default_factory=list)


def _replicate_t_verdict(raw: dict[str, Any]) -> dict[str, Any]:
    # Verdicts of run schema <= 5 came from the per-(task, replicate) t test, with fresh
    # incumbent rollouts every round; they stay what they were (a memo is never re-decided).
    sequential = any("bound_t" in (r.get("statistic") or {}) for r in raw.get("rounds", []))
    return raw | {"test": "replicate-t" if sequential else None}


class SecondaryCheck(BaseModel):
    """skill-trainer's two-suite rule: the one-sided regression test on the secondary suite."""

    suite: str
    alpha: float
    n_tasks: int
    mean_diff: float | None  # candidate - incumbent, over tasks
    p_value: float | None  # one-sided: the candidate is worse
    regression: bool


class Verdict(RunFile):
    """gate.json: a gate's decision with its rounds. ``alpha`` is the decision's level under the
    run's error-control policy (set for the sequential gate); ``secondary`` the regression test on
    the secondary suite (which can only turn an accept into a reject); ``test`` names the statistic
    (``signflip``: the task-level sequential sign-flip test; ``replicate-t``: the per-replicate t
    test of run schema <= 5; None: a one-pass gate)."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {5: _replicate_t_verdict}

    decision: Decision
    reason: str
    metric: Metric
    val_candidate: float | None
    val_incumbent: float | None
    rounds: list[Round]
    rollouts: int
    alpha: float | None = None
    secondary: SecondaryCheck | None = None
    test: str | None = None
    reused: int = 0  # incumbent rollouts taken from earlier decisions (not run here)
    prefetched: int = 0  # incumbent rollouts run ahead for rounds this decision did not reach

    @property
    def accept(self) -> bool:
        return self.decision == "accept"


def _no_crash_verdict(raw: dict[str, Any]) -> dict[str, Any]:
    # Schema 1 declared a "crash" verdict that no code wrote; a file holding it was made by hand.
    if raw.get("verdict") == "crash":
        raise OldRunFileError(
            "a unit record with verdict 'crash' (never written by skilltune): delete that unit's folder "
            "to run the unit again"
        )
    return raw


class UnitRecord(RunFile):
    """step.json / epoch.json: a finished unit of a training run (results.tsv is rebuilt from these).

    ``verdict`` is keep or discard; ``decision`` is what decided it (the gate's decision, or
    lint / screen / skip / empty); ``edits`` are compact ``op@anchor: text`` forms.
    """

    MIGRATIONS: ClassVar[dict[int, Migration]] = {1: _no_crash_verdict}

    kind: Literal["step", "epoch"]
    index: int
    step: int
    epoch: int
    candidate: str
    parent: str
    verdict: Literal["keep", "discard"]
    decision: str
    reason: str
    metric: Metric
    val_candidate: float | None = None
    val_incumbent: float | None = None
    alpha: float | None = None  # set when a gate decided the unit
    rollouts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    edits: list[str] = Field(default_factory=list)
    edit_texts: list[str] = Field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The unit's results.tsv row."""
        description = "; ".join(self.edits[:3]) if self.edits else self.reason
        if self.verdict != "keep" and self.edits:
            description = f"{description} ({self.reason})"
        return {
            "step": self.step,
            "epoch": self.epoch,
            "phase": self.kind,
            "candidate": self.candidate[:12],
            "parent": self.parent[:12],
            "verdict": self.verdict,
            "metric": self.metric,
            "val_candidate": self.val_candidate,
            "val_incumbent": self.val_incumbent,
            "rollouts": self.rollouts,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "edits": len(self.edits),
            "description": description,
        }


# Files of a unit's folder (steps/<unit>/), by name.
UNIT_FILES: dict[str, type[RunFile]] = {
    "step.json": UnitRecord,
    "epoch.json": UnitRecord,
    "gate.json": Verdict,
    "reflections.json": ReflectionsFile,
    "slow_update.json": SlowUpdateFile,
}
