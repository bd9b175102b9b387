"""The proposer's answers on disk: a step's asks/ask_NN.json (``AskFile``) and reflections.json
(``ReflectionsFile``, with each proposal's screen and fate and the selection that built the step's
candidate), and an epoch's slow_update.json (``SlowUpdateFile``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from skilltune.proposal import DroppedEdit, Edit, ProposerCall
from skilltune.runfiles.base import Migration, RunFile


def calls_without_cost(raw: dict[str, Any]) -> dict[str, Any]:
    # Proposer calls before schema 4 had no cost or notes: unknown, none.
    calls = [call | {"cost_usd": None, "notes": []} for call in raw.get("calls") or []]
    return raw | {"calls": calls}


def call_tokens(calls: list[ProposerCall]) -> int:
    """The tokens of a proposer's calls: what budgets and the report count for them."""
    return sum((call.tokens_in or 0) + (call.tokens_out or 0) for call in calls)


class AskFile(RunFile):
    """asks/ask_NN.json (a re-ask: ask_NN_r1.json): one of a step's asks (``--proposals``) and the
    proposer's answer, written as soon as it returns, so a resumed step asks no call twice.
    ``edits`` are the answer's edits after vet; ``dropped`` those vet took out, with why."""

    index: int
    kind: Literal["focus", "sample"]
    label: str
    focus_key: str | None = None
    attempt: int = 0  # 0: the ask; 1: asked again, told the edits already spent
    temperature: float | None = None
    edits: list[Edit] = Field(default_factory=list)
    files: dict[str, str] | None = None
    calls: list[ProposerCall] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)
    dropped: list[DroppedEdit] = Field(default_factory=list)

    @property
    def tokens(self) -> int:
        return call_tokens(self.calls)


class ScreenFigures(BaseModel):
    """A candidate on the train screen against the skill it builds on, over the same train tasks and
    replicates: each arm's mean score (the run's metric), the tasks it ``fixed`` (score up) and
    ``broke`` (score down), and the summed per-task difference (``gain``)."""

    tasks: list[str]
    before: float
    after: float
    gain: float
    fixed: list[str] = Field(default_factory=list)
    broke: list[str] = Field(default_factory=list)
    rollouts: int = 0  # the screen rollouts it took (run or found on disk)


ProposalStatus = Literal[
    "kept",  # in the step's candidate
    "screened out",  # fixed no more train tasks than it broke
    "left out",  # leave-one-out: the bundle did as well without it
    "over budget",  # a stronger bundle filled the step's edit budget
    "spent",  # it repeats an edit already tried in the run, or another proposal of the step
    "no rule",  # the answer held no usable edit
    "not applied",  # its edits do not apply to the skill, or the candidate fails lint
]


class ProposalRecord(BaseModel):
    """One proposal of a step with several asks: what was asked, the edits, its screen and its fate."""

    index: int  # the ask's index (from 1)
    rule: int = 0  # the rule's place in the ask's answer (from 0): each rule is screened on its own
    kind: Literal["focus", "sample"]
    label: str  # what the ask was about
    attempts: int = 1  # 2 when it was asked again (its first answer was spent)
    edits: list[Edit] = Field(default_factory=list)
    candidate: str | None = None  # the candidate it makes on its own (the base plus its edits)
    screen: ScreenFigures | None = None
    status: ProposalStatus
    reason: str = ""


class LeaveOneOut(BaseModel):
    """One step of the backward elimination: the candidate with and without ``edit`` on the same tasks,
    over all of them and over the tasks its proposal fixed on its own screen (``fixed``)."""

    edit: str  # compact form
    proposal: int  # the ask
    rule: int = 0
    with_edit: float
    without: float
    fixed: list[str] = Field(default_factory=list)
    with_on_fixed: float | None = None
    without_on_fixed: float | None = None
    dropped: bool


class Selection(BaseModel):
    """How a step with several proposals built its candidate from their screens (``rule``)."""

    rule: str
    kept: list[int] = Field(default_factory=list)  # the asks with a rule in the candidate
    screen: ScreenFigures | None = None  # the candidate on the union of its proposals' screen tasks
    leave_one_out: list[LeaveOneOut] = Field(default_factory=list)


class ReflectionsFile(RunFile):
    """reflections.json: the proposer's answer (edits in patch mode, whole files in rewrite mode);
    ``dropped``: the edits taken out before the merge, with why (schema 7: an edit citing no
    trajectory of its step's evidence; a file of schema 6 or older dropped none).

    A step with several asks (``--proposals`` above 1, schema 10) lists each one's proposal with
    its screen and fate (``proposals``) and the selection that built the candidate; ``edits`` are
    then the candidate's own edits and ``calls`` every call of every ask."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {3: calls_without_cost}
    OMIT_WHEN_EMPTY = ("proposals", "selection")

    edits: list[Edit] = Field(default_factory=list)
    files: dict[str, str] | None = None
    calls: list[ProposerCall] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)
    dropped: list[DroppedEdit] = Field(default_factory=list)
    proposals: list[ProposalRecord] = Field(default_factory=list)
    selection: Selection | None = None

    @property
    def tokens(self) -> int:
        return call_tokens(self.calls)


class SlowUpdateFile(RunFile):
    """slow_update.json: the epoch's longitudinal guidance for the skill's slow-update block."""

    MIGRATIONS: ClassVar[dict[int, Migration]] = {3: calls_without_cost}

    guidance: str
    calls: list[ProposerCall] = Field(default_factory=list)

    @property
    def tokens(self) -> int:
        return call_tokens(self.calls)
