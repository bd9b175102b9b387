"""Settling a unit's candidate, step or epoch alike: lint it, stage it in git, gate it, close the unit.

Closing is a unit's commit point: its rollouts and tokens are counted, git moves (a keep
commits the candidate and moves ``best``; a discard resets the work tree), and only then
is step.json / epoch.json written. gate.json memoises the gate's verdict, so a resumed
unit never decides twice.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from skilltune.propose.edit import lint_edit
from skilltune.runfiles import RolloutRecord, UnitEnd, UnitRecord, Verdict
from skilltune.skill import Candidate
from skilltune.store import write_text
from skilltune.suite import Task
from skilltune.textfmt import fmt
from skilltune.train.budget import proposer_tokens, record_cost, record_tokens, records_run
from skilltune.train.context import RunContext
from skilltune.train.rollouts import RunRollouts, replicate_base
from skilltune.train.secondary import gated_ids, regression_test, veto
from skilltune.train.session import BlockedError
from skilltune.train.units import Unit


@dataclass(frozen=True)
class Draft:
    """What a unit knows of itself before its verdict: where it stands and what it changed."""

    unit: Unit
    step: int
    epoch: int
    parent: str
    metric: str
    edits: list[str] = field(default_factory=list)
    edit_texts: list[str] = field(default_factory=list)

    def record(
        self, candidate: str, verdict: Literal["keep", "discard"], decision: str, reason: str
    ) -> UnitRecord:
        return UnitRecord(
            kind=self.unit.kind, index=self.unit.index, step=self.step, epoch=self.epoch,
            candidate=candidate, parent=self.parent, verdict=verdict, decision=decision, reason=reason,
            metric=self.metric, edits=self.edits, edit_texts=self.edit_texts,
        )  # fmt: skip

    def judged(self, candidate: Candidate, verdict: Verdict) -> UnitRecord:
        record = self.record(
            candidate.hash, "keep" if verdict.accept else "discard", verdict.decision, verdict.reason
        )
        return record.model_copy(
            update={
                "val_candidate": verdict.val_candidate,
                "val_incumbent": verdict.val_incumbent,
                "alpha": verdict.alpha,
            }
        )


class ValSampler:
    """The gate's sampler: round k runs both skills on every val task, with replicate indices
    fresh for the unit and the round (so no round reuses another's rollouts). With a secondary
    suite named (skill-trainer's two-suite rule) the gate gets the primary tasks' records and
    the secondary tasks' are kept for the regression test (``train/secondary.py``)."""

    def __init__(
        self,
        rollouts: RunRollouts,
        folder: Path,
        val: list[Task],
        candidate: Candidate,
        incumbent: Candidate,
        seq: int,
    ) -> None:
        self.rollouts = rollouts
        self.folder = folder
        self.val = val
        self.candidate = candidate
        self.incumbent = incumbent
        self.seq = seq
        self.gated = gated_ids(rollouts.suite, val)
        self.held: list[RolloutRecord] = []  # the secondary suite's records, every round

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        base = replicate_base(self.seq, index * replicates)
        jobs = self.rollouts.jobs(self.val, self.candidate, "gate", base, replicates)
        jobs += self.rollouts.jobs(self.val, self.incumbent, "gate", base, replicates)
        records = [r for r, _ in self.rollouts.run(self.folder, jobs)]
        self.held += [r for r in records if r.task_id not in self.gated]
        gated = [r for r in records if r.task_id in self.gated]
        return (
            [r for r in gated if r.candidate == self.candidate.hash],
            [r for r in gated if r.candidate == self.incumbent.hash],
        )

    def secondary(self, verdict: Verdict, metric: str) -> Verdict:
        """The verdict after the secondary suite's regression test (none named: unchanged)."""
        name = self.rollouts.suite.config.secondary_suite
        if name is None or not self.held:
            return verdict
        check = regression_test(
            name,
            [r for r in self.held if r.candidate == self.candidate.hash],
            [r for r in self.held if r.candidate == self.incumbent.hash],
            metric,
            self.rollouts.suite.config.secondary_alpha,
        )
        return veto(verdict, check)


def settle(
    ctx: RunContext,
    draft: Draft,
    candidate: Candidate,
    incumbent: Candidate,
    done: list[UnitRecord],
    own_block: str | None = None,
    screen: Callable[[], str | None] | None = None,
) -> UnitRecord:
    """Lint -> stage -> [screen] -> gate -> close. ``own_block``: the PROTECTED block this unit
    may rewrite (the epoch slow update's); ``screen``: a cheaper check first (the reason to
    discard, or None to go on to the gate)."""
    folder = draft.unit.folder(ctx.run)
    problem = lint_edit(candidate, incumbent, ctx.config.growth_cap, own_block)
    if problem is None:
        refused = ctx.rollouts.refusal(candidate)
        problem = (
            None
            if refused is None
            else f"lint: the {ctx.rollouts.backend.name} agent cannot take it: {refused}"
        )
    if problem is not None:
        return close(ctx, draft.record(candidate.hash, "discard", "lint", problem), None)
    ctx.repo.stage(candidate)
    if screen is not None:
        reason = screen()
        if reason is not None:
            return close(ctx, draft.record(candidate.hash, "discard", "screen", reason), None)
    ctx.progress.phase = "gate"
    with ctx.stage(draft.unit.name, "gate") as info:
        verdict = decide(ctx, folder, candidate, incumbent, draft.unit.seq, done)
        info["rollouts"] = verdict.rollouts
    return close(ctx, draft.judged(candidate, verdict), candidate if verdict.accept else None)


def decide(
    ctx: RunContext,
    folder: Path,
    candidate: Candidate,
    incumbent: Candidate,
    seq: int,
    done: list[UnitRecord],
) -> Verdict:
    """The gate on val at this decision's level; gate.json is its memo."""
    path = folder / "gate.json"
    if path.is_file():
        verdict = Verdict.read(path)
    else:
        earlier = [r.verdict == "keep" for r in done if r.alpha is not None]
        gate, level = ctx.gate.for_decision(earlier)
        sampler = ValSampler(ctx.rollouts, folder, ctx.suite.tasks("val"), candidate, incumbent, seq)
        verdict = gate.decide(sampler)
        if verdict.decision != "contaminated":
            verdict = sampler.secondary(verdict, ctx.config.metric)
        if level is not None:
            verdict = verdict.model_copy(update={"alpha": level})
        if verdict.decision != "contaminated":  # a resumed unit must re-run the failed rollouts
            verdict.write(path)
    if verdict.decision == "contaminated":
        raise BlockedError(f"{folder.name}: {verdict.reason}; no gate decides on a contaminated batch")
    return verdict


def close(ctx: RunContext, record: UnitRecord, accepted: Candidate | None) -> UnitRecord:
    """Account the unit, move git, then write its record: the unit's commit point."""
    folder = ctx.run.unit_dir(record.kind, record.index)
    recs = records_run(folder)  # what this unit ran: a record copied from a shared cache cost nothing
    tokens = sum(record_tokens(r) for r in recs) + proposer_tokens(folder)
    cost = round(sum(record_cost(r) for r in recs), 6)
    record = record.model_copy(update={"rollouts": len(recs), "tokens": tokens, "cost_usd": cost})
    if accepted is not None:
        vals = f"val {fmt(record.val_candidate)} > {fmt(record.val_incumbent)}"
        ctx.repo.accept(
            accepted,
            f"{record.kind} {record.index}",
            f"{accepted.short} {vals}: {'; '.join(record.edits[:3])}",
        )
        write_best(ctx, accepted)
    else:
        ctx.repo.reject()
    record.write(folder / f"{record.kind}.json")
    ctx.run.journal(
        UnitEnd(
            unit=folder.name,
            verdict=record.verdict,
            candidate=record.candidate[:12],
            rollouts=record.rollouts,
        )
    )
    return record


def write_best(ctx: RunContext, best: Candidate) -> None:
    """best_skill/ (swapped in whole) and best_skill.md."""
    tmp = ctx.run.root / ".best_skill.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    best.write(tmp)
    shutil.rmtree(ctx.run.best_dir, ignore_errors=True)
    tmp.rename(ctx.run.best_dir)
    write_text(ctx.run.best_md, best.text)
