"""What proposers see and say: trajectories, evidence packets, edits."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltune.textfmt import one_line

EditOp = Literal["append", "insert_after", "replace", "delete", "description"]
Component = Literal["body", "description"]  # what one step's proposer rewrites


class Trajectory(BaseModel):
    """One train rollout as the analyst sees it. Train evidence only: the scorer's ``feedback``
    (as the suite's policy allows) and, for receipt modes, the score's checks."""

    id: str  # "<task id>#r<replicate>"; several agents: "<label>/<task id>#r<replicate>"
    task_id: str
    agent: str | None = None  # the label of the agent that ran it (a run with several agents)
    prompt: str
    output: str
    hard: int
    soft: float
    status: str
    diff: str = ""
    mode: str = ""  # the task's scoring mode
    feedback: str = ""  # the scorer's feedback on this rollout (score.json's): train evidence too
    checks: list[str] = Field(default_factory=list)  # a rubric's or judge's checks: receipts, not answers
    # What went wrong, as keys the step groups failures by (propose/groups.py): ``answer:<plain
    # answer>``, ``missing:<item>``, ``symptom:<class>``, ... (empty for a passing trajectory).
    failure_keys: list[str] = Field(default_factory=list)
    # The plain answer an exact task expected, as the suite's feedback policy lets the analyst see it.
    expected: str | None = None

    @property
    def failed(self) -> bool:
        return self.hard == 0


class Edit(BaseModel):
    """One anchored patch operation on one skill file.

    ``append`` adds ``text`` at the end of the editable body; ``insert_after`` puts
    ``text`` on new lines after the line holding ``anchor``; ``replace`` swaps
    ``anchor`` for ``text``; ``delete`` removes ``anchor``. ``anchor`` must occur
    exactly once (a unique near match is accepted and recorded in ``matched``).
    ``description`` replaces the front matter's ``description`` with ``text`` (no anchor): the
    one edit that touches the front matter, and one edit however much of it changes.
    ``support`` names the trajectories behind the edit; ``rank`` is the proposer's
    own order (0 = strongest).
    """

    model_config = ConfigDict(extra="ignore")

    op: EditOp
    file: str = "SKILL.md"
    anchor: str | None = None
    text: str = ""
    rationale: str = ""
    support: list[str] = Field(default_factory=list)
    rank: int = 0
    kind: Literal["failure", "success"] = "failure"
    matched: str | None = None

    def compact(self) -> str:
        """``op@anchor: text`` — how rejected edits are shown to later proposer prompts."""
        anchor = f"@{one_line(self.anchor, 60)}" if self.anchor else ""
        body = f": {one_line(self.text, 160)}" if self.text else ""
        return f"{self.op}{anchor}{body}"


class TriggerCase(BaseModel):
    """One train rollout of a trigger task as the description's proposer sees it: the request,
    whether the skill should have been loaded, and whether it was."""

    id: str  # "<task id>#r<replicate>", as the trajectory's
    task_id: str
    prompt: str
    should_trigger: bool
    loaded: bool

    @property
    def right(self) -> bool:
        return self.should_trigger == self.loaded


class DroppedEdit(BaseModel):
    """An edit taken out of a proposal before merging, and why (kept for audit)."""

    edit: Edit
    reason: str


class RejectedEdit(BaseModel):
    step: int
    edit: str  # compact form, as shown to proposers
    text: str = ""  # the edit's full text, so a proposer can avoid proposing it again
    evidence: str  # the gate's evidence, one line


class Focus(BaseModel):
    """One failure group of a step's batch, the subject of a focused ask: ``key`` as the trajectories'
    ``failure_keys`` hold it, ``label`` in words ("expected answer 'account'"), the ids of its failed
    trajectories and what the agent gave instead (short, most frequent first)."""

    key: str
    label: str
    trajectories: list[str]
    gave: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)  # "expected 'x'; the agent gave: '...'"


class EvidencePacket(BaseModel):
    """Everything a proposer may use for one step. Built from train rollouts only.

    A step asks the proposer several times (``--proposals``): a *focused* ask holds one failure
    group (``focus``) with only that group's failed trajectories and a few passing ones; a *sample*
    holds the whole batch and asks again at ``temperature``. ``summary`` opens every prompt: the
    batch's failures by group. ``spent`` lists edits already tried in the run (a re-ask is told them
    plainly). ``ask`` numbers the step's asks from 1 (0: the step asks once, as before --proposals).
    """

    step: int
    mode: Literal["patch", "rewrite"]
    skill_files: dict[str, str]
    skill_main: str
    failures: list[Trajectory]
    successes: list[Trajectory]
    rejected: list[RejectedEdit] = Field(default_factory=list)
    memory: str = ""
    max_edits: int = 4
    seed: int = 0
    failure_classes: str = ""  # the suite's failure_classes.md: symptom classes -> mechanisms
    component: Component = "body"  # the body (anchored edits) or the front matter's description
    triggers: list[TriggerCase] = Field(default_factory=list)  # the batch's trigger rollouts (train)
    summary: str = ""  # the batch's failures by group, said before the trajectories
    focus: Focus | None = None  # a focused ask: the failure group it is about
    temperature: float | None = None  # a sample's temperature (None: the proposer's own)
    spent: list[str] = Field(default_factory=list)  # edit texts already tried in this run (a re-ask)
    ask: int = 0

    @property
    def missed(self) -> list[TriggerCase]:
        """Requests that should have loaded the skill and did not."""
        return [t for t in self.triggers if t.should_trigger and not t.loaded]

    @property
    def false_triggers(self) -> list[TriggerCase]:
        """Requests that loaded the skill and should not have."""
        return [t for t in self.triggers if t.loaded and not t.should_trigger]


class ProposerCall(BaseModel):
    """One model call a proposer made (kept for audit: prompts must hold train evidence only)."""

    role: str
    model: str
    prompt: str
    response: str
    seconds: float = 0.0
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # from the price table (model calls through skilltune.modelcalls)
    notes: list[str] = Field(default_factory=list)  # warnings of the model-call layer (a field ignored...)


class Proposal(BaseModel):
    """A proposer's answer: edits (patch mode) or whole files (rewrite mode)."""

    edits: list[Edit] = Field(default_factory=list)
    files: dict[str, str] | None = None
    calls: list[ProposerCall] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)
    dropped: list[DroppedEdit] = Field(default_factory=list)
