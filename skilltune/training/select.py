"""How a step with several asks builds its candidate from its rules' screens (training/screen.py).

Selection (best on the screen, greedy): the rules that fixed more tasks than they broke, ranked by
their summed score change (then fewer broken, then ask order), join the candidate strongest first
while the step's edit budget and the growth cap allow. Chosen over a GEPA-style Pareto front of
proposals per task: the front keeps proposals for single tasks, which on a screen of a handful of
tasks with one replicate is mostly noise, and the gate pays for every rider.

Every kept rule earns its place: the candidate runs once more on the union of its rules' screen tasks
and fresh replicates, then backward elimination, weakest rule first: the candidate without the rule
runs on the same tasks (the base's train rollouts when none would be left), and the rule goes when
its removal helps over them all, or costs nothing over them all and nothing on the tasks it fixed on
its own screen. (Ties decided over all the tasks alone dropped right rules: with one replicate, a
rule that fixed two tasks of seven is often level with its absence by noise.) A bundle of one rule is
thereby confirmed on a draw that did not select it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skilltune.proposal import Edit
from skilltune.propose import PatchError, apply_patch, merge_edits
from skilltune.propose.edit import growth_problem
from skilltune.propose.merge import normal_form
from skilltune.runfiles import (
    LeaveOneOut,
    ProposalRecord,
    ProposalStatus,
    ScreenFigures,
    Selection,
    UnitDecision,
    UnitRecord,
)
from skilltune.skill import Candidate
from skilltune.stats import mean
from skilltune.suite import Task
from skilltune.training.context import RunContext
from skilltune.training.gating import precheck
from skilltune.training.proposals import Answered
from skilltune.training.rollouts import Records
from skilltune.training.screen import CONFIRM_OFFSET, Screen, Tried, unit_name
from skilltune.training.units import Unit

RULE = (
    "best on the screen: rules that fixed more train tasks than they broke, strongest first, within the "
    "edit budget; leave-one-out on fresh replicates drops a rule the candidate does as well without"
)


@dataclass(frozen=True)
class Choice:
    """What the screen made of a step's proposals: the candidate (None: nothing passed), its own edits,
    its figures against the skill it builds on, and the records for reflections.json."""

    candidate: Candidate | None
    edits: list[Edit]
    figures: ScreenFigures | None
    proposals: list[ProposalRecord]
    selection: Selection
    why_not: tuple[UnitDecision, str] | None  # no candidate: what decides the step (screen, empty) and why
    rollouts: int = 0  # the screen's rollouts (run, or found on disk by a resumed step)


def choose(
    ctx: RunContext,
    unit: Unit,
    base: Candidate,
    evidence: Records,
    batch: list[Task],
    answered: list[Answered],
    done: list[UnitRecord],
    shown: set[str],
) -> Choice:
    """Screen every distinct proposal, then build the candidate from those that fixed more than they broke."""
    screen = Screen(ctx, unit, base, evidence, batch)
    tried = [t for a in answered for t in _prepare(ctx, screen, a, base, done, shown)]
    _dedupe(tried)
    live = [t for t in tried if t.status is None and t.candidate is not None and t.tasks is not None]
    if live:
        ctx.progress.phase = "screen"
        scored = screen.run([(t.candidate, t.tasks) for t in live if t.candidate and t.tasks])
        for t, scores in zip(live, scored, strict=True):
            assert t.tasks is not None
            t.figures = screen.figures(scores, t.tasks)
            if t.figures is None or len(t.figures.fixed) <= len(t.figures.broke):
                f = t.figures
                t.status = "screened out"
                t.reason = (
                    "no train task scored" if f is None else f"fixed {len(f.fixed)}, broke {len(f.broke)}"
                )
    eligible = sorted(
        (t for t in tried if t.status is None and t.figures is not None),
        key=lambda t: (
            -(t.figures.gain if t.figures else 0.0),
            len(t.figures.broke) if t.figures else 0,
            t.index,
        ),
    )
    bundle = _bundle(ctx, unit, base, eligible)
    selection = Selection(rule=RULE)
    candidate, figures = None, None
    edits: list[Edit] = []
    if bundle:
        candidate, edits, figures, selection = _leave_one_out(screen, base, bundle, selection)
    for t in tried:
        if t.status is None:
            t.status = "kept"
    why = _why_not(tried) if candidate is None else None
    return Choice(candidate, edits, figures, [t.record() for t in tried], selection, why, screen.rollouts)


def _prepare(
    ctx: RunContext,
    screen: Screen,
    answered: Answered,
    base: Candidate,
    done: list[UnitRecord],
    shown: set[str],
) -> list[Tried]:
    """Each rule of the answer on its own (the base plus that edit), or why it is not screened."""
    if not answered.edits:
        status: ProposalStatus = "spent" if answered.spent else "no rule"
        reason = answered.spent[0].reason if answered.spent else _no_rule(answered)
        return [Tried(answered, [], status=status, reason=reason)]
    return [_rule(ctx, screen, answered, rule, base, done, shown) for rule in range(len(answered.edits))]


def _rule(
    ctx: RunContext,
    screen: Screen,
    answered: Answered,
    rule: int,
    base: Candidate,
    done: list[UnitRecord],
    shown: set[str],
) -> Tried:
    edit = answered.edits[rule]
    merged = merge_edits([edit], base, 1, known=shown)
    if not merged.kept:
        why = merged.dropped[0]["reason"] if merged.dropped else "no edit applies"
        return Tried(answered, [edit], rule, status="not applied", reason=why)
    try:
        candidate, edits = apply_patch(base, [merged.kept[0].edit])
    except PatchError as exc:
        return Tried(answered, [edit], rule, status="not applied", reason=f"patch did not apply: {exc}")
    problem = precheck(ctx, candidate, base, done)
    if problem is not None:
        status: ProposalStatus = "spent" if problem[0] == "repeat" else "not applied"
        return Tried(answered, edits, rule, candidate, status=status, reason=problem[1])
    return Tried(answered, edits, rule, candidate, tasks=screen.tasks_for(answered, edits))


def _no_rule(answered: Answered) -> str:
    last = answered.answers[-1]
    if "error" in last.notes:
        return str(last.notes["error"])
    if last.dropped:
        return f"every edit dropped by vet: {last.dropped[0].reason}"
    return "the answer held no edit"


def _dedupe(tried: list[Tried]) -> None:
    """A proposal whose candidate equals an earlier proposal's (after normalisation) is not screened."""
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    for t in tried:
        if t.status is not None or t.candidate is None:
            continue
        key = normal_form(t.candidate)
        if key in seen:
            t.status, t.reason = "spent", f"the same candidate as {seen[key]}"
        else:
            seen[key] = t.name


def _bundle(ctx: RunContext, unit: Unit, base: Candidate, eligible: list[Tried]) -> list[Tried]:
    """The eligible rules that fit, strongest first: the edit budget, one description, the growth cap."""
    budget = ctx.edit_budget.at(unit.index)
    bundle: list[Tried] = []
    edits: list[Edit] = []
    for t in eligible:
        trial = [*edits, *t.edits]
        problem = None
        if len(trial) > budget:
            problem = f"the step's edit budget ({budget}) is taken by stronger rules"
        elif sum(e.op == "description" for e in trial) > 1:
            problem = "a candidate takes one description (a stronger one is kept)"
        else:
            try:
                candidate, _ = apply_patch(base, trial)
                problem = growth_problem(candidate, base, ctx.config.growth_cap)
            except PatchError as exc:
                problem = f"does not apply beside stronger rules: {exc}"
        if problem is None:
            bundle.append(t)
            edits = trial
        else:
            t.status, t.reason = "over budget", problem
    return bundle


def _leave_one_out(
    screen: Screen, base: Candidate, bundle: list[Tried], selection: Selection
) -> tuple[Candidate | None, list[Edit], ScreenFigures | None, Selection]:
    """Backward elimination, weakest rule first, on the union of the bundle's screen tasks and fresh
    replicates (``CONFIRM_OFFSET``): the candidate runs once more, then without each rule in turn (the
    base's train rollouts when none would be left); a rule goes when its removal helps over those
    tasks, or costs nothing there and on the tasks it fixed on its own screen. A bundle of one rule is
    thereby confirmed on a draw that did not select it. None: no rule held up."""
    ids = {task.id for t in bundle for task in (t.tasks or [])}
    tasks = [t for t in screen.batch if t.id in ids]
    members = list(bundle)
    candidate, _ = apply_patch(base, [e for t in members for e in t.edits])
    current = screen.run([(candidate, tasks)], CONFIRM_OFFSET)[0]
    before = {k: v for k, v in screen.before.items() if k[1] in ids}
    steps: list[LeaveOneOut] = []
    for t in list(reversed(bundle)):
        rest = [m for m in members if m is not t]
        if rest:
            without, _ = apply_patch(base, [e for m in rest for e in m.edits])
            scores = screen.run([(without, tasks)], CONFIRM_OFFSET)[0]
        else:
            without, scores = base, before
        shared = [k for k in current if k in scores]
        with_mean = mean([current[k] for k in shared]) if shared else 0.0
        without_mean = mean([scores[k] for k in shared]) if shared else 0.0
        fixed = set(t.figures.fixed if t.figures else [])
        own = [k for k in shared if unit_name(k) in fixed]
        on_with = mean([current[k] for k in own]) if own else None
        on_without = mean([scores[k] for k in own]) if own else None
        costs_there = on_with is not None and on_without is not None and on_without < on_with
        dropped = without_mean > with_mean or (without_mean >= with_mean and not costs_there)
        steps.append(
            LeaveOneOut(
                edit=t.edits[0].compact() if t.edits else "",
                proposal=t.index,
                rule=t.rule,
                with_edit=round(with_mean, 6),
                without=round(without_mean, 6),
                fixed=[unit_name(k) for k in own],
                with_on_fixed=None if on_with is None else round(on_with, 6),
                without_on_fixed=None if on_without is None else round(on_without, 6),
                dropped=dropped,
            )
        )
        if dropped:
            members, candidate, current = rest, without, scores
            t.status, t.reason = "left out", "on fresh replicates the candidate did as well without it"
    if not members:
        return None, [], None, selection.model_copy(update={"leave_one_out": steps})
    figures = screen.figures(current, tasks)
    candidate, edits = apply_patch(base, [e for m in members for e in m.edits])
    kept = list(dict.fromkeys(m.index for m in members))
    return (
        candidate,
        edits,
        figures,
        selection.model_copy(update={"kept": kept, "screen": figures, "leave_one_out": steps}),
    )


def _why_not(tried: list[Tried]) -> tuple[UnitDecision, str]:
    """Why a step has no candidate: ``screen`` when proposals were screened, else ``empty``."""
    screened = [t for t in tried if t.figures is not None]
    if any(t.status == "left out" for t in tried):
        return "screen", "screen: no rule held up on fresh replicates (leave-one-out)"
    if screened:
        return "screen", f"screen: no rule fixed more train tasks than it broke ({len(screened)} screened)"
    if not tried:
        return "empty", "every train rollout of the batch passed: no failure to ask about"
    if tried and all(t.status == "spent" for t in tried):
        return "empty", f"every proposal repeats an edit already tried ({len(tried)} rules)"
    counts: dict[str, int] = {}
    for t in tried:
        counts[t.status or "?"] = counts.get(t.status or "?", 0) + 1
    return "empty", "no proposal to screen: " + (", ".join(f"{n} {s}" for s, n in counts.items()) or "no ask")
