"""Settling a unit's candidate: lint it, stage it in git, gate it, close the unit.

A candidate equal to one a gate already rejected in the run is closed as a ``repeat`` before
any rollout: it is never screened or gated again.

Closing is a unit's commit point: its rollouts and tokens are counted, git moves (a keep
commits the candidate and moves ``best``; a discard resets the work tree), and only then
is step.json / epoch.json written. gate.json memoises the gate's verdict, so a resumed
unit never decides twice.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from skilltune.gate.veto import HarmScope
from skilltune.metric import Metric
from skilltune.propose.edit import lint_edit
from skilltune.propose.merge import normal_form
from skilltune.rollout.runner import RolloutJob, rollout_dir
from skilltune.runfiles import (
    AgentsGate,
    Phase,
    RolloutRecord,
    UnitDecision,
    UnitEnd,
    UnitRecord,
    UnitVerdict,
    Verdict,
    held_edits,
)
from skilltune.skill import Candidate
from skilltune.store import write_text
from skilltune.suite import Task
from skilltune.textfmt import fmt
from skilltune.training.agents import agent_evidence, agents_veto, harm_groups, trade_offs
from skilltune.training.budget import proposer_tokens, record_cost, record_tokens, records_run
from skilltune.training.context import RunContext
from skilltune.training.rollouts import POOL_OFFSET, RunRollouts, replicate_base
from skilltune.training.secondary import gate_scope, regression_test, veto
from skilltune.training.session import BlockedError
from skilltune.training.units import Unit


@dataclass(frozen=True)
class Draft:
    """What a unit knows of itself before its verdict: where it stands and what it changed."""

    unit: Unit
    step: int
    epoch: int
    parent: str
    metric: Metric
    edits: list[str] = field(default_factory=list)
    edit_texts: list[str] = field(default_factory=list)
    carried: int | None = None  # the step whose candidate this one was built on (--carry)
    carried_edits: int = 0  # how many of ``edits`` (the first ones) it carried
    note: str = ""  # said before the verdict's reason (a carried candidate gated in place of this step's)

    def record(self, candidate: str, verdict: UnitVerdict, decision: UnitDecision, reason: str) -> UnitRecord:
        return UnitRecord(
            kind=self.unit.kind, index=self.unit.index, step=self.step, epoch=self.epoch,
            candidate=candidate, parent=self.parent, verdict=verdict, decision=decision, reason=reason,
            metric=self.metric, edits=self.edits, edit_texts=self.edit_texts, carried=self.carried,
            carried_edits=self.carried_edits,
        )  # fmt: skip

    def judged(self, candidate: Candidate, verdict: Verdict) -> UnitRecord:
        accept = verdict.accept
        record = self.record(
            candidate.hash,
            "keep" if accept else "discard",
            "accept" if accept else "reject",
            self.note + verdict.reason,
        )
        return record.model_copy(
            update={
                "val_candidate": verdict.val_candidate,
                "val_incumbent": verdict.val_incumbent,
                "alpha": verdict.alpha,
                "agents": verdict.agents,
            }
        )


@dataclass(frozen=True)
class IncumbentPool:
    """The incumbent's val rollouts that decisions share while it stays the incumbent.

    Round r of every decision against one incumbent uses the same incumbent replicate,
    ``base + r``; the first decision that needs it runs it, later ones find it in its unit's
    folder (``sources``, in run order) and reuse it. ``base`` depends only on where the
    incumbent came from (the seed: 0, so the seed's val baseline serves its first rounds;
    a kept candidate: a block of its unit's replicate range that the unit's own gate never
    used), so the rollouts that selected an incumbent never judge it, and which rollouts are
    reused depends neither on timing nor on where the run was resumed.
    """

    base: int
    sources: tuple[tuple[Path, Phase], ...]  # (unit folder, phase) of earlier units' rollouts

    @classmethod
    def of(cls, ctx: RunContext, incumbent: Candidate, done: list[UnitRecord]) -> IncumbentPool:
        del incumbent  # the jobs name it: their folders under each source are the incumbent's
        kept = [i for i, record in enumerate(done) if record.verdict == "keep"]
        sources: list[tuple[Path, Phase]]
        if not kept:
            base, start = 0, 0
            sources = [(ctx.run.unit_dir("step", 0), "eval")]
        else:  # done[i] is the unit in run position i + 1
            base, start = replicate_base(kept[-1] + 1, POOL_OFFSET), kept[-1] + 1
            sources = []
        for record in done[start:]:
            sources.append((ctx.run.unit_dir(record.kind, record.index), "gate"))
        return cls(base, tuple(sources))

    def find(self, rollouts: RunRollouts, job: RolloutJob) -> RolloutRecord | None:
        for unit, phase in self.sources:
            there = replace(job, phase=phase)
            if rollout_dir(unit, there).is_dir():
                found = rollouts.finished(unit, there)
                if found is not None:
                    return found
        return None


@dataclass(eq=False)
class ValSampler:
    """The gate's sampler: round k runs the candidate on every val task with replicate indices
    fresh for the unit and the round, and takes the incumbent's round-k replicate from its
    pool (run here when no earlier decision ran it).

    Nothing is run ahead of the round that needs it: the incumbent's round k+1 queued behind
    round k (as skilltune did before) made round k wait for it too, so it only moved work from
    one round into the other (saving time in the tail of a round with uneven rollouts at most),
    and whenever the decision stopped at round k, or kept the candidate there (the incumbent then
    changes), those rollouts were never used: 32 of a 10-step run's 361 training
    rollouts on the 16-val-task demo (benchmarks/demo16.py). gate.json's ``prefetched`` stays 0.

    With a secondary suite named (skill-trainer's two-suite rule) the gate gets the primary
    tasks' records and the secondary tasks' are kept for the regression test
    (``training/secondary.py``).
    """

    rollouts: RunRollouts
    folder: Path
    val: list[Task]
    candidate: Candidate
    incumbent: Candidate
    seq: int
    pool: IncumbentPool
    # the secondary suite's records, every round; round -> incumbent rollouts taken from the pool;
    # the gated records of every round, per arm
    held: list[RolloutRecord] = field(default_factory=list, init=False)
    reused: dict[int, int] = field(default_factory=dict, init=False)
    seen_candidate: list[RolloutRecord] = field(default_factory=list, init=False)
    seen_incumbent: list[RolloutRecord] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        # the joint gate too
        self.scope = gate_scope(self.rollouts.suite, self.val, self.candidate, self.incumbent)
        self.gated = self.scope.gated

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        first = index * replicates
        jobs = self.rollouts.jobs(
            self.val, self.candidate, "gate", replicate_base(self.seq, first), replicates
        )
        pooled: list[RolloutRecord] = []
        for job in self.rollouts.jobs(self.val, self.incumbent, "gate", self.pool.base + first, replicates):
            found = self.pool.find(self.rollouts, job)
            if found is None:
                jobs.append(job)
            else:
                pooled.append(found)
        self.reused[index] = len(pooled)
        records = [r for r, _ in self.rollouts.run(self.folder, jobs)] + pooled
        self.held += [r for r in records if r.task_id not in self.gated]
        gated = [r for r in records if r.task_id in self.gated]
        cand = [r for r in gated if r.candidate == self.candidate.hash]
        inc = [r for r in gated if r.candidate == self.incumbent.hash]
        self.seen_candidate += cand
        self.seen_incumbent += inc
        return cand, inc  # the gate pairs them by unit: (agent, task) with several agents

    def secondary(self, verdict: Verdict, metric: Metric) -> Verdict:
        """The verdict after the secondary suite's regression test (none named: unchanged)."""
        name = self.scope.held
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

    def agents(self, verdict: Verdict, metric: Metric, mode: AgentsGate) -> Verdict:
        """The verdict with each agent's evidence and, under ``no-worse``, its veto (one agent: unchanged)."""
        labels = self.rollouts.labels
        if not labels:
            return verdict
        alpha = self.rollouts.suite.config.secondary_alpha
        evidence = agent_evidence(labels, self.seen_candidate, self.seen_incumbent, metric, alpha)
        return agents_veto(verdict, evidence, mode)


def settle(
    ctx: RunContext,
    draft: Draft,
    candidate: Candidate,
    incumbent: Candidate,
    done: list[UnitRecord],
    own_block: str | None = None,
) -> UnitRecord:
    """Lint -> repeat -> stage -> gate -> close (an epoch's slow update; a step routes its candidate
    through its carry policy first, training/step.py). ``own_block``: the PROTECTED block this unit may
    rewrite (the epoch slow update's)."""
    problem = precheck(ctx, candidate, incumbent, done, own_block)
    if problem is not None:
        return close(ctx, draft.record(candidate.hash, "discard", *problem), None)
    ctx.repo.stage(candidate)
    return gate_unit(ctx, draft, candidate, incumbent, done)


def precheck(
    ctx: RunContext,
    candidate: Candidate,
    incumbent: Candidate,
    done: list[UnitRecord],
    own_block: str | None = None,
) -> tuple[UnitDecision, str] | None:
    """Why ``candidate`` goes no further before any rollout (lint; a repeat of a candidate a gate
    rejected: no screen, no gate, no alpha for a decision already made), or None."""
    problem = lint_edit(candidate, incumbent, ctx.config.growth_cap, own_block)
    if problem is None and (refused := ctx.rollouts.refusal(candidate)) is not None:
        problem = f"lint: the {ctx.rollouts.agent} agent cannot take it: {refused}"
    if problem is not None:
        return "lint", problem
    earlier = rejected_before(ctx, candidate, done)
    if earlier is not None:
        return (
            "repeat",
            f"repeat of rejected candidate {earlier.candidate[:12]} ({earlier.kind} {earlier.index})",
        )
    return None


def gate_unit(
    ctx: RunContext, draft: Draft, candidate: Candidate, incumbent: Candidate, done: list[UnitRecord]
) -> UnitRecord:
    """The gate on val, then close the unit with its verdict."""
    folder = draft.unit.folder(ctx.run)
    ctx.progress.phase = "gate"
    with ctx.stage(draft.unit.name, "gate") as info:
        carried = (draft.carried, draft.edits[: draft.carried_edits]) if draft.carried is not None else None
        verdict = decide(ctx, folder, candidate, incumbent, draft.unit.seq, done, carried)
        info["rollouts"] = verdict.rollouts
    return close(ctx, draft.judged(candidate, verdict), candidate if verdict.accept else None)


def rejected_before(ctx: RunContext, candidate: Candidate, done: list[UnitRecord]) -> UnitRecord | None:
    """The earlier unit whose candidate a gate rejected and which equals ``candidate`` after
    normalisation (``normal_form``), if any: read from the units' saved candidates, so a resumed
    run finds the same."""
    key = normal_form(candidate)
    for record in done:
        if record.decision != "reject":
            continue
        folder = ctx.run.unit_dir(record.kind, record.index) / "candidate"
        if record.candidate == candidate.hash or (
            folder.is_dir() and normal_form(Candidate.load(folder, candidate)) == key
        ):
            return record
    return None


def decide(
    ctx: RunContext,
    folder: Path,
    candidate: Candidate,
    incumbent: Candidate,
    seq: int,
    done: list[UnitRecord],
    carried: tuple[int, list[str]] | None = None,
) -> Verdict:
    """The gate on val at this decision's level; gate.json is its memo (with the step and edits the
    candidate carried, under ``--carry``)."""
    path = folder / "gate.json"
    if path.is_file():
        verdict = Verdict.read(path)
    else:
        earlier = [r.verdict == "keep" for r in done if r.alpha is not None]
        val = ctx.suite.tasks("val")
        trigger = [t.id for t in val if ctx.suite.scoring_mode(t) == "trigger"]
        units = ctx.rollouts.units(val)
        scope = HarmScope(trade_offs(trigger, units), harm_groups(units, ctx.config.agents_gate))
        gate, level = ctx.gate.for_decision(earlier, ctx.rng(seq, "gate").randrange(2**32), scope)
        if gate is None:
            verdict = Verdict(
                decision="reject", reason="the run's alpha is spent: its plan of decisions is exhausted",
                metric=ctx.config.metric, val_candidate=None, val_incumbent=None, rounds=[], rollouts=0,
            )  # fmt: skip
        elif (why := gate.cannot_accept(len(ctx.suite.tasks("val")) * len(ctx.rollouts.targets))) is not None:
            verdict = Verdict(
                decision="reject", reason=why, metric=ctx.config.metric, val_candidate=None,
                val_incumbent=None, rounds=[], rollouts=0,
            )  # fmt: skip
        else:
            pool = IncumbentPool.of(ctx, incumbent, done)
            sampler = ValSampler(ctx.rollouts, folder, val, candidate, incumbent, seq, pool)
            verdict = _with_reuse(gate.decide(sampler), sampler)
            if verdict.decision != "contaminated":
                verdict = sampler.secondary(verdict, ctx.config.metric)
                verdict = sampler.agents(verdict, ctx.config.metric, ctx.config.agents_gate)
                verdict = verdict.model_copy(update={"gated_on": sampler.scope.note})
        if level is not None:
            verdict = verdict.model_copy(update={"alpha": level})
        if carried is not None:
            verdict = verdict.model_copy(update={"carried": carried[0], "carried_edits": carried[1]})
        if verdict.decision != "contaminated":  # a resumed unit must re-run the failed rollouts
            verdict.write(path)
    if verdict.decision == "contaminated":
        raise BlockedError(f"{folder.name}: {verdict.reason}; no gate decides on a contaminated batch")
    return verdict


def _with_reuse(verdict: Verdict, sampler: ValSampler) -> Verdict:
    """The verdict with each round's pooled incumbent rollouts counted as reused, not run."""
    reused = sampler.reused
    rounds = [
        r.model_copy(
            update={"rollouts": r.rollouts - reused.get(r.index, 0), "reused": reused.get(r.index, 0)}
        )
        for r in verdict.rounds
    ]
    return verdict.model_copy(
        update={
            "rounds": rounds,
            "rollouts": sum(r.rollouts for r in rounds),
            "reused": sum(r.reused for r in rounds),
        }
    )


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
            f"{accepted.short} {vals}: {held_edits(record.edits)}",
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
