"""What a run's decision levels ask of its val split: notes and warnings for train and calibrate.

A task-level gate at level a needs at least log2(1 / a) improved val tasks (the smallest
sign-flip p-value of n tasks is 2^-n); a harm confined to a share h of the task population is
absent from n val tasks with chance (1 - h)^n, where no per-task check can see it.

A description edit on trigger queries is a trade-off: it wins some queries and loses a few, and an
agent that decides the same way every time adds nothing with replicates, so the number of val
queries is the only lever. With ``won`` queries won and ``lost`` lost (the others unchanged) the
sign-flip p is P(Binomial(won + lost, 1/2) >= won); ``trigger_size_notes`` turns that into the
queries a given net gain needs at the run's levels.
"""

from __future__ import annotations

import math

from skilltune.stats import tasks_to_accept


def val_size_notes(
    val_tasks: int, levels: list[float], alpha: float | None = None, agents: int = 1
) -> tuple[str, str | None]:
    """What a task-level gate at these decision levels asks of a val split of ``val_tasks`` tasks:
    a note, and a warning when some planned decisions can never keep an edit (with the run's
    ``alpha``, whether fewer planned steps would help at all). With several ``agents`` the gate's
    units are the (agent, task) pairs, so the counts are of units and the fix is in tasks."""
    if not levels:
        return "", None
    units = val_tasks * agents
    what = (
        f"{val_tasks} val tasks"
        if agents == 1
        else f"{units} (agent, task) units ({agents} agents x {val_tasks} val tasks)"
    )
    first, last = tasks_to_accept(levels[0]), tasks_to_accept(levels[-1])
    unit = "" if agents == 1 else " units"
    note = (
        f"gate: to be kept, an edit must improve at least {first} of the {what} (the others "
        f"unchanged) at the first decision's level ({levels[0]:.3g}), {last} at the last ({levels[-1]:.3g})"
    )
    blocked = [j + 1 for j, level in enumerate(levels) if tasks_to_accept(level) > units]
    if not blocked:
        return note, None
    which = f"decision {blocked[0]}" if len(blocked) == 1 else f"decisions {blocked[0]}-{blocked[-1]}"
    floor = f"levels below 2^-{units} = {2.0**-units:.3g}"
    needed = math.ceil(last / agents)
    fix = f"{needed} for every level of this run" + ("" if agents == 1 else f" with {agents} agents")
    if alpha is not None and tasks_to_accept(alpha) > units:
        # not even a run of one decision, which gets all of alpha, could keep anything
        return "", (
            f"warning: with {what} the gate cannot keep any edit at {which} of {len(levels)} "
            f"({floor}); even a single decision at the run's whole --alpha {alpha:g} needs "
            f"{tasks_to_accept(alpha)}{unit}: add val tasks ({fix})"
        )
    return note, (
        f"warning: with {what} the gate cannot keep any edit at {which} "
        f"of {len(levels)} ({floor}): add val tasks ({fix}) or plan fewer steps"
    )


def suite_size_notes(
    val_tasks: int, levels: list[float], alpha: float, vetoed: int | None = None, agents: int = 1
) -> list[str]:
    """What suite size a run at these decision levels needs: how many val tasks a rule must change,
    and how likely a harm confined to a share of the tasks is to be absent from the val split
    (``vetoed``: the val tasks the harm veto looks at, the body tasks; None: every one). With
    several ``agents`` a rule changes (agent, task) units, the gate's; the harm arithmetic stays in
    tasks (a task the split lacks is missing for every agent)."""
    if not levels or val_tasks < 1:
        return []
    first, last, k = tasks_to_accept(levels[0]), tasks_to_accept(levels[-1]), len(levels)
    units = val_tasks * agents
    noun = "val tasks" if agents == 1 else "(agent, task) units"
    share = (
        f"{first / units:.0%} to {last / units:.0%} of these {units}"
        if last <= units
        else f"these {units} {noun} are too few for {'any' if first > units else 'some'} of them"
    )
    keepable = (
        f"{4 * last} val tasks"
        if agents == 1
        else f"{math.ceil(4 * last / agents)} val tasks with {agents} agents"
    )
    size = (
        f"suite size: an edit is kept only if it changes at least {first} {noun} at this run's first "
        f"decision and {last} at its last ({share}); a rule that matters to a quarter of the tasks needs "
        f"{keepable} to be keepable at every decision"
    )
    checked = val_tasks if vetoed is None else vetoed
    if checked == 0:
        return [size, "harm: the val tasks are all trigger tasks, which the harm veto passes over (a request "
                "lost for many won is a trade-off the test of the mean weighs)"]  # fmt: skip
    miss = {h: (1 - h) ** checked for h in (0.1, 0.2)}
    need = {h: math.ceil(math.log(alpha / k) / math.log(1 - h)) for h in (0.1, 0.2)}
    harm = (
        f"harm: an edit that breaks 10% (20%) of the task population finds none of those tasks among "
        f"{checked} {'val' if vetoed is None else 'body'} tasks with chance {miss[0.1]:.0%} ({miss[0.2]:.1%}) per decision, where the harm "
        f"veto cannot see it; {need[0.1]} ({need[0.2]}) val tasks keep that under alpha {alpha:g} over "
        f"{k} decisions"
    )
    return [size, harm]


WON_PER_LOST = 3  # the trade-off the trigger note assumes: three val queries won for each one lost
DRAFT_HINT = "skilltune draft triggers"  # the command that drafts more queries (docs/trigger.md)


def trade_off_p(won: int, lost: int) -> float:
    """The one-sided sign-flip p of ``won`` queries won and ``lost`` lost, the others unchanged:
    P(Binomial(won + lost, 1/2) >= won), exact (the gate's test when replicates repeat)."""
    changed = won + lost
    if won <= lost:
        return 1.0
    return sum(math.comb(changed, k) for k in range(won, changed + 1)) / 2.0**changed


def _kept(gain: float, queries: int, level: float) -> bool:
    """Whether a net ``gain`` (a share of ``queries``) at WON_PER_LOST won per lost is kept at ``level``."""
    net = round(gain * queries)
    lost = round(net / (WON_PER_LOST - 1))
    return net >= 1 and trade_off_p(net + lost, lost) <= level


def queries_needed(gain: float, level: float, most: int = 10_000) -> int | None:
    """The fewest val queries with which a description edit of net ``gain`` (WON_PER_LOST queries won
    for each lost) is kept at ``level``, and keeps being kept with more (None: beyond ``most``)."""
    run, start = 0, None
    for n in range(1, most + 1):
        if _kept(gain, n, level):
            start = n if run == 0 else start
            run += 1
            if run == 5:  # rounding can let one size pass and the next fail: ask for five in a row
                return start
        else:
            run = 0
    return None


def smallest_kept_gain(queries: int, level: float) -> float | None:
    """The smallest net gain (in hundredths) ``queries`` val queries can keep at ``level`` (None: none)."""
    for hundredths in range(1, 101):
        if _kept(hundredths / 100, queries, level):
            return hundredths / 100
    return None


def trigger_size_notes(queries: int, levels: list[float], gain: float = 0.20, agents: int = 1) -> list[str]:
    """What trigger val queries a run at these decision levels needs: the smallest net gain these
    ``queries`` can keep at the first and last decision, the queries a net ``gain`` needs, and a
    pointer to the drafting command when they are too few. With several ``agents`` each
    query is a unit per agent (an agent that decides alike on every query multiplies the units)."""
    if not levels or queries < 1:
        return []
    units = queries * agents
    first, last = levels[0], levels[-1]

    def signed(g: float | None) -> str:
        return "none" if g is None else f"+{g:.2f}"

    need = (queries_needed(gain, first), queries_needed(gain, last))

    def per_agent(n: int | None) -> str:
        return "more than 10000" if n is None else str(math.ceil(n / agents))

    what = f"these {queries}" + ("" if agents == 1 else f" ({agents} agents: {units} units)")
    if first == last:
        at = f"from {signed(smallest_kept_gain(units, first))} at the decision's level ({first:.3g}); "
        needs = f"+{gain:.2f} needs {per_agent(need[0])} val queries"
    else:
        at = (
            f"from {signed(smallest_kept_gain(units, first))} at the first decision (level {first:.3g}), "
            f"{signed(smallest_kept_gain(units, last))} at the last ({last:.3g}); "
        )
        needs = f"+{gain:.2f} needs {per_agent(need[0])} val queries at the first, {per_agent(need[1])} at the last"
    lines = [
        f"trigger queries: at {WON_PER_LOST} val queries won for each one lost (an agent that decides alike "
        f"every time adds nothing with replicates: only queries add evidence), {what} keep a net gain {at}{needs}"
    ]
    if need[0] is not None and queries < math.ceil(need[0] / agents):
        lines.append(
            f"trigger queries: {queries} val queries are too few to keep a +{gain:.2f} trade-off at any "
            f"decision of this run: draft more ({DRAFT_HINT}, docs/trigger.md) and review them"
        )
    return lines
