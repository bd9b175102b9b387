"""The carry policy: what a step builds on, and where its candidate goes after the train screen.

``--carry`` is one policy with typed outcomes, used by every step (one ask or several):

- ``off``: a step builds on the incumbent and its candidate goes to the gate.
- ``screen`` (the default): a candidate that beat the skill it builds on over the train screen is
  not gated yet (``CarryOn``: verdict ``carried``); the next step builds on it and adds its own
  edits, and a later gate decides them together: at an epoch's last step, the run's last step, a
  step of the other component, or a step that has nothing of its own (``Gate`` of the carried
  candidate alone).
- ``gate``: also a candidate the gate did not keep for lack of evidence (rounds run, a positive val
  gain, no harm veto, no secondary regression) is built on by the next step.

A keep, or any other gate decision, ends a carry; a step discarded before its gate (lint, screen,
repeat, nothing to try) leaves it as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from skilltune.rundir import RunDir
from skilltune.runfiles import CARRIED, ScreenFigures, TrainConfig, UnitDecision, UnitRecord, Verdict
from skilltune.skill import Candidate
from skilltune.training.gating import Draft
from skilltune.training.units import incumbent

CarryMode = Literal["off", "screen", "gate"]


@dataclass(frozen=True)
class Carried:
    """The candidate of an earlier step that this step builds on instead of the incumbent."""

    record: UnitRecord
    candidate: Candidate

    @property
    def pending(self) -> bool:
        """Not gated yet (carried on ungated): gated on its own when this step brings nothing."""
        return self.record.verdict == CARRIED


@dataclass(frozen=True)
class Gate:
    """Gate ``candidate`` on val now."""

    candidate: Candidate
    draft: Draft


@dataclass(frozen=True)
class CarryOn:
    """Close the step ungated (verdict ``carried``): the next step builds on ``candidate``."""

    candidate: Candidate
    draft: Draft
    reason: str


@dataclass(frozen=True)
class Discard:
    """Close the step without a gate: ``decision`` (screen, empty) says why."""

    candidate: str  # the hash recorded (the step's own candidate, else its parent)
    draft: Draft
    decision: UnitDecision
    reason: str


Route = Gate | CarryOn | Discard


@dataclass(frozen=True)
class CarryPolicy:
    mode: CarryMode

    def carried(self, run: RunDir, done: list[UnitRecord]) -> UnitRecord | None:
        """The unit whose candidate the next step builds on instead of the incumbent, or None."""
        if self.mode == "off":
            return None
        out: UnitRecord | None = None
        for record in done:
            if record.verdict == "keep":
                out = None
            elif record.kind != "step":
                continue
            elif record.verdict == CARRIED:
                out = record
            elif record.alpha is not None or record.decision in ("accept", "reject"):
                out = record if self.mode == "gate" and carryable(run, record) else None
        return out

    def base(self, run: RunDir, done: list[UnitRecord], seed: Candidate) -> tuple[Candidate, Carried | None]:
        """The skill the next step builds on (the carried candidate, else the incumbent) and the carry."""
        record = self.carried(run, done)
        if record is None:
            return incumbent(run, done, seed), None
        candidate = Candidate.load(run.unit_dir(record.kind, record.index) / "candidate", seed)
        return candidate, Carried(record, candidate)

    def route(
        self,
        config: TrainConfig,
        draft: Draft,
        own: Candidate | None,
        figures: ScreenFigures | None,
        carried: Carried | None,
        why_not: tuple[UnitDecision, str] | None,
    ) -> Route:
        """Where a step's candidate goes after the screen. ``own``: the step's candidate that passed the
        screen (None: none did, ``why_not`` says why: ``screen`` or ``empty``); ``figures``: its screen
        against the skill it builds on; ``carried``: the carry this step built on."""
        n = draft.step
        if own is not None:
            last = n == config.total_steps or n % config.epoch_steps == 0  # gated before an epoch update
            same = config.component_at(n + 1) == config.component_at(n)  # else the next gate is the other's
            if (
                self.mode == "screen"
                and not last
                and same
                and figures is not None
                and figures.after > figures.before
            ):
                return CarryOn(
                    own, draft, f"{CARRIED} on ungated: train {figures.after:.3f} > {figures.before:.3f}"
                )
            return Gate(own, draft)
        decision, reason = why_not or ("empty", "")
        if carried is not None and carried.pending:  # the carried candidate is gated now, as it was
            own_note = f"the step's own candidate {reason.removeprefix('screen: ')}; " if reason else ""
            alone = replace(
                draft, edits=draft.edits[: draft.carried_edits], edit_texts=draft.edit_texts[: draft.carried_edits],
                note=f"{own_note}the candidate carried from step {carried.record.index} gated: ",
            )  # fmt: skip
            return Gate(carried.candidate, alone)
        return Discard(draft.parent, draft, decision, reason)


def carryable(run: RunDir, record: UnitRecord) -> bool:
    """A gate reject for lack of evidence: rounds were run, the val gain is positive, and neither the
    harm veto nor the secondary suite's regression test spoke against it."""
    path = run.unit_dir(record.kind, record.index) / "gate.json"
    if record.decision != "reject" or not path.is_file():
        return False
    verdict = Verdict.read(path)
    if not verdict.rounds or verdict.val_candidate is None or verdict.val_incumbent is None:
        return False
    if verdict.harm is not None and (verdict.harm.harmed or verdict.harm.suspects):
        return False
    if verdict.secondary is not None and verdict.secondary.regression:
        return False
    return verdict.val_candidate > verdict.val_incumbent
