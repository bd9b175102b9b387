"""The end of a run: the held-out comparison of the seed (S0) and the best skill, then TERMINAL.

``success``: the steps (or epochs) are done and best differs from S0; ``no-progress``:
nothing was kept, or ``patience`` discards in a row cut the run short (the comparison
still runs when something was kept before). comparison.json has the schema of
``skilltune compare``; the final rollouts live under ``final/``. Before TERMINAL, ``review``
writes audit.json and appends the run's findings entry (a kill in between re-runs it on
resume, and the findings bank appends each entry once).
"""

from __future__ import annotations

from skilltune.measure.compare import build_comparison, by_arm
from skilltune.measure.transfer import agent_comparisons
from skilltune.review.audit import audit_history
from skilltune.review.findings import record_findings
from skilltune.review.lineage import History
from skilltune.rundir import TerminalState
from skilltune.runfiles import Comparison, UnitRecord
from skilltune.skill import Candidate
from skilltune.textfmt import count, fmt
from skilltune.training.budget import BudgetExhausted, records_run
from skilltune.training.context import RunContext
from skilltune.training.gating import write_best
from skilltune.training.units import incumbent

_SHOWN = 10  # audit findings printed at the end of a run; audit.json holds them all


def finish(ctx: RunContext, done: list[UnitRecord], stopped_early: bool) -> None:
    best = incumbent(ctx.run, done, ctx.seed)
    write_best(ctx, best)
    kept = sum(1 for r in done if r.verdict == "keep")
    steps = sum(1 for r in done if r.kind == "step")
    if best.hash == ctx.seed.hash:
        why = f"{ctx.config.patience} discards in a row" if stopped_early else f"{steps} steps, nothing kept"
        review(ctx, "no-progress", why)
        ctx.run.write_terminal("no-progress", why)
        return
    reason = f"{count(steps, 'step')}, {kept} kept; best {best.short}"
    if ctx.suite.has_split("test"):
        ctx.progress.phase = "test"
        ctx.budget.check(ctx.run, ctx.plan.final, len(records_run(ctx.run.final)))
        with ctx.stage("final", "compare") as info:
            comparison = final_comparison(ctx, best)
            info["rollouts"] = sum(a.n_rollouts for a in comparison.arms.values())
        reason += "; " + headline(comparison)
    state: TerminalState = "success"
    if stopped_early:
        state, reason = "no-progress", f"{ctx.config.patience} discards in a row after {reason}"
    review(ctx, state, reason)
    ctx.run.write_terminal(state, reason)


def headline(comparison: Comparison) -> str:
    """``test hard S0 0.500 -> best 0.929 (b_better)``: the arms' scores on the comparison's metric,
    the one it names (TERMINAL's line, which the CLI, report, status and findings show)."""
    pair = comparison.pairs[0]
    a, b = (comparison.arms[arm].metric(comparison.metric) for arm in (pair.a, pair.b))
    return f"{comparison.split} {comparison.metric} {pair.a} {fmt(a)} -> {pair.b} {fmt(b)} ({pair.verdict})"


def test_before_exhausted(ctx: RunContext, done: list[UnitRecord], exhausted: BudgetExhausted) -> None:
    """A run whose budget cannot pay for its next unit still tests the best skill kept so far when
    the budget covers the held-out test (a rollout budget short of a unit, not of the test): it
    raises ``exhausted`` again with the test's headline. Returns when there is nothing to test (no
    keep, no test split) or the budget does not cover it; TERMINAL then says exhausted as before.
    A resume that keeps more tests again (``final_comparison`` redoes a memo of another best)."""
    best = incumbent(ctx.run, done, ctx.seed)
    if best.hash == ctx.seed.hash or not ctx.suite.has_split("test"):
        return
    try:
        ctx.budget.check(ctx.run, ctx.plan.final, len(records_run(ctx.run.final)))
    except BudgetExhausted:
        return
    ctx.progress.phase = "test"
    with ctx.stage("final", "compare") as info:
        comparison = final_comparison(ctx, best)
        info["rollouts"] = sum(a.n_rollouts for a in comparison.arms.values())
    raise BudgetExhausted(f"{exhausted}; the best so far tested: {headline(comparison)}") from None


def final_comparison(ctx: RunContext, best: Candidate) -> Comparison:
    """S0 and best on test with ``test_reps`` replicates (comparison.json is its memo, unless it
    tested another best: a run tested when its budget ran out, then resumed and kept more). With several
    agents, first each one's comparison and the skill x agent table (``final/<label>/comparison.json``,
    ``final/transfer.json``, as ``skilltune compare`` writes them); comparison.json pairs the units."""
    if ctx.run.comparison.is_file():
        memo = Comparison.read(ctx.run.comparison)
        tested = memo.arms.get("best")
        if tested is not None and tested.skill_hash == best.hash:
            return memo
    arms = {"S0": ctx.seed, "best": best}
    tasks = ctx.suite.tasks("test")
    jobs = [
        j for cand in arms.values() for j in ctx.rollouts.jobs(tasks, cand, "test", 0, ctx.config.test_reps)
    ]
    records = [r for r, _ in ctx.rollouts.run(ctx.run.final, jobs)]
    c = ctx.config
    if ctx.rollouts.labels:
        mine = {label: [r for r in records if r.target == label] for label in ctx.rollouts.labels}
        agent_comparisons(
            ctx.rollouts.rollout_session, arms, "test", c.test_reps, c.metric, mine, ctx.run.final
        )
    comparison = build_comparison(
        ctx.suite, "test", ctx.rollouts.agent, c.test_reps, c.metric, by_arm(arms, records),
        ctx.rollouts.units(tasks),
    )  # fmt: skip
    comparison.write(ctx.run.comparison)
    return comparison


def review(ctx: RunContext, state: TerminalState, reason: str) -> None:
    """audit.json, then the findings entry (RUNDIR/findings.md and the --findings file).

    Neither changes how the run ended: a finding is printed as a warning, and a failure here
    is reported, never raised (raising would turn a finished run into a crash that every
    resume repeats)."""
    where = ctx.run.root
    try:
        audit = audit_history(History.read(ctx.run), ctx.suite)
    except Exception as exc:
        ctx.reporter.line(
            f"warning: the audit failed ({type(exc).__name__}: {exc}); `skilltune audit {where}`"
        )
    else:
        for finding in audit.findings[:_SHOWN]:
            ctx.reporter.line(f"warning: audit {finding.check}: {finding.where}: {finding.message}")
        more = len(audit.findings) - _SHOWN
        tail = f" ({more} more)" if more > 0 else ""
        ctx.reporter.line(
            f"audit: {len(audit.findings)} finding(s){tail}, see `skilltune audit {where}`"
            if audit.findings
            else "audit: clean (audit.json)"
        )
    try:
        appended = record_findings(where, ctx.config.findings, ending=(state, reason))
    except Exception as exc:
        ctx.reporter.line(f"warning: the findings entry was not written ({type(exc).__name__}: {exc})")
    else:
        if appended:
            ctx.reporter.line(f"findings: appended to {', '.join(str(p) for p in appended)}")
