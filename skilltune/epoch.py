"""Epochs: the slow update and the optimizer memory.

After every ``epoch_steps`` steps, the previous epoch's skill and the current one
run on a sample of train tasks; the proposer writes longitudinal guidance from
that comparison and the epoch's kept and rejected edits into the skill's
``PROTECTED:slow-update`` block, and the result is gated on val like a step.
META.md (what worked, what failed) is rebuilt from the unit records after every
unit; the proposer reads it and it is never deployed with the skill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skilltune.progress import fmt
from skilltune.propose.edit import set_protected_block
from skilltune.rollout import accuracy
from skilltune.store import UnitRecord, read_json, write_json, write_text

if TYPE_CHECKING:
    from skilltune.loop import Trainer

SLOW_UPDATE_BLOCK = "slow-update"


def slow_update(trainer: Trainer, e: int, done: list[UnitRecord]) -> UnitRecord:
    from skilltune.loop import REPLICATE_STRIDE

    c = trainer.config
    folder = trainer.run.epoch_dir(e)
    folder.mkdir(parents=True, exist_ok=True)
    trainer.progress.phase = "slow update"
    this_epoch = [r for r in done if r.kind == "step" and r.epoch == e]
    before = [r for r in done if not (r.kind == "step" and r.epoch == e)]
    previous, current = trainer.incumbent(before), trainer.incumbent(done)
    base: dict[str, Any] = dict(
        kind="epoch", index=e, step=e * c.epoch_steps, epoch=e, parent=current.hash, metric=c.metric
    )
    if previous.hash == current.hash:
        record = UnitRecord(
            **base,
            candidate=current.hash,
            verdict="discard",
            decision="skip",
            reason="nothing was kept this epoch",
        )
        return trainer.close_unit(folder, record, None)

    seq = len(done) + 1
    train = trainer.suite.tasks("train")
    picked = trainer.rng(e, "slow-sample").sample(range(len(train)), trainer.plan.slow_sample)
    sample = [train[i] for i in sorted(picked)]
    with trainer.stage(folder.name, "compare") as info:
        jobs = trainer.jobs(sample, previous, "train", seq * REPLICATE_STRIDE, c.reps)
        jobs += trainer.jobs(sample, current, "train", seq * REPLICATE_STRIDE, c.reps)
        recs = [r for r, _ in trainer.rollouts(folder, jobs)]
        info["rollouts"] = len(recs)
    prev_mean = accuracy([r for r in recs if r.candidate == previous.hash], c.metric)
    cur_mean = accuracy([r for r in recs if r.candidate == current.hash], c.metric)
    comparison = (
        f"Epoch {e}: previous-epoch skill {fmt(prev_mean)} vs current {fmt(cur_mean)} "
        f"({c.metric}) on {len(sample)} sampled train tasks."
    )
    kept = [edit for r in this_epoch if r.verdict == "keep" for edit in r.edits]
    rejected = [edit for r in this_epoch if r.verdict != "keep" for edit in r.edits]
    path = folder / "slow_update.json"
    with trainer.stage(folder.name, "slow_update"):
        if path.is_file():
            guidance = str(read_json(path)["guidance"])
        else:
            seed = trainer.rng(e, "slow-propose").randrange(2**31)
            update = trainer.proposer.slow_update(current.text, comparison, kept, rejected, seed)
            write_json(path, update)
            guidance = update.guidance
    candidate = current.replace_file(
        current.main, set_protected_block(current.text, SLOW_UPDATE_BLOCK, guidance)
    )
    candidate.save(folder / "candidate")
    write_text(folder / "candidate_skill.md", candidate.text)
    base |= {"edits": [f"slow-update: {comparison}"], "edit_texts": [guidance]}
    problem = trainer.lint(candidate, current, own_block=SLOW_UPDATE_BLOCK)
    if problem is not None:
        record = UnitRecord(
            **base, candidate=candidate.hash, verdict="discard", decision="lint", reason=problem
        )
        return trainer.close_unit(folder, record, None)
    assert trainer.repo is not None
    trainer.repo.stage(candidate)
    with trainer.stage(folder.name, "gate") as info:
        verdict = trainer.decide(folder, candidate, current, seq)
        info["rollouts"] = verdict.rollouts
    return trainer.close_unit(
        folder, trainer.verdict_record(base, candidate, verdict), candidate if verdict.accept else None
    )
