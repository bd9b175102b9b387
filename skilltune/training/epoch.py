"""The epoch slow update: longitudinal guidance written into the skill's own PROTECTED block.

After every ``epoch_steps`` steps, the previous epoch's skill and the current one run on a
sample of train tasks; the proposer writes guidance from that comparison and the epoch's
kept and rejected edits into the ``PROTECTED:slow-update`` block, and the result is
settled like a step's candidate (lint, gate on val, close). META.md (what worked, what
failed) is rebuilt from the unit records after every unit; the proposer reads it and it
is never deployed with the skill.
"""

from __future__ import annotations

from skilltune.propose.edit import set_protected_block
from skilltune.rollout.tally import accuracy
from skilltune.runfiles import SlowUpdateFile, UnitRecord
from skilltune.store import write_text
from skilltune.textfmt import fmt
from skilltune.training.context import RunContext
from skilltune.training.gating import Draft, close, settle
from skilltune.training.rollouts import replicate_base
from skilltune.training.units import Unit, incumbent

SLOW_UPDATE_BLOCK = "slow-update"


def run_epoch_update(ctx: RunContext, unit: Unit, done: list[UnitRecord]) -> UnitRecord:
    c = ctx.config
    e = unit.index
    folder = unit.folder(ctx.run)
    folder.mkdir(parents=True, exist_ok=True)
    ctx.progress.phase = "slow update"
    this_epoch = [r for r in done if r.kind == "step" and r.epoch == e]
    before = [r for r in done if not (r.kind == "step" and r.epoch == e)]
    previous, current = incumbent(ctx.run, before, ctx.seed), incumbent(ctx.run, done, ctx.seed)
    draft = Draft(unit, step=e * c.epoch_steps, epoch=e, parent=current.hash, metric=c.metric)
    if previous.hash == current.hash:
        return close(ctx, draft.record(current.hash, "discard", "skip", "nothing was kept this epoch"), None)

    train = ctx.suite.tasks("train")
    picked = ctx.rng(e, "slow-sample").sample(range(len(train)), ctx.plan.slow_sample)
    sample = [train[i] for i in sorted(picked)]
    with ctx.stage(unit.name, "compare") as info:
        jobs = ctx.rollouts.jobs(sample, previous, "train", replicate_base(unit.seq), c.reps)
        jobs += ctx.rollouts.jobs(sample, current, "train", replicate_base(unit.seq), c.reps)
        recs = [r for r, _ in ctx.rollouts.run(folder, jobs)]
        info["rollouts"] = len(recs)
    prev_mean = accuracy([r for r in recs if r.candidate == previous.hash], c.metric)
    cur_mean = accuracy([r for r in recs if r.candidate == current.hash], c.metric)
    comparison = (
        f"Epoch {e}: previous-epoch skill {fmt(prev_mean)} vs current {fmt(cur_mean)} "
        f"({c.metric}) on {len(sample)} sampled train tasks."
    )
    kept = [edit for r in this_epoch if r.verdict == "keep" for edit in r.edits]
    # a step carried on ungated was not rejected: a later gate decided its edits
    rejected = [edit for r in this_epoch if r.verdict == "discard" for edit in r.edits]
    path = folder / "slow_update.json"
    with ctx.stage(unit.name, "slow_update"):
        if path.is_file():
            update = SlowUpdateFile.read(path)
        else:
            seed = ctx.rng(e, "slow-propose").randrange(2**31)
            answer = ctx.proposer.slow_update(current.text, comparison, kept, rejected, seed)
            update = SlowUpdateFile.model_validate(answer.model_dump())
            update.write(path)
    candidate = current.replace_file(
        current.main, set_protected_block(current.text, SLOW_UPDATE_BLOCK, update.guidance)
    )
    candidate.save(folder / "candidate")
    write_text(folder / "candidate_skill.md", candidate.text)
    draft = Draft(
        unit, step=draft.step, epoch=e, parent=current.hash, metric=c.metric,
        edits=[f"slow-update: {comparison}"], edit_texts=[update.guidance],
    )  # fmt: skip
    return settle(ctx, draft, candidate, current, done, own_block=SLOW_UPDATE_BLOCK)
