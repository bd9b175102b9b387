"""The carry policy: what a step builds on, and where its candidate goes after the train screen.

``--carry`` is one policy with typed outcomes, used by every step (one ask or several):

- ``off``: a step builds on the incumbent and its candidate goes to the gate.
- ``run`` (the default): a candidate that beat the skill it builds on over the train screen is not
  gated yet (``CarryOn``: verdict ``carried``); the next step builds on it and adds its own edits,
  a step that adds nothing carries it on as it was, and one gate decides them together: at the
  run's last step, before a step of the other component, or at the last step the rollout budget
  can pay for. The gate is where a run's rollouts go (it decides on tasks, at a level the run's
  alpha shares out): one decision at the end, on all the evidence, kept 1.95 times as much held-out
  gain per training rollout as one at each epoch's end in the simulated runs, and 2.61 times
  skill-trainer's with issue 31's step (benchmarks/proposals.py).
- ``screen``: the same, gated at an epoch's last step too (before the slow update), and alone by a
  step that has nothing of its own (the default of issue 20).
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

CarryMode = Literal["off", "screen", "run", "gate"]


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
        final: bool = False,
    ) -> Route:
        """Where a step's candidate goes after the screen. ``own``: the step's candidate that passed the
        screen (None: none did, ``why_not`` says why: ``screen`` or ``empty``); ``figures``: its screen
        against the skill it builds on; ``carried``: the carry this step built on; ``final``: the run
        cannot pay for another step after this one (``run`` gates what it carries now)."""
        n = draft.step
        same = config.component_at(n + 1) == config.component_at(n)  # else the next gate is the other's
        if self.mode == "run":
            last = final or n == config.total_steps or not same
        else:  # screen: gated before an epoch update
            last = n == config.total_steps or n % config.epoch_steps == 0 or not same
        if own is not None:
            ahead = figures is not None and figures.after > figures.before
            if self.mode in ("screen", "run") and not last and ahead and figures is not None:
                return CarryOn(
                    own, draft, f"{CARRIED} on ungated: train {figures.after:.3f} > {figures.before:.3f}"
                )
            return Gate(own, draft)
        decision, reason = why_not or ("empty", "")
        if carried is not None and carried.pending and self.mode == "run" and not last:
            # a step that adds nothing leaves the carried candidate as it was, for a later step to build on
            alone = replace(
                draft,
                edits=draft.edits[: draft.carried_edits],
                edit_texts=draft.edit_texts[: draft.carried_edits],
            )
            why = f" ({reason.removeprefix('screen: ')})" if reason else ""
            said = f"{CARRIED} on: this step adds nothing{why}; step {carried.record.index}'s candidate as it was"
            return CarryOn(carried.candidate, alone, said)
        if carried is not None and carried.pending:  # the carried candidate is gated now, as it was
            said = f"step {carried.record.index}'s carried candidate was gated as it was: "
            if reason:  # why the step's own proposals gave no candidate
                why = (
                    f"the screen kept none: {reason.removeprefix('screen: ')}"
                    if reason.startswith("screen: ")
                    else reason
                )
                said = f"this step added nothing ({why}), so {said}"
            alone = replace(
                draft,
                edits=draft.edits[: draft.carried_edits],
                edit_texts=draft.edit_texts[: draft.carried_edits],
                note=said,
            )
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
