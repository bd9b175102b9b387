"""Gates: should a candidate replace the incumbent? Decided on val, paired by task.

A gate is a strategy object. It asks the sampler for rounds of paired rollouts
(candidate and incumbent on the same val tasks, one new replicate per task and arm
each round; a training run's sampler may hand it incumbent rollouts an earlier
decision of the same incumbent ran) until it can decide. Decisions use complete rounds
only, in task order, so parallelism cannot change them. A round holding infra errors
or crashed rollouts is contaminated: no gate decides on it.

A training run's gate is a ``RunGate`` (training/rungate.py): the gate's options are checked
once, when the run is set up, and each decision's level comes from the run's error-control
policy (stats/alpha.py). Gates declare their options as a pydantic model, as agent backends do.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Protocol, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypeVar

from skilltune.errors import UsageError
from skilltune.metric import Metric, as_metric
from skilltune.plugins import Registry
from skilltune.rollout.tally import per_task_scores
from skilltune.runfiles import UNDECIDED, Decision, RolloutRecord, Round, Verdict
from skilltune.runfiles.units import PairedZStatistic, StrictStatistic
from skilltune.stats import mean, paired_differences, sample_sd, task_means, tasks_to_accept
from skilltune.validation import field_problems


class Sampler(Protocol):
    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        """Run round ``index``: (candidate records, incumbent records) on every val task."""


class GateOptions(BaseModel):
    """Options of a gate (none for the one-pass gates); unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")

    def smallest_gain(self) -> float | None:
        """The smallest gain on the gate metric the gate stops looking for (None: it names none)."""
        return None


def contaminated(records: list[RolloutRecord]) -> bool:
    return any(r.status in UNDECIDED for r in records)


# A gate's options type (its ``Options`` model); a bare ``Gate`` is a gate of whichever options.
GateOptionsT = TypeVar("GateOptionsT", bound=GateOptions, default=Any)


class Gate(ABC, Generic[GateOptionsT]):
    """``decide(sampler) -> Verdict``. Subclasses set ``name`` and their ``Options`` model, which
    they also name as the type parameter (``SequentialGate(Gate[SequentialOptions])``).

    ``Options`` holding an ``alpha`` field makes the gate's level the run's to set: a
    training run gives each decision its level from its error-control policy.
    """

    name: str
    Options: ClassVar[type[GateOptions]] = GateOptions

    def __init__(self, metric: Metric = "mixed", reps: int = 1, **settings: Any) -> None:
        self.metric = as_metric(metric)
        self.reps = reps
        # Val tasks whose drop is a trade-off rather than a harm: trigger tasks, each one query on the
        # boundary between loading and not loading, where a rewrite that wins many queries may lose a
        # few (the test of the mean weighs them). A per-task check (the harm veto) passes over them.
        self.trade_offs: frozenset[str] = frozenset()
        # Val units the harm veto pools before it looks (unit -> group): with several agents under
        # ``--agents-gate mean`` each task's units across the agents, so one agent's loss is weighed
        # against the others' gains on the same task, while a task that fell on every agent is vetoed.
        self.harm_groups: Mapping[str, str] = {}
        # Options and the type parameter name the same model (a ClassVar cannot hold a type parameter)
        self.options = cast(GateOptionsT, self.Options.model_validate(settings))

    @property
    def max_replicates(self) -> int:
        """Replicates per val task per arm a decision may use (the rollouts it may cost)."""
        return self.reps

    @abstractmethod
    def decide(self, sampler: Sampler) -> Verdict: ...

    def cannot_accept(self, tasks: int) -> str | None:
        """Why a decision on ``tasks`` val tasks could never accept, whatever the rollouts showed
        (it is then rejected without running any); None when it can."""
        return None

    def _one_pass(self, sampler: Sampler) -> tuple[Round, list[float], Verdict | None]:
        cand, inc = sampler.round(0, self.reps)
        rollouts = len(cand) + len(inc)
        a = task_means(per_task_scores(inc, self.metric))
        b = task_means(per_task_scores(cand, self.metric))
        paired = sorted(set(a) & set(b))  # a task one side failed to score says nothing about either
        diffs = paired_differences(a, b)
        rnd = Round(
            index=0,
            replicates=self.reps,
            candidate=round(mean([b[t] for t in paired]), 6) if paired else None,
            incumbent=round(mean([a[t] for t in paired]), 6) if paired else None,
            n_pairs=len(diffs),
            rollouts=rollouts,
        )
        early = None
        if contaminated(cand + inc):
            early = self._verdict(
                "contaminated", "infra errors remain in the gate batch after retries", [rnd]
            )
        elif not diffs:
            early = self._verdict("reject", "no val task was scored for both skills", [rnd])
        return rnd, diffs, early

    def _verdict(self, decision: Decision, reason: str, rounds: list[Round]) -> Verdict:
        last = rounds[-1]
        return Verdict(
            decision=decision,
            reason=reason,
            metric=self.metric,
            val_candidate=last.candidate,
            val_incumbent=last.incumbent,
            rounds=rounds,
            rollouts=sum(r.rollouts for r in rounds),
        )


class StrictGate(Gate[GateOptions]):
    """One pass over val; accept when the candidate's mean over the paired tasks is strictly greater.

    Cheap and noisy: on a pure-noise suite of 0/1 tasks it accepts about 40% of the steps.
    """

    name = "strict"

    def decide(self, sampler: Sampler) -> Verdict:
        rnd, diffs, early = self._one_pass(sampler)
        if early is not None:
            return early
        better = (rnd.candidate or 0.0) > (rnd.incumbent or 0.0)
        rnd.statistic = StrictStatistic(mean_diff=round(mean(diffs), 6))
        reason = f"val {rnd.candidate:.3f} vs {rnd.incumbent:.3f}"
        return self._verdict("accept" if better else "reject", reason, [rnd])


class PairedZGate(Gate[GateOptions]):
    """One pass; accept when the mean paired gain is at least 1.645 standard errors (>= 6 pairs)."""

    name = "paired-z"
    MIN_PAIRS = 6
    Z = 1.645

    def decide(self, sampler: Sampler) -> Verdict:
        rnd, diffs, early = self._one_pass(sampler)
        if early is not None:
            return early
        n = len(diffs)
        d = mean(diffs)
        se = sample_sd(diffs) / math.sqrt(n) if n else 0.0
        rnd.statistic = PairedZStatistic(
            mean_diff=round(d, 6), se=round(se, 6), z=None if se == 0 else round(d / se, 4)
        )
        if n < self.MIN_PAIRS:
            return self._verdict("reject", f"only {n} paired tasks (needs {self.MIN_PAIRS})", [rnd])
        accept = d > 0 and (se == 0 or d >= self.Z * se)
        reason = f"gain {d:+.3f}, se {se:.3f}" + (" >= 1.645 se" if accept else " below 1.645 se")
        return self._verdict("accept" if accept else "reject", reason, [rnd])


GATES: Registry[type[Gate]] = Registry("skilltune.gates", "gate")


def make_gate(name: str, metric: Metric, reps: int, **settings: Any) -> Gate:
    """The gate ``name`` with its options; unknown or invalid options are bad input."""
    cls = GATES.get(name)
    try:
        return cls(metric=metric, reps=reps, **settings)
    except ValidationError as exc:
        problems = field_problems(exc, model=cls.Options, noun=f"{name} gate option")
        raise UsageError("; ".join(problems)) from None


def gate_options(name: str, settings: dict[str, Any]) -> GateOptions | None:
    """A run's gate options with their defaults (None: the gate is not installed here, or they no
    longer suit it)."""
    cls = GATES.find(name)
    try:
        return cls.Options.model_validate(settings) if cls is not None else None
    except ValidationError:
        return None


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
