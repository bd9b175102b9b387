"""Budgets of a training run: what a step costs, what the run plans, what it has spent.

Spending is read from the run directory (every record.json is one rollout), so a
resumed run counts what earlier sessions spent, and the rollout budget ends a
run at the same unit however often it was interrupted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skilltune.rundir import RunDir
from skilltune.runfiles import (
    AskFile,
    ReflectionsFile,
    RolloutRecord,
    SlowUpdateFile,
    StageDone,
    active_seconds,
)
from skilltune.suite import Suite


class BudgetExhausted(Exception):
    """A budget cannot pay for the next unit."""


@dataclass(frozen=True)
class Spent:
    rollouts: int
    tokens: int
    cost_usd: float


@dataclass(frozen=True)
class Plan:
    """Rollouts per unit, from the suite's split sizes and the run's settings."""

    val: int
    test: int
    batch: int
    reps: int
    test_reps: int
    screen: bool
    slow_sample: int
    gate_reps: int  # replicates per task per arm a gate may use (the cap, for a sequential gate)
    agents: int = 1  # target agents: every rollout of the plan runs once per agent
    asks: int = 1  # proposals a step screens (--proposals): each at most on the whole batch
    edits: int = 0  # most edits a step keeps: with several asks, each may cost a leave-one-out screen

    @classmethod
    def of(
        cls,
        suite: Suite,
        batch: int,
        reps: int,
        test_reps: int,
        screen: bool,
        slow_sample: int,
        gate_reps: int,
        agents: int = 1,
        asks: int = 1,
        edits: int = 0,
    ) -> Plan:
        train = len(suite.tasks("train"))
        return cls(
            val=len(suite.tasks("val")),
            test=len(suite.tasks("test")) if suite.has_split("test") else 0,
            batch=min(batch, train),
            reps=reps,
            test_reps=test_reps,
            screen=screen,
            slow_sample=min(slow_sample, train),
            gate_reps=gate_reps,
            agents=agents,
            asks=asks,
            edits=edits,
        )

    @property
    def baseline(self) -> int:
        return self.val * self.reps * self.agents

    @property
    def gate(self) -> int:
        """At most: a sequential gate usually stops well before its cap."""
        return 2 * self.val * self.gate_reps * self.agents

    @property
    def screens(self) -> int:
        """At most: batches of the screen a step runs. One ask: its candidate on the batch. Several: each
        proposal (on its targets and a few passing tasks: at most the batch), then the candidate and one
        leave-one-out screen per edit it holds (on the union of its proposals' tasks)."""
        if not self.screen:
            return 0
        return 1 if self.asks == 1 else self.asks + (1 + self.edits if self.edits >= 2 else 0)

    @property
    def step(self) -> int:
        """The train minibatch, the screen, and the gate's val pass."""
        return self.batch * self.reps * (1 + self.screens) * self.agents + self.gate

    @property
    def epoch(self) -> int:
        return 2 * self.slow_sample * self.reps * self.agents + self.gate

    @property
    def final(self) -> int:
        return 2 * self.test * self.test_reps * self.agents

    def total(self, steps: int, epochs: int) -> int:
        return self.baseline + steps * self.step + epochs * self.epoch + self.final

    def explain_step(self) -> str:
        screen = f" x{1 + self.screens} with the screen" if self.screen else ""
        each = f", each x{self.agents} agents" if self.agents > 1 else ""
        return f"train {self.batch}x{self.reps}{screen}, gate up to 2x{self.val}x{self.gate_reps}{each}"


def records_run(folder: Path) -> list[RolloutRecord]:
    """The rollout records under ``folder`` that were run, not copied from a shared rollout cache
    (``cached_from``: those cost nothing here)."""
    found = (RolloutRecord.read(path) for path in sorted(folder.rglob("record.json")))
    return [rec for rec in found if not rec.cached_from]


def proposer_tokens(folder: Path) -> int:
    """Tokens of the proposer calls recorded under ``folder`` (reflections and slow updates; a step's
    asks before its reflections.json gathers their calls: a step interrupted between its asks and the
    end of its screen has paid for them)."""
    reflections = sum(ReflectionsFile.read(p).tokens for p in sorted(folder.rglob("reflections.json")))
    asks = sum(
        AskFile.read(p).tokens
        for p in sorted(folder.rglob("asks/ask_*.json"))
        if not (p.parent.parent / "reflections.json").is_file()
    )
    return (
        reflections
        + asks
        + sum(SlowUpdateFile.read(p).tokens for p in sorted(folder.rglob("slow_update.json")))
    )


def record_tokens(record: RolloutRecord) -> int:
    """A rollout's tokens: the agent's and its judge's (as the report counts them)."""
    return record.spent_tokens


def record_cost(record: RolloutRecord) -> float:
    """A rollout's USD: the agent's (reported or estimated) and its judge's."""
    return record.spent_usd


def spent(run: RunDir) -> Spent:
    """Rollouts, tokens (agents, judges and proposers) and USD recorded in the run directory."""
    records = records_run(run.root)
    tokens = sum(record_tokens(rec) for rec in records) + proposer_tokens(run.steps)
    return Spent(len(records), tokens, sum(record_cost(rec) for rec in records))


def stage_rollouts(run: RunDir) -> dict[str, int]:
    """Rollouts by stage from the journal: ``baseline``, ``rollout`` (train), ``screen``, ``compare``
    (epoch), ``gate`` (run, not reused) and ``test`` (the final held-out comparison). A stage
    re-entered on resume states its total again, so each unit's last record of it counts."""
    last: dict[tuple[str, str], int] = {}
    for event in run.read_journal():
        if isinstance(event, StageDone) and event.rollouts is not None:
            stage = "test" if event.unit == "final" else event.stage
            last[(event.unit, stage)] = event.rollouts
    out: dict[str, int] = {}
    for (_, stage), rollouts in last.items():
        out[stage] = out.get(stage, 0) + rollouts
    return out


def hours_spent(run: RunDir) -> float:
    """Active hours over every session; a session ends at its last journal event."""
    return active_seconds(run.read_journal()) / 3600


@dataclass(frozen=True)
class Budget:
    rollouts: int | None = None
    tokens: int | None = None
    usd: float | None = None
    hours: float | None = None

    def check(self, run: RunDir, need: int, already: int = 0) -> None:
        """Raise BudgetExhausted when the next unit cannot be paid.

        ``need`` is the most the unit may use; ``already`` the rollouts it recorded
        before an interruption (they are paid for: a resumed run stops where an
        uninterrupted one would, with the same message).
        """
        used = spent(run)
        before = used.rollouts - already
        if self.rollouts is not None and before + need > self.rollouts:
            raise BudgetExhausted(
                f"rollout budget: {before} spent of {self.rollouts} before this unit, which may need {need}"
            )
        if self.tokens is not None and used.tokens >= self.tokens:
            raise BudgetExhausted(f"token budget: {used.tokens} spent of {self.tokens}")
        if self.usd is not None and used.cost_usd >= self.usd:
            raise BudgetExhausted(f"USD budget: {used.cost_usd:.2f} spent of {self.usd:.2f}")
        if self.hours is not None:
            hours = hours_spent(run)
            if hours >= self.hours:
                raise BudgetExhausted(f"time budget: {hours:.2f} h spent of {self.hours:.2f} h")
