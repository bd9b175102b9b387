"""One training step: train rollouts, reflection, merged edits, then the candidate settled.

The incumbent runs on a train minibatch; the proposer reflects on it; its edits are merged
and applied; the candidate is settled (lint, [screen], gate, close).

Each stage writes its output into the step's folder (reflections.json, merged_patch.json,
candidate/), so a resumed step skips what is done; every random choice is derived from
(run seed, step, purpose).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from skilltune.proposal import Edit
from skilltune.propose import MergeResult, PatchError, apply_patch, merge_edits
from skilltune.propose.edit import fit_growth, growth_problem
from skilltune.propose.reflect import build_packet, rejected_buffer, render_memory, trajectory_id
from skilltune.propose.vet import vet_edits
from skilltune.rollout.tally import accuracy
from skilltune.rundir import RunDir
from skilltune.runfiles import ReflectionsFile, RolloutRecord, UnitRecord
from skilltune.skill import Candidate
from skilltune.store import write_json, write_text
from skilltune.suite import Task
from skilltune.training.context import RunContext
from skilltune.training.gating import Draft, close, settle
from skilltune.training.rollouts import Records, replicate_base
from skilltune.training.session import BlockedError
from skilltune.training.units import Unit, base_of, incumbent


def run_step(ctx: RunContext, unit: Unit, done: list[UnitRecord]) -> UnitRecord:
    c = ctx.config
    n = unit.index
    folder = unit.folder(ctx.run)
    folder.mkdir(parents=True, exist_ok=True)
    epoch = (n - 1) // c.epoch_steps + 1
    ctx.progress.step, ctx.progress.epoch, ctx.progress.phase = n, epoch, "train"
    parent = incumbent(ctx.run, done, ctx.seed)
    base, carry = base_of(ctx.run, done, ctx.seed, c.carry)  # base: what this step builds on
    train = ctx.suite.tasks("train")
    tasks = [train[i] for i in sorted(ctx.rng(n, "batch").sample(range(len(train)), ctx.plan.batch))]

    with ctx.stage(unit.name, "rollout") as info:
        evidence = _train_evidence(ctx, unit, tasks, base)
        info["rollouts"] = len(evidence)
    ctx.progress.phase = "reflect"
    with ctx.stage(unit.name, "reflect") as info:
        proposal = _reflect(ctx, unit, base, evidence, done)
        info["calls"] = len(proposal.calls)
        info["tokens_in"] = sum(call.tokens_in or 0 for call in proposal.calls)
        info["tokens_out"] = sum(call.tokens_out or 0 for call in proposal.calls)
    with ctx.stage(unit.name, "edit"):
        shown = {trajectory_id(r) for r, _ in evidence}
        candidate, edits, problem = _make_candidate(ctx, unit, base, proposal, shown)
    carried_edits = carry.edits if carry is not None else []
    carried_texts = carry.edit_texts if carry is not None else []
    draft = Draft(
        unit, step=n, epoch=epoch, parent=parent.hash, metric=c.metric,
        edits=[*carried_edits, *(e.compact() for e in edits)],
        edit_texts=[*carried_texts, *(e.text for e in edits)],
        carried=carry.index if carry is not None else None, carried_edits=len(carried_edits),
    )  # fmt: skip
    pending = carry is not None and carry.decision == "defer"  # a carried candidate not gated yet

    def carried_alone(why: str) -> tuple[Candidate, Draft]:
        """The carried candidate in place of this step's own: it is gated now, as it was."""
        base.save(folder / "candidate")
        write_text(folder / "candidate_skill.md", base.text)
        own = f"{len(edits)} own edit(s) {why}; " if edits else ""
        note = f"{own}the candidate carried from step {carry.index if carry else '?'} gated: "
        alone = replace(draft, edits=carried_edits, edit_texts=carried_texts, note=note)
        return base, alone

    if candidate is None and pending:
        candidate, draft = carried_alone(f"not applied ({problem})" if problem else "")
        return settle(ctx, draft, candidate, parent, done)
    if candidate is None:
        return close(ctx, draft.record(parent.hash, "discard", "empty", problem or ""), None)
    last = n == c.total_steps or n % c.epoch_steps == 0  # a candidate is gated before an epoch update
    figures: dict[str, float] = {}  # the screen's train scores: before (the parent), after

    def screen() -> str | None:
        """Discard a candidate that does worse than the incumbent on the very train batch."""
        ctx.progress.phase = "screen"
        with ctx.stage(unit.name, "screen") as info:
            jobs = ctx.rollouts.jobs(tasks, candidate, "screen", replicate_base(unit.seq), c.reps)
            screened = ctx.rollouts.run(folder, jobs)
            info["rollouts"] = len(screened)
        before = accuracy([r for r, _ in evidence], c.metric)
        after = accuracy([r for r, _ in screened], c.metric)
        if before is not None and after is not None and after < before:
            return f"screen: train {after:.3f} < {before:.3f}"
        if before is not None and after is not None:
            figures.update(before=before, after=after)
        return None

    def defer() -> str | None:
        """``--carry screen``: a candidate that beat its parent on the train screen goes on ungated."""
        if c.carry != "screen" or last or not figures or figures["after"] <= figures["before"]:
            return None
        if c.component_at(n + 1) != c.component_at(n):  # --component both: the next step's gate is
            return None  # on the other component's tasks, so this candidate is gated on its own now
        return f"carried on ungated: train {figures['after']:.3f} > {figures['before']:.3f}"

    return settle(
        ctx, draft, candidate, parent, done, screen=screen if c.screen else None, defer=defer,
        fallback=(lambda why: carried_alone(f"screened out ({why})")) if pending else None,
    )  # fmt: skip


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


def _reflect(
    ctx: RunContext, unit: Unit, parent: Candidate, evidence: Records, done: list[UnitRecord]
) -> ReflectionsFile:
    path = unit.folder(ctx.run) / "reflections.json"
    if path.is_file():
        return ReflectionsFile.read(path)
    packet = build_packet(
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
