"""The training loop: the seed's baseline on val, every unfinished unit in order, then the end.

rollout -> reflect -> merge -> edit -> lint -> [screen] -> gate -> keep / reset, one unit
at a time. Every unit writes its outputs to its own folder, atomically and stage by stage;
resuming re-enters the first unfinished unit and skips every stage whose output is on
disk; every random choice is derived from (seed, unit, purpose). So a run killed at any
instant ends exactly as an uninterrupted one. Decisions live in strategy objects (the
gate, the edit budget, the proposer); this module only sequences them.
"""

from __future__ import annotations

from skilltune.errors import UsageError
from skilltune.gate import suite_size_notes, trigger_size_notes, val_size_notes
from skilltune.propose.reflect import render_memory
from skilltune.rollout.tally import accuracy
from skilltune.runfiles import CARRIED, UnitRecord
from skilltune.store import write_text
from skilltune.suite import load_suite
from skilltune.textfmt import fmt
from skilltune.training.budget import BudgetExhausted, records_run
from skilltune.training.context import RunContext
from skilltune.training.epoch import run_epoch_update
from skilltune.training.final import finish, test_before_exhausted
from skilltune.training.session import BlockedError
from skilltune.training.step import run_step
from skilltune.training.units import best_val, discard_streak, finished


def execute(ctx: RunContext) -> None:
    """Run the session: every unfinished unit, then the end; every ending writes TERMINAL."""
    ctx.session.run_work(lambda: _run_units(ctx), lambda: ctx.progress.session_rollouts)


def _run_units(ctx: RunContext) -> None:
    ctx.repo.ensure(ctx.seed)
    ctx.repo.clean()
    _check_suite(ctx)
    ctx.progress.seed_val = _baseline(ctx)
    _warn_regime(ctx, ctx.progress.seed_val)
    _warn_val_size(ctx)
    done = finished(ctx.run, ctx.order)
    _refresh(ctx, done)  # a kill between a unit's record and these files loses nothing
    stopped_early = False
    for unit in ctx.order[len(done) :]:
        if discard_streak(done) >= ctx.config.patience:
            stopped_early = True
            break
        ctx.session.check_stop()
        _check_suite(ctx)
        need = ctx.plan.step if unit.kind == "step" else ctx.plan.epoch
        try:
            ctx.budget.check(ctx.run, need, len(records_run(unit.folder(ctx.run))))
        except BudgetExhausted as exc:
            test_before_exhausted(ctx, done, exc)  # the held-out test of what was kept, if affordable
            raise
        record = run_step(ctx, unit, done) if unit.kind == "step" else run_epoch_update(ctx, unit, done)
        done.append(record)
        _refresh(ctx, done)
        _report_unit(ctx, record)
    finish(ctx, done, stopped_early)


def _check_suite(ctx: RunContext) -> None:
    try:
        current = load_suite(
            ctx.config.suite, prompt_variant=ctx.config.prompt_variant, judge_options=ctx.config.judge_options
        ).content_hash
    except UsageError as exc:
        raise BlockedError(f"the suite at {ctx.config.suite} can no longer be read: {exc}") from None
    if current != ctx.suite_hash:
        raise BlockedError(
            f"the suite at {ctx.config.suite} changed under the run "
            f"(content hash {current[:12]}, the run started with {ctx.suite_hash[:12]})"
        )


def _baseline(ctx: RunContext) -> float | None:
    """The seed on val once, before any step: the regime warning and the seed's val score."""
    with ctx.stage("step_0000", "baseline") as info:
        jobs = ctx.rollouts.jobs(ctx.suite.tasks("val"), ctx.seed, "eval", 0, ctx.config.reps)
        records = ctx.rollouts.run(ctx.run.unit_dir("step", 0), jobs)
        info["rollouts"] = len(records)
    return accuracy([r for r, _ in records], ctx.config.metric)


def _warn_regime(ctx: RunContext, seed_val: float | None) -> None:
    if seed_val is None or 0.3 <= seed_val <= 0.8:
        return
    if seed_val > 0.8:
        regime, fix = "saturated (above 0.8)", "use harder tasks or restrict the agent's tools"
    else:
        regime, fix = (
            "too hard (below 0.3)",
            "check the scorer on a known-good output (skilltune smoke), give the agent the tools the tasks "
            "need, or split tasks into smaller ones",
        )
    ctx.reporter.line(
        f"warning: the seed's val {ctx.config.metric} is {seed_val:.3f}, {regime}: a gate on it can hardly "
        f"tell skills apart; {fix} (see skilltune calibrate)"
    )


def _warn_val_size(ctx: RunContext) -> None:
    """What the gate's levels ask of the val split, and a warning when it is too small for some."""
    if not ctx.gate.leveled:
        return
    levels = ctx.gate.run_alpha.planned_levels()
    agents = len(ctx.rollouts.targets)  # several agents: the gate's units are (agent, task) pairs
    note, warning = val_size_notes(len(ctx.suite.tasks("val")), levels, ctx.gate.run_alpha.alpha, agents)
    if note:
        ctx.reporter.line(note)
    val = ctx.suite.tasks("val")
    trigger = sum(ctx.suite.scoring_mode(t) == "trigger" for t in val)
    vetoed = len(val) - trigger if trigger else None
    for line in suite_size_notes(len(val), levels, ctx.gate.run_alpha.alpha, vetoed, agents):
        ctx.reporter.line(line)
    if trigger and (ctx.config.component != "body" or trigger == len(val)):
        for line in trigger_size_notes(trigger, levels, agents=agents):
            ctx.reporter.line(line)
    if warning:
        ctx.reporter.line(warning)


def _refresh(ctx: RunContext, done: list[UnitRecord]) -> None:
    """Rebuild results.tsv, META.md and the live view from the unit records."""
    ctx.run.write_results(done)
    write_text(ctx.run.meta, render_memory(done))
    ctx.progress.best_val = best_val(done, ctx.progress.seed_val)
    if done:
        ctx.progress.last_verdict = f"{done[-1].kind} {done[-1].index}: {done[-1].verdict}"
    ctx.reporter.update(ctx.progress)


def _report_unit(ctx: RunContext, last: UnitRecord) -> None:
    vals = (
        f"val {fmt(last.val_candidate)} vs {fmt(last.val_incumbent)}"
        if last.val_candidate is not None
        else last.reason
    )
    # a carried step's reason says so ("carried on ungated: train a > b"): not "carried, carried on ..."
    said = last.reason if last.carried_on and last.reason.startswith(CARRIED) else f"{last.verdict}, {vals}"
    ctx.reporter.line(f"{last.kind} {last.index} (epoch {last.epoch}): {said}; {len(last.edits)} edit(s)")
