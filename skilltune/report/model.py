"""The summary of a run directory: what report.html, ``view`` and ``status`` show, as plain models.

Every figure here is derived from the run's files (``summarize`` in ``read.py``); nothing
is measured again. Scores are on the run's gate metric (hard, soft or mixed).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from skilltune.metric import Metric
from skilltune.report.proposals import ProposalCounts, ProposalRow, total
from skilltune.report.trigger import QueryTrigger
from skilltune.rundir import TerminalState
from skilltune.runfiles import (
    CARRIED,
    AgentEvidence,
    Figures,
    Harm,
    RoundCounts,
    Selection,
    Transfer,
    replaced_by,
)
from skilltune.score.trigger import TriggerStats

RunState = TerminalState | Literal["running", "interrupted"]


class Interval(BaseModel):
    """The gate's interval on the gain (candidate - incumbent) at its last round.

    ``sequential``: low = gain - bound_t * se (the gate accepts when it is above 0), high = the
    futility upper bound (it stops for futility when that is below ``min_effect``); the task-level
    sign-flip test (run schema 6) accepts on its crossings, so low is None;
    ``paired-z``: gain -/+ 1.645 se; ``strict`` records no spread (low = high = gain).
    """

    gain: float
    low: float | None = None
    high: float | None = None


class GateRound(Figures, RoundCounts):
    """A gate round as the report shows it: its counts, then its figures (the bases' order is the
    fields' reversed: RoundCounts' come first)."""


class Citation(BaseModel):
    """A train trajectory an edit cites: the task as the agent was given it (clipped), the scorer's
    feedback, a clipped excerpt of the agent's output, and its conversation's path relative to the
    run directory (None when the rollout is not in the run)."""

    id: str
    task_id: str
    status: str = ""
    score: float | None = None
    prompt: str = ""
    feedback: str = ""
    excerpt: str = ""
    conversation: str | None = None


class EditView(BaseModel):
    op: str
    file: str
    anchor: str | None
    text: str
    rationale: str
    kind: str
    kept: bool
    matched: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    times: int = 1  # how often the step's answers proposed it (equal edits are one, as the merge made them)


class StageCost(BaseModel):
    """One stage of one unit (journal.jsonl ``stage`` events; USD from the rollouts of its phase)."""

    unit: str
    stage: str
    seconds: float = 0.0
    rollouts: int = 0
    tokens: int = 0
    usd: float = 0.0
    calls: int = 0


class UnitView(BaseModel):
    """A step or epoch update: its verdict, evidence, edits and cost. ``verdict`` is ``running`` for
    the unit a live run is in, ``unfinished`` for one a run ended in (stopped, out of budget,
    blocked, killed) before its record; the rollouts, tokens and USD of either are those of the
    records in its folder."""

    name: str
    kind: Literal["step", "epoch"]
    index: int
    epoch: int
    verdict: Literal["keep", "discard", "carried", "running", "unfinished"]
    decision: str = ""
    reason: str = ""
    candidate: str = ""
    parent: str = ""
    val_candidate: float | None = None
    val_incumbent: float | None = None
    interval: Interval | None = None
    alpha: float | None = None
    rounds: list[GateRound] = Field(default_factory=list)
    # the incumbent's replicate indices the gate paired (gate.json): an incumbent's rollouts are shared by
    # the decisions against it, so most of them lie in an earlier unit's folder (or the seed's baseline)
    incumbent_replicates: list[int] = Field(default_factory=list)
    rollouts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    edits: list[str] = Field(default_factory=list)
    carried: int | None = None  # --carry: the step whose candidate this unit's was built on
    carried_edits: int = 0  # how many of ``edits`` came from it
    # the step that proposed each of ``edits`` (this unit's index for its own, an earlier step's for one
    # carried along a chain of ungated steps); empty for an epoch update or a unit without a record
    origins: list[int] = Field(default_factory=list)
    # several agents (issue 22): each agent's val means, difference and regression test in the gate
    # (step.json's copy of gate.json's), and what a keep meant (gate.json's ``agents_gate``)
    agents: list[AgentEvidence] = Field(default_factory=list)
    agents_gate: str | None = None
    # a step of several asks (reflections.json, run schema 10): its proposal counts (None: one ask)
    proposal_counts: ProposalCounts | None = None
    # detail (report only)
    proposals: list[ProposalRow] = Field(default_factory=list)  # ranked: the screen's order
    selection: Selection | None = None
    proposed: list[EditView] = Field(default_factory=list)
    diff: str = ""
    guidance: str = ""
    notes: list[str] = Field(default_factory=list)  # the proposer's notes, each in words

    @property
    def finished(self) -> bool:
        return self.verdict in ("keep", "discard", CARRIED)

    @property
    def carried_on(self) -> bool:
        """Carried on ungated: neither kept nor discarded, a later gate decides its edits."""
        return self.verdict == CARRIED

    @property
    def edit_origins(self) -> list[tuple[int, str]]:
        """Each edit with the step that proposed it (``origins``; this unit's own index when unknown)."""
        origins = self.origins if len(self.origins) == len(self.edits) else [self.index] * len(self.edits)
        return list(zip(origins, self.edits, strict=True))

    @property
    def edit_lines(self) -> list[tuple[int, str, int | None]]:
        """Each edit with the step that proposed it and, for one a later edit of the list replaced (a
        description carried along a chain, then rewritten), the step whose edit replaced it."""
        origins = self.edit_origins
        return [
            (step, edit, None if later is None else origins[later][0])
            for (step, edit), later in zip(origins, replaced_by(self.edits), strict=True)
        ]

    @property
    def replaced(self) -> int:
        """How many of ``edits`` a later one replaced: they are not in the candidate."""
        return sum(1 for later in replaced_by(self.edits) if later is not None)


class ArmView(BaseModel):
    name: str
    skill: str
    mean: float | None
    low: float | None = None
    high: float | None = None
    n_tasks: int = 0
    n_rollouts: int = 0
    val: float | None = None  # the same skill's val score, when the run measured one
    # load decisions on the split's trigger tasks: each query once (its replicates' majority, from
    # the records), and comparison.json's, one per rollout (shown when the records are not at hand)
    trigger: QueryTrigger | None = None
    trigger_rollouts: TriggerStats | None = None


class PairView(BaseModel):
    a: str
    b: str
    diff: float
    low: float | None
    high: float | None
    p_value: float | None
    verdict: str


class TransferView(BaseModel):
    """A transfer table of the run's skills (``skilltune compare`` with several agents, its --out
    ``RUNDIR-<something>`` beside the run; or, ``own``, the held-out test of a run with several
    agents, ``final/transfer.json`` in the run): the folder's name and the table."""

    folder: str
    table: Transfer | None  # None: the file could not be read (``problem`` says why)
    problem: str = ""
    own: bool = False


class HeldOut(BaseModel):
    """The held-out comparison: the run's comparison.json, or (``source``, a folder beside the run)
    the one the suggested ``skilltune compare`` of the run's seed and best wrote there."""

    split: str
    metric: Metric
    reps: int
    contaminated: bool
    arms: list[ArmView]
    pairs: list[PairView]
    source: str = ""

    def pair(self, a: str, b: str) -> PairView | None:
        return next((p for p in self.pairs if p.a == a and p.b == b), None)


class Heatmap(BaseModel):
    """Val tasks x units: each cell is the mean over replicates of the unit's gate rollouts of the
    candidate (and of the incumbent's rollouts its gate paired them with, wherever they lie); None
    where the unit ran no gate on the task."""

    tasks: list[str]
    units: list[str]
    candidate: list[list[float | None]]
    incumbent: list[list[float | None]]


class Version(BaseModel):
    """A kept version: a commit of skill-repo/ (``label`` is ``seed``, ``step N`` or ``epoch N``)."""

    commit: str
    label: str
    date: str
    subject: str
    best: bool = False


class BudgetLine(BaseModel):
    name: str
    limit: float
    spent: float

    @property
    def left(self) -> float:
        return self.limit - self.spent


class Totals(BaseModel):
    rollouts: int = 0  # run here (records copied from a shared cache are counted in ``cached``)
    cached: int = 0
    tokens: int = 0
    usd: float = 0.0
    usd_estimated: bool = False
    seconds: float = 0.0  # active wall time over every session
    statuses: dict[str, int] = Field(default_factory=dict)


class InfraError(BaseModel):
    where: str
    task_id: str
    status: str
    reason: str


class AuditFinding(BaseModel):
    """One finding of ``skilltune audit`` as the report shows it (see ``read.read_audit``)."""

    check: str
    message: str
    detail: str = ""


class RunSummary(BaseModel):
    root: str
    tag: str
    state: RunState
    reason: str = ""
    suite: str = ""
    agent: str = ""
    agents: list[str] = Field(default_factory=list)  # several agents: their labels (one agent: empty)
    agents_gate: str = ""  # several agents: --agents-gate
    proposer: str = ""
    gate: str = ""
    mode: str = ""
    component: str = "body"  # --component: body, description or both
    metric: Metric = "mixed"
    min_effect: float | None = None
    started: str | None = None
    updated: str | None = None
    planned_steps: int = 0
    planned_units: int = 0
    planned_rollouts: int | None = None
    seed_val: float | None = None
    best_val: float | None = None
    best: str = ""
    units: list[UnitView] = Field(default_factory=list)
    current: str | None = None  # the unit (and stage) a live run is in
    eta_seconds: float | None = None
    held_out: HeldOut | None = None
    held_out_missing: str = ""  # why there is no held-out comparison (read.heldout.missing) ...
    held_out_commands: list[str] = Field(default_factory=list)  # ... and the commands that make one
    transfers: list[TransferView] = Field(default_factory=list)  # RUNDIR-*/transfer.json
    heatmap: Heatmap | None = None
    stages: list[StageCost] = Field(default_factory=list)
    lineage: list[Version] = Field(default_factory=list)
    totals: Totals = Field(default_factory=Totals)
    budgets: list[BudgetLine] = Field(default_factory=list)
    infra_errors: list[InfraError] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    audit: list[AuditFinding] | None = None  # None: no audit.json in the run

    @property
    def live(self) -> bool:
        return self.state == "running"

    @property
    def finished_units(self) -> list[UnitView]:
        return [u for u in self.units if u.finished]

    @property
    def steps_done(self) -> int:
        return sum(1 for u in self.finished_units if u.kind == "step")

    @property
    def kept(self) -> int:
        return sum(1 for u in self.units if u.verdict == "keep")

    @property
    def proposal_counts(self) -> ProposalCounts | None:
        """The proposals of every step over the run (None: no step had several asks)."""
        return total(u.proposal_counts for u in self.units)

    @property
    def gain(self) -> PairView | None:
        """The held-out gain of the best skill over the seed."""
        return self.held_out.pair("S0", "best") if self.held_out else None

    @property
    def hurt(self) -> list[Harm]:
        """The agents the run's held-out test per agent (final/transfer.json) says the best skill
        hurts, when that test measured this best: shown beside every held-out verdict."""
        own = next((t.table for t in self.transfers if t.own and t.table is not None), None)
        if own is None or own.arms.get("best") != self.best:
            return []
        return own.hurt()
