"""A unit's files: slow_update.json, gate.json, and its record step.json / epoch.json (the proposer's answers:
runfiles/proposals.py)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_serializer, field_validator

from skilltune.metric import Metric
from skilltune.runfiles.base import Migration, OldRunFileError, RunFile
from skilltune.runfiles.proposals import ReflectionsFile, SlowUpdateFile

Decision = Literal["accept", "reject", "contaminated"]


class Pair(BaseModel):
    """One task in one gate round: the candidate's and the incumbent's replicate and score
    (None: not scored). The incumbent's replicate may come from an earlier decision."""

    task: str
    candidate_replicate: int
    incumbent_replicate: int
    candidate: float | None
    incumbent: float | None


class Figures(BaseModel):
    """A gate round's figures as the report shows them (None: the gate has no such figure).
    ``gain``: the mean paired gain, candidate - incumbent; ``se`` its standard error; ``t`` the
    test statistic; ``bound`` the t bound an accept must pass; ``upper`` the futility upper bound
    on the gain; ``p``, ``crossed``, ``budget``: the sign-flip test's look."""

    gain: float | None = None
    se: float | None = None
    t: float | None = None
    bound: float | None = None
    upper: float | None = None
    p: float | None = None
    crossed: int | None = None
    budget: int | None = None


class StrictStatistic(BaseModel):
    """The strict gate's one pass: the mean paired difference over the tasks both arms scored."""

    model_config = ConfigDict(extra="forbid")

    mean_diff: float

    def figures(self) -> Figures:
        return Figures(gain=self.mean_diff)


class PairedZStatistic(BaseModel):
    """The paired-z gate's one pass: the mean paired difference, its standard error and their
    ratio (None when the differences do not vary)."""

    model_config = ConfigDict(extra="forbid")

    mean_diff: float
    se: float
    z: float | None

    def figures(self) -> Figures:
        return Figures(gain=self.mean_diff, se=self.se, t=self.z)


class SignFlipStatistic(BaseModel):
    """The sequential gate's look (``stats.SequentialTest.look``): ``tasks`` scored by both arms,
    ``nonzero`` of them with a gain, their mean and sd, the look's p-value, how many reference
    sign vectors have ``crossed`` out of the look's ``budget`` (of ``reference``), and the
    futility upper bound."""

    model_config = ConfigDict(extra="forbid")

    alpha: float
    tasks: int
    nonzero: int
    mean_gain: float
    sd: float | None
    p: float
    crossed: int
    budget: int
    reference: int
    upper: float | None

    def figures(self) -> Figures:
        se = None if self.sd is None or self.tasks < 2 else self.sd / self.tasks**0.5
        return Figures(
            gain=self.mean_gain, se=se, upper=self.upper, p=self.p, crossed=self.crossed, budget=self.budget
        )


class ReplicateTStatistic(BaseModel):
    """The per-(task, replicate) t test's look (run schema <= 5; read, never written): the gain's
    t statistic against its bound. Its files varied over versions, so every figure but the bound
    may be missing, and keys it no longer names are kept as they were."""

    model_config = ConfigDict(extra="allow")

    alpha: float | None = None
    n: int | None = None
    mean_gain: float | None = None
    se: float | None = None
    t: float | None = None
    bound_t: float
    upper: float | None = None

    def figures(self) -> Figures:
        return Figures(gain=self.mean_gain, se=self.se, t=self.t, bound=self.bound_t, upper=self.upper)


def _statistic_kind(raw: Any) -> str | None:
    # gate.json does not name the statistic's kind: each kind has a key no other kind holds.
    if isinstance(raw, BaseModel):
        return _KINDS.get(type(raw))
    keys = set(raw) if isinstance(raw, dict) else set()
    for key, kind in (
        ("bound_t", "replicate-t"),
        ("crossed", "signflip"),
        ("z", "paired-z"),
        ("mean_diff", "strict"),
    ):
        if key in keys:
            return kind
    return None


_KINDS: dict[type[BaseModel], str] = {
    StrictStatistic: "strict",
    PairedZStatistic: "paired-z",
    SignFlipStatistic: "signflip",
    ReplicateTStatistic: "replicate-t",
}

Statistic = Annotated[
    Annotated[StrictStatistic, Tag("strict")]
    | Annotated[PairedZStatistic, Tag("paired-z")]
    | Annotated[SignFlipStatistic, Tag("signflip")]
    | Annotated[ReplicateTStatistic, Tag("replicate-t")],
    Discriminator(_statistic_kind),
]


class RoundCounts(BaseModel):
    """A gate round in brief: its index and replicates, each arm's mean score on the paired tasks,
    how many pairs and how many rollouts it ran."""

    index: int
    replicates: int
    candidate: float | None
    incumbent: float | None
    n_pairs: int
    rollouts: int


class Round(RoundCounts):
    """A gate round. ``rollouts`` were run for it; ``reused`` incumbent rollouts came from
    earlier decisions of the same incumbent (never the decision that accepted it)."""

    reused: int = 0
    statistic: Statistic | None = None  # None: the round decided nothing (contaminated, no pairs)
    pairs: list[Pair] = Field(default_factory=list)

    @field_validator("statistic", mode="before")
    @classmethod
    def _nothing_recorded(cls, value: Any) -> Any:
        return None if value == {} else value

    @field_serializer("statistic")
    def _as_written(self, value: BaseModel | None) -> dict[str, Any]:
        # gate.json keeps its shape: the keys the statistic was given, {} when there is none
        return {} if value is None else value.model_dump(mode="json", exclude_unset=True)


def _replicate_t_verdict(raw: dict[str, Any]) -> dict[str, Any]:
    # Verdicts of run schema <= 5 came from the per-(task, replicate) t test, with fresh
    # incumbent rollouts every round; they stay what they were (a memo is never re-decided).
    sequential = any("bound_t" in (r.get("statistic") or {}) for r in raw.get("rounds", []))
    return raw | {"test": "replicate-t" if sequential else None}


class SecondaryCheck(BaseModel):
    """The one-sided regression test on the tasks that can only veto: skill-trainer's secondary
    suite, or the other component's tasks of the joint gate (``body tasks``, ``trigger tasks``)."""

    suite: str
    alpha: float
    n_tasks: int
    mean_diff: float | None  # candidate - incumbent, over tasks
    p_value: float | None  # one-sided: the candidate is worse
    regression: bool


class AgentEvidence(BaseModel):
    """One agent's part of a gate decision in a run with several agents: its val means for both arms
    (over its own (agent, task) units) and the one-sided paired regression test of its tasks
    (``training/secondary.py``'s, at the suite's ``secondary_alpha``). ``hurt``: the test found the
    candidate significantly worse for this agent, which vetoes a keep under ``--agents-gate no-worse``."""

    label: str
    val_candidate: float | None
    val_incumbent: float | None
    n_tasks: int
    mean_diff: float | None  # candidate - incumbent, over this agent's tasks
    p_value: float | None  # one-sided: the candidate is worse for this agent
    alpha: float
    hurt: bool

    def cell(self) -> str:
        """Its results.tsv form: ``label inc -> cand`` (the val score from the incumbent to the
        candidate) with the regression's p when it hurt."""

        def num(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        hurt = f" HURT p={self.p_value:.3g}" if self.hurt and self.p_value is not None else ""
        return f"{self.label} {num(self.val_incumbent)} -> {num(self.val_candidate)}{hurt}"


class HarmCheck(BaseModel):
    """The harm veto's view at the look that decided (stats/harm.py): val tasks whose means fell
    by more than ``tolerance`` of the incumbent's score and by more than ``floor`` (``suspects``,
    task -> mean difference), those hurt with confidence (``harmed``, task -> the upper bound of
    its difference), and the replicate noise of the differences pooled over the noisy tasks
    (None: one round, no estimate). ``floor`` None: a gate.json written before the tolerance was
    relative (a suspect's difference was at most ``-tolerance``, with the noise pooled over every
    task)."""

    tolerance: float
    confidence: float
    suspects: dict[str, float]
    harmed: dict[str, float]
    noise: float | None
    floor: float | None = None


class Verdict(RunFile):
    """gate.json: a gate's decision with its rounds. ``alpha`` is the decision's level under the
    run's error-control policy (set for the sequential gate); ``secondary`` the regression test on
    the secondary suite (which can only turn an accept into a reject); ``test`` names the statistic
    (``signflip``: the task-level sequential sign-flip test; ``replicate-t``: the per-replicate t
    test of run schema <= 5; None: a one-pass gate)."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {5: _replicate_t_verdict}
    OMIT_WHEN_EMPTY = ("agents", "agents_gate")

    decision: Decision
    reason: str
    metric: Metric
    val_candidate: float | None
    val_incumbent: float | None
    rounds: list[Round]
    rollouts: int
    alpha: float | None = None
    secondary: SecondaryCheck | None = None
    harm: HarmCheck | None = None  # the sequential gate's harm veto, when its test crossed
    test: str | None = None
    reused: int = 0  # incumbent rollouts taken from earlier decisions (not run here)
    prefetched: int = 0  # incumbent rollouts run ahead for rounds this decision did not reach
    gated_on: str | None = None  # the joint gate's scope (training/secondary.py); None: every gated task
    carried: int | None = None  # --carry: the step whose candidate's edits this candidate carried
    carried_edits: list[str] = Field(default_factory=list)  # those edits
    agents: list[AgentEvidence] = Field(default_factory=list)  # several agents: each one's evidence
    agents_gate: str | None = None  # several agents: what a keep meant (mean, no-worse)

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


CARRIED: Final = "carried"  # the verdict of a step carried on ungated

UnitVerdict = Literal["keep", "discard", "carried"]
# What decided a unit: the gate (accept, reject), or what closed it before a gate: lint, the train
# screen, a repeat of a rejected candidate, nothing to try (empty), an epoch with nothing kept
# (skip), or the carry policy (carry: no gate yet, the next step builds on it).
UnitDecision = Literal["accept", "reject", "lint", "screen", "repeat", "empty", "skip", "carry"]


def _carried_verdict(raw: dict[str, Any]) -> dict[str, Any]:
    # Schema 9 wrote a step carried on ungated as verdict "discard", decision "defer"; it is "carried".
    if raw.get("decision") == "defer":
        return raw | {"verdict": CARRIED, "decision": "carry"}
    return raw


def replaced_by(edits: list[str]) -> list[int | None]:
    """For each edit (compact form, in the order applied), the position of the later edit that
    replaced it, else None: a ``description`` edit sets the whole description, so a later one
    replaces it (a step carried along a chain adds its description after the carried ones)."""
    out: list[int | None] = [None] * len(edits)
    last: int | None = None
    for position in reversed(range(len(edits))):
        if edits[position].startswith("description:"):
            out[position] = last
            last = position
    return out


def held_edits(edits: list[str], shown: int = 3) -> str:
    """The edits a candidate holds, in one line (its commit message, its results.tsv row): the
    first ``shown`` of them and how many more there are; a description a later edit of the list
    replaced is not in the candidate, so it is left out and only counted."""
    held = [edit for edit, later in zip(edits, replaced_by(edits), strict=True) if later is None]
    line = "; ".join(held[:shown])
    more = len(held) - shown
    if more > 0:
        line += f"; and {more} more edit{'s' if more > 1 else ''}"
    replaced = len(edits) - len(held)
    if replaced:
        line += f" (replacing {replaced} earlier description{'s' if replaced > 1 else ''} of the chain)"
    return line


class UnitRecord(RunFile):
    """step.json / epoch.json: a finished unit of a training run (results.tsv is rebuilt from these).

    ``verdict`` is keep, discard or carried (a step closed ungated so the next step builds on its
    candidate: neither kept nor discarded yet, a later gate decides its edits); ``decision`` is what
    decided it; ``edits`` are compact ``op@anchor: text`` forms.
    """

    MIGRATIONS: ClassVar[dict[int, Migration]] = {1: _no_crash_verdict, 9: _carried_verdict}
    OMIT_WHEN_EMPTY = ("agents",)

    kind: Literal["step", "epoch"]
    index: int
    step: int
    epoch: int
    candidate: str
    parent: str
    verdict: UnitVerdict
    decision: UnitDecision
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
    carried: int | None = None  # --carry: the step whose candidate this one was built on
    carried_edits: int = 0  # how many of ``edits`` (the first ones) were carried from it
    agents: list[AgentEvidence] = Field(default_factory=list)  # several agents: the gate's per-agent evidence

    @property
    def carried_on(self) -> bool:
        """Closed ungated for the next step to build on (``--carry screen``)."""
        return self.verdict == CARRIED

    def row(self) -> dict[str, Any]:
        """The unit's results.tsv row (a carried step's description ends with why it was carried,
        as a discard's ends with why it was discarded)."""
        description = held_edits(self.edits) if self.edits else self.reason
        if self.carried is not None:
            description = f"[{self.carried_edits} edit(s) carried from step {self.carried}] {description}"
        if self.verdict != "keep" and self.edits:  # why it was discarded, or carried on
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
        } | ({"agents": "; ".join(a.cell() for a in self.agents)} if self.agents else {})


# Files of a unit's folder (steps/<unit>/), by name.
UNIT_FILES: dict[str, type[RunFile]] = {
    "step.json": UnitRecord,
    "epoch.json": UnitRecord,
    "gate.json": Verdict,
    "reflections.json": ReflectionsFile,
    "slow_update.json": SlowUpdateFile,
}
