"""The end of a run: the held-out comparison of the seed (S0) and the best skill, then TERMINAL.

``success``: the steps (or epochs) are done and best differs from S0; ``no-progress``:
nothing was kept, or ``patience`` discards in a row cut the run short (the comparison
still runs when something was kept before). comparison.json has the schema of
``skilltune compare``; the final rollouts live under ``final/``.
"""

from __future__ import annotations

from skilltune.compare import build_comparison
from skilltune.progress import fmt
from skilltune.runfiles import Comparison, UnitRecord
from skilltune.skill import Candidate
from skilltune.train.budget import records_run
from skilltune.train.context import RunContext
from skilltune.train.gating import write_best
from skilltune.train.units import incumbent


def finish(ctx: RunContext, done: list[UnitRecord], stopped_early: bool) -> None:
    best = incumbent(ctx.run, done, ctx.seed)
    write_best(ctx, best)
    kept = sum(1 for r in done if r.verdict == "keep")
    steps = sum(1 for r in done if r.kind == "step")
    if best.hash == ctx.seed.hash:
        why = f"{ctx.config.patience} discards in a row" if stopped_early else f"{steps} steps, nothing kept"
        ctx.run.write_terminal("no-progress", why)
        return
    reason = f"{steps} steps, {kept} kept; best {best.short}"
    if ctx.suite.has_split("test"):
        ctx.progress.phase = "test"
        ctx.budget.check(ctx.run, ctx.plan.final, len(records_run(ctx.run.final)))
        with ctx.stage("final", "compare") as info:
            comparison = final_comparison(ctx, best)
            info["rollouts"] = sum(a.n_rollouts for a in comparison.arms.values())
        pair = comparison.pairs[0]
        arms = comparison.arms
        reason += (
            f"; test {comparison.metric} S0 {fmt(arms['S0'].mixed)} -> best {fmt(arms['best'].mixed)}"
            f" ({pair.verdict})"
        )
    state = "success"
    if stopped_early:
        state, reason = "no-progress", f"{ctx.config.patience} discards in a row after {reason}"
    ctx.run.write_terminal(state, reason)


def final_comparison(ctx: RunContext, best: Candidate) -> Comparison:
    """S0 and best on test with ``test_reps`` replicates (comparison.json is its memo)."""
    if ctx.run.comparison.is_file():
        return Comparison.read(ctx.run.comparison)
    arms = {"S0": ctx.seed, "best": best}
    tasks = ctx.suite.tasks("test")
    jobs = [
        j for cand in arms.values() for j in ctx.rollouts.jobs(tasks, cand, "test", 0, ctx.config.test_reps)
    ]
    records = [r for r, _ in ctx.rollouts.run(ctx.run.final, jobs)]
    by_arm = {
        name: (cand.hash, [r for r in records if r.candidate == cand.hash]) for name, cand in arms.items()
    }
    comparison = build_comparison(
        ctx.suite, "test", ctx.rollouts.backend.name, ctx.config.test_reps, ctx.config.metric, by_arm
    )
    comparison.write(ctx.run.comparison)
    return comparison
