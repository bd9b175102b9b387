"""One training step: train rollouts, the proposals, the screen, then the carry policy's route.

The skill the step builds on (the incumbent, or a carried candidate) runs on a train minibatch.
With ``--proposals N`` above 1 the proposer is asked N times (training/proposals.py) and each
proposal is screened alone on train; the candidate is built from those that work
(training/screen.py). With one ask its edits are merged and applied, and the candidate is screened
on the whole batch. Lint and a repeat of a rejected candidate close the step before any more
rollouts; then the carry policy (training/carry.py) routes the candidate: carried on ungated,
gated, or discarded (a carried candidate gated in its place when the step has nothing).

Each stage writes its output into the step's folder (reflections.json, merged_patch.json,
candidate/), so a resumed step skips what is done; every random choice is derived from
(run seed, step, purpose).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skilltune.proposal import Edit, EvidencePacket, ProposerCall
from skilltune.propose import MergeResult, PatchError, apply_patch, merge_edits
from skilltune.propose.edit import fit_growth, growth_problem
from skilltune.propose.reflect import build_packet, rejected_buffer, render_memory, trajectory_id
from skilltune.propose.vet import vet_edits
from skilltune.rollout.tally import accuracy
from skilltune.rundir import RunDir
from skilltune.runfiles import (
    CARRIED,
    ReflectionsFile,
    RolloutRecord,
    ScreenFigures,
    Selection,
    UnitDecision,
    UnitRecord,
)
from skilltune.skill import Candidate
from skilltune.store import write_json, write_text
from skilltune.suite import Task
from skilltune.training.budget import spent
from skilltune.training.carry import CarryOn, CarryPolicy, Discard, Route
from skilltune.training.context import RunContext
from skilltune.training.gating import Draft, close, gate_unit, precheck
from skilltune.training.proposals import gather
from skilltune.training.rollouts import Records, replicate_base
from skilltune.training.select import Choice, choose
from skilltune.training.session import BlockedError
from skilltune.training.units import Unit, incumbent


def run_step(ctx: RunContext, unit: Unit, done: list[UnitRecord]) -> UnitRecord:
    c = ctx.config
    n = unit.index
    folder = unit.folder(ctx.run)
    folder.mkdir(parents=True, exist_ok=True)
    epoch = (n - 1) // c.epoch_steps + 1
    ctx.progress.step, ctx.progress.epoch, ctx.progress.phase = n, epoch, "train"
    policy = CarryPolicy(c.carry)
    parent = incumbent(ctx.run, done, ctx.seed)
    base, carried = policy.base(ctx.run, done, ctx.seed)  # base: what this step builds on
    train = ctx.suite.tasks("train")
    tasks = [train[i] for i in sorted(ctx.rng(n, "batch").sample(range(len(train)), ctx.plan.batch))]

    with ctx.stage(unit.name, "rollout") as info:
        evidence = _train_evidence(ctx, unit, tasks, base)
        info["rollouts"] = len(evidence)
    shown = {trajectory_id(r) for r, _ in evidence}
    draft = Draft(
        unit, step=n, epoch=epoch, parent=parent.hash, metric=c.metric,
        edits=list(carried.record.edits) if carried else [],
        edit_texts=list(carried.record.edit_texts) if carried else [],
        carried=carried.record.index if carried else None,
        carried_edits=len(carried.record.edits) if carried else 0,
    )  # fmt: skip
    if c.asks > 1:
        own, edits, figures, why_not = _several(ctx, unit, base, evidence, tasks, done, shown)
    else:
        own, edits, figures, why_not = _one(ctx, unit, base, evidence, tasks, done, shown)
    draft = replace(
        draft, edits=[*draft.edits, *(e.compact() for e in edits)], edit_texts=[*draft.edit_texts, *(e.text for e in edits)]
    )  # fmt: skip
    if own is not None:  # lint and repeat before any more rollouts; a carried candidate stays carried
        problem = precheck(ctx, own, parent, done)
        if problem is not None:
            return close(ctx, draft.record(own.hash, "discard", *problem), None)
        ctx.repo.stage(own)
        if figures is None:  # one ask: the candidate on the very train batch
            own, figures, why_not = _screen_whole(ctx, unit, own, tasks, evidence)
    route = policy.route(c, draft, own, figures, carried, why_not, final=_last_payable(ctx))
    return conclude(ctx, route, parent, done)


def _last_payable(ctx: RunContext) -> bool:
    """Whether the rollout budget could not pay for another step after this one's gate: ``--carry run``
    gates what it carries now rather than end the run with it ungated. (Rollouts on disk only: the
    same when a resumed step routes again; a token, USD or time budget cannot be told ahead.)"""
    budget = ctx.config.budget_rollouts
    return budget is not None and spent(ctx.run).rollouts + ctx.plan.gate + ctx.plan.step > budget


def conclude(ctx: RunContext, route: Route, parent: Candidate, done: list[UnitRecord]) -> UnitRecord:
    """Carry on, discard, or gate (a carried candidate gated on its own is linted first)."""
    folder = route.draft.unit.folder(ctx.run)
    if isinstance(route, CarryOn):
        if not _holds(
            folder, route.candidate, parent
        ):  # the carried candidate, as it was, in this step's place
            route.candidate.save(folder / "candidate")
            write_text(folder / "candidate_skill.md", route.candidate.text)
        return close(ctx, route.draft.record(route.candidate.hash, CARRIED, "carry", route.reason), None)
    if isinstance(route, Discard):
        return close(ctx, route.draft.record(route.candidate, "discard", route.decision, route.reason), None)
    if not _holds(folder, route.candidate, parent):
        problem = precheck(ctx, route.candidate, parent, done)  # the carried candidate, in this step's place
        if problem is not None:
            return close(ctx, route.draft.record(route.candidate.hash, "discard", *problem), None)
        route.candidate.save(folder / "candidate")
        write_text(folder / "candidate_skill.md", route.candidate.text)
    ctx.repo.stage(route.candidate)
    return gate_unit(ctx, route.draft, route.candidate, parent, done)


def _holds(folder: Path, candidate: Candidate, parent: Candidate) -> bool:
    """Whether the step's folder holds ``candidate`` as its candidate."""
    return (folder / "candidate").is_dir() and Candidate.load(
        folder / "candidate", parent
    ).hash == candidate.hash


Own = tuple[Candidate | None, list[Edit], ScreenFigures | None, tuple[UnitDecision, str] | None]


def _one(
    ctx: RunContext, unit: Unit, base: Candidate, evidence: Records, tasks: list[Task], done: list[UnitRecord],
    shown: set[str],
) -> Own:  # fmt: skip
    """One ask (``--proposals 1``): its edits merged and applied; screened on the batch afterwards."""
    ctx.progress.phase = "reflect"
    with ctx.stage(unit.name, "reflect") as info:
        proposal = _reflect(ctx, unit, base, evidence, done)
        _count_calls(info, proposal.calls)
    with ctx.stage(unit.name, "edit"):
        candidate, edits, problem = _make_candidate(ctx, unit, base, proposal, shown)
    return candidate, edits, None, None if candidate is not None else ("empty", problem or "")


def _several(
    ctx: RunContext, unit: Unit, base: Candidate, evidence: Records, tasks: list[Task], done: list[UnitRecord],
    shown: set[str],
) -> Own:  # fmt: skip
    """Several asks, each proposal screened alone, the candidate built from those that work."""
    path = unit.folder(ctx.run) / "reflections.json"
    ctx.progress.phase = "reflect"
    with ctx.stage(unit.name, "reflect") as info:
        packet = _packet(ctx, unit, base, evidence, done)
        answered = gather(ctx, unit, packet, done) if not path.is_file() else []
        _count_calls(info, [call for a in answered for answer in a.answers for call in answer.calls])
    if path.is_file():  # a resumed step: the selection is made, its candidate is the base plus its edits
        reflections = ReflectionsFile.read(path)
        choice = _chosen(reflections, base)
    else:
        with ctx.stage(unit.name, "screen") as info:
            choice = choose(ctx, unit, base, evidence, tasks, answered, done, shown)
            info["rollouts"] = choice.rollouts
        reflections = ReflectionsFile(
            edits=choice.edits, calls=[call for a in answered for answer in a.answers for call in answer.calls],
            dropped=[d for a in answered for answer in a.answers for d in answer.dropped]
            + [d for a in answered for d in a.spent],
            proposals=choice.proposals, selection=choice.selection,
            notes={"why_not": list(choice.why_not)} if choice.why_not else {},
        )  # fmt: skip
        reflections.write(path)
    folder = unit.folder(ctx.run)
    if choice.candidate is not None:
        choice.candidate.save(folder / "candidate")
        write_text(folder / "candidate_skill.md", choice.candidate.text)
    return choice.candidate, choice.edits, choice.figures, choice.why_not


def _chosen(reflections: ReflectionsFile, base: Candidate) -> Choice:
    """The choice a finished selection recorded (reflections.json), rebuilt on the base."""
    selection = reflections.selection or Selection(rule="")
    kept = [p for p in reflections.proposals if p.status == "kept"]
    if not reflections.edits or not kept:
        decision, reason = reflections.notes.get("why_not") or ("empty", "no proposal to screen")
        why: tuple[UnitDecision, str] = ("screen" if decision == "screen" else "empty", str(reason))
        return Choice(None, [], None, reflections.proposals, selection, why)
    candidate, edits = apply_patch(base, reflections.edits)
    figures = selection.screen or kept[0].screen
    return Choice(candidate, edits, figures, reflections.proposals, selection, None)


def _count_calls(info: dict[str, object], calls: list[ProposerCall]) -> None:
    info["calls"] = len(calls)
    info["tokens_in"] = sum(call.tokens_in or 0 for call in calls)
    info["tokens_out"] = sum(call.tokens_out or 0 for call in calls)


def _screen_whole(
    ctx: RunContext, unit: Unit, candidate: Candidate, tasks: list[Task], evidence: Records
) -> tuple[Candidate | None, ScreenFigures | None, tuple[UnitDecision, str] | None]:
    """One ask's screen: the candidate on the very train batch, discarded when it does worse there."""
    if not ctx.config.screen:
        return candidate, None, None
    ctx.progress.phase = "screen"
    with ctx.stage(unit.name, "screen") as info:
        jobs = ctx.rollouts.jobs(tasks, candidate, "screen", replicate_base(unit.seq), ctx.config.reps)
        screened = ctx.rollouts.run(unit.folder(ctx.run), jobs)
        info["rollouts"] = len(screened)
    before = accuracy([r for r, _ in evidence], ctx.config.metric)
    after = accuracy([r for r, _ in screened], ctx.config.metric)
    if before is None or after is None:
        return candidate, None, None
    figures = ScreenFigures(
        tasks=[t.id for t in tasks], before=before, after=after, gain=round(after - before, 6)
    )
    if after < before:
        return None, figures, ("screen", f"screen: train {after:.3f} < {before:.3f}")
    return candidate, figures, None


def _train_evidence(ctx: RunContext, unit: Unit, tasks: list[Task], parent: Candidate) -> Records:
    if ctx.config.evidence_from:
        # Another arm's recorded train rollouts (same suite: checked when the run started);
        # only train tasks of this suite are evidence, whatever the folder holds.
        source = RunDir(Path(ctx.config.evidence_from)).unit_dir("step", unit.index)
        train_ids = {t.id for t in ctx.suite.tasks("train")}
        found = []
        for path in sorted(source.glob("rollouts/train/*/*/record.json")):
            record = RolloutRecord.read(path)
            if record.phase == "train" and record.task_id in train_ids:
                found.append((record, path.parent))
        if not found:
            raise BlockedError(f"--evidence-from: {source} holds no train rollouts for step {unit.index}")
        return found
    jobs = ctx.rollouts.jobs(tasks, parent, "train", replicate_base(unit.seq), ctx.config.reps)
    records = ctx.rollouts.run(unit.folder(ctx.run), jobs)
    if not any(r.score for r, _ in records):
        raise BlockedError(
            f"step {unit.index}: no train rollout could be scored (infra errors after retries)"
        )
    return records


def _packet(
    ctx: RunContext, unit: Unit, parent: Candidate, evidence: Records, done: list[UnitRecord]
) -> EvidencePacket:
    return build_packet(
        step=unit.index,
        mode=ctx.config.mode,
        incumbent=parent,
        records=evidence,
        suite=ctx.suite,
        rejected=rejected_buffer(done),
        memory=render_memory(done),
        max_edits=ctx.edit_budget.at(unit.index) * 2,
        seed=ctx.rng(unit.index, "propose").randrange(2**31),
        component=ctx.config.component_at(unit.index),
    )


def _reflect(
    ctx: RunContext, unit: Unit, parent: Candidate, evidence: Records, done: list[UnitRecord]
) -> ReflectionsFile:
    path = unit.folder(ctx.run) / "reflections.json"
    if path.is_file():
        return ReflectionsFile.read(path)
    packet = _packet(ctx, unit, parent, evidence, done)
    # An edit citing none of the packet's trajectories, or of the other component, is dropped here.
    vetted = vet_edits(ctx.proposer.propose(packet), packet)
    proposal = ReflectionsFile.model_validate(vetted.model_dump())
    proposal.write(path)
    return proposal


def _make_candidate(
    ctx: RunContext, unit: Unit, parent: Candidate, proposal: ReflectionsFile, shown: set[str]
) -> tuple[Candidate | None, list[Edit], str | None]:
    """(candidate, edits, None), or (None, edits, why there is no candidate): merge and apply
    the edits (patch mode) or take the new document (rewrite mode)."""
    folder = unit.folder(ctx.run)
    if ctx.config.mode == "rewrite" and ctx.config.component_at(unit.index) == "body":
        if not proposal.files:
            return None, [], "the rewrite proposer returned no document"
        candidate = Candidate(proposal.files, parent.main, parent.kind, parent.fallback_name)
        edits = [Edit(op="replace", anchor="(whole document)", text=f"rewrite {candidate.short}")]
    else:
        merged = merge_edits(proposal.edits, parent, ctx.edit_budget.at(unit.index), known=shown)
        edits = [m.edit for m in merged.kept]
        if not edits:
            write_json(folder / "merged_patch.json", merged)
            return None, [], "no applicable edits were proposed"
        try:
            candidate, edits = apply_patch(parent, edits)
        except PatchError as exc:
            write_json(folder / "merged_patch.json", merged)
            return None, edits, f"patch did not apply: {exc}"
        if growth_problem(candidate, parent, ctx.config.growth_cap) is not None:
            candidate, edits, merged = _fit(parent, merged, candidate, edits, ctx.config.growth_cap)
        write_json(folder / "merged_patch.json", merged)
    candidate.save(folder / "candidate")
    write_text(folder / "candidate_skill.md", candidate.text)
    return candidate, edits, None


def _fit(
    parent: Candidate, merged: MergeResult, whole: Candidate, applied: list[Edit], growth_cap: float
) -> tuple[Candidate, list[Edit], MergeResult]:
    """A patch over the growth cap keeps its strongest edits that fit (the weakest drop first);
    when none fits alone, the whole patch goes on to lint, which says why it is discarded."""
    try:
        candidate, edits, left = fit_growth(parent, [m.edit for m in merged.kept], growth_cap)
    except PatchError:
        return whole, applied, merged
    out = {id(edit) for edit, _ in left}
    dropped = [*merged.dropped, *({"edit": edit.compact(), "reason": why} for edit, why in left)]
    kept = [m for m in merged.kept if id(m.edit) not in out]
    return candidate, edits, merged.model_copy(update={"kept": kept, "dropped": dropped})
