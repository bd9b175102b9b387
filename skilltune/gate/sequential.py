"""The sequential gate: a task-level group-sequential sign-flip test, with early stops and a harm veto.

A gate (gate/base.py's ``Gate``) asks a sampler for rounds of paired rollouts; this one
decides after each round with ``stats.SequentialTest`` (accept when the path crosses the
alpha-spending boundary, futility, cap), stops early when no later round can change the
decision (stats/rounds.py), and holds a keep back while a val task fell by more than a
tolerance with confidence (gate/veto.py on stats/harm.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from skilltune.gate.base import Gate, GateOptions, Sampler, contaminated
from skilltune.gate.veto import HarmScope, HarmVeto
from skilltune.metric import Metric
from skilltune.rollout.tally import unit_of
from skilltune.runfiles import Decision, HarmCheck, Pair, RolloutRecord, Round, Verdict
from skilltune.runfiles.units import SignFlipStatistic
from skilltune.stats import SequentialTest, mean, tasks_to_accept
from skilltune.stats.rounds import all_repeat, open_tasks


class SequentialOptions(GateOptions):
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5, description="the decision's level")
    max_reps: int = Field(default=8, ge=1, description="replicates per val task per arm at most")
    min_effect: float = Field(default=0.10, description="futility: the smallest gain worth keeping")
    futility_confidence: float = Field(default=0.85, gt=0.0, lt=1.0)
    futility_from: int = Field(default=1, ge=1, description="replicates per task before futility may stop")
    rho: float = Field(default=2.0, gt=0.0, description="power-family spending exponent")
    seed: int = Field(default=0, description="seed of the Monte Carlo reference (many tasks only)")
    stop_on_repeat: bool = Field(
        default=True,
        description="reject once further rounds cannot change the decision: every task's replicates "
        "repeat exactly and p is above the level, or too few tasks are left that have not repeated a tie",
    )
    harm_tolerance: float = Field(
        default=0.5,
        gt=0.0,
        le=2.0,
        description="a val task that loses more than this share of its incumbent score (and more than "
        "harm_floor) with confidence blocks a keep (above 1: off)",
    )
    harm_floor: float = Field(
        default=0.1, ge=0.0, le=1.0, description="the smallest fall of a task's score the harm veto counts"
    )
    harm_confidence: float = Field(default=0.9, gt=0.5, lt=1.0, description="confidence of the harm veto")

    def smallest_gain(self) -> float | None:
        return self.min_effect


class SequentialGate(Gate[SequentialOptions]):
    """Task-level group-sequential sign-flip test with early accept, futility stop and a cap.

    Each round adds one replicate per val task per arm. After round k, each task's
    difference is the mean over its paired rounds of candidate minus incumbent (the task is
    the unit: its replicates are averaged first); the sum over tasks is compared with its
    values when tasks' signs are flipped (the same flips at every round: all of them for up
    to 16 tasks, seeded ones beyond), and the candidate is accepted when its path crosses
    the boundary that spends ``alpha`` over ``max_reps`` rounds as
    ``alpha * (k / max_reps) ** rho`` (stats.SequentialTest). It is rejected for futility
    once, after ``futility_from`` replicates, the one-sided ``futility_confidence`` upper
    bound of the mean gain falls below ``min_effect``, and at the cap otherwise; with
    ``stop_on_repeat`` also as soon as no later round can change the decision
    (stats/rounds.py). Once the path has crossed, the harm veto (gate/veto.py) rejects when
    a val task lost more than ``harm_tolerance`` of its score (and more than ``harm_floor``) with
    confidence, and runs another round, while rounds remain, when a task fell that far without
    confidence yet (``scope``, the decision's ``HarmScope``, names the trigger tasks, which are
    not vetoed one by one: the mean weighs a query won against one lost). Each round records
    every task's pair of replicates and scores.

    Defaults (documented in the README): ``alpha`` is set per decision by the run's
    error-control policy (0.05 for a lone decision); ``max_reps`` 8; ``min_effect`` 0.10 on
    the gate metric; ``futility_confidence`` 0.85 from the first replicate; ``rho`` 2;
    ``harm_tolerance`` 0.5 (half the task's score), ``harm_floor`` 0.1, ``harm_confidence`` 0.9.
    """

    name = "sequential"
    Options = SequentialOptions

    def __init__(
        self, metric: Metric = "mixed", reps: int = 1, scope: HarmScope | None = None, **settings: Any
    ) -> None:
        super().__init__(metric, reps, **settings)
        self.alpha = self.options.alpha
        self.max_reps = self.options.max_reps
        o = self.options
        self.veto = HarmVeto(
            o.harm_tolerance, o.harm_confidence, o.harm_floor, o.max_reps, scope or HarmScope()
        )

    @property
    def max_replicates(self) -> int:
        return self.max_reps

    def test(self, tasks: int) -> SequentialTest:
        o = self.options
        return SequentialTest(
            o.alpha, tasks, o.max_reps, o.min_effect, o.futility_confidence, o.rho, o.futility_from, o.seed
        )

    def cannot_accept(self, tasks: int) -> str | None:
        floor = 2.0**-tasks
        if floor <= self.alpha:
            return None
        return (
            f"cannot accept: with {tasks} val task(s) the smallest sign-flip p is 2^-{tasks} = {floor:.3g}, "
            f"above this decision's level {self.alpha:.3g} (it needs {tasks_to_accept(self.alpha)} val tasks); "
            "no rollout was run"
        )

    def decide(self, sampler: Sampler) -> Verdict:
        test: SequentialTest | None = None
        by_task: dict[str, list[Pair]] = {}
        rounds: list[Round] = []
        for k in range(self.max_reps):
            cand, inc = sampler.round(k, 1)
            pairs = _pairs(cand, inc, self.metric)
            for pair in pairs:
                by_task.setdefault(pair.task, []).append(pair)
            if test is None:  # the design's tasks: every val task the first round asked for
                test = self.test(len(by_task))
            means = {task: _task_means(got) for task, got in sorted(by_task.items())}
            scored = {task: m for task, m in means.items() if m is not None}
            diffs = [None if m is None else m[1] - m[0] for m in means.values()]
            outcome, look = test.look(k, diffs)
            stat = SignFlipStatistic.model_validate(look)
            rounds.append(
                Round(
                    index=k,
                    replicates=k + 1,
                    candidate=round(mean([b for _, b in scored.values()]), 6) if scored else None,
                    incumbent=round(mean([a for a, _ in scored.values()]), 6) if scored else None,
                    n_pairs=len(scored),
                    rollouts=len(cand) + len(inc),
                    statistic=stat,
                    pairs=pairs,
                )
            )
            if contaminated(cand + inc):
                return self._verdict(
                    "contaminated", "infra errors remain in the gate batch after retries", rounds
                )
            gain = stat.mean_gain
            where = f"after {k + 1} replicate(s) of {len(scored)} task(s)"
            if outcome == "accept":
                crossed = (
                    f"crossed the sign-flip boundary (alpha {self.alpha:.3g}, p {stat.p:.3g} at this round)"
                )
                check, waiting = self.veto.check(by_task, k + 1)
                blocked = self.veto.blocks(check)
                if blocked is not None:
                    return self._verdict(
                        "reject",
                        f"harm veto {where}: gain {gain:+.3f} {crossed}, but {blocked}",
                        rounds,
                        check,
                    )
                if waiting and k + 1 < self.max_reps:
                    continue  # another round may tell a task's fall from replicate noise
                return self._verdict(
                    "accept", f"gain {gain:+.3f} {where}: {crossed}{self.veto.doubt(check)}", rounds, check
                )
            if outcome == "futility":
                return self._verdict(
                    "reject",
                    f"futility {where}: gain {gain:+.3f}, upper bound {stat.upper:+.3f} "
                    f"< {self.options.min_effect}",
                    rounds,
                )
            if outcome == "cap":
                return self._verdict(
                    "reject", f"undecided at the cap of {self.max_reps} replicates (gain {gain:+.3f})", rounds
                )
            if self.options.stop_on_repeat and k >= 1:
                stop = self._cannot_change(by_task, stat.p, where, gain)
                if stop is not None:
                    return self._verdict("reject", stop, rounds)
        raise AssertionError("the sequential test always decides by its last look")

    def _cannot_change(self, by_task: dict[str, list[Pair]], p: float, where: str, gain: float) -> str | None:
        """Why no later round can make this decision accept (stats/rounds.py), or None."""
        scores = {task: [(q.incumbent, q.candidate) for q in got] for task, got in by_task.items()}
        if all_repeat(scores) and p > self.alpha:
            # Every later round would bring the same differences, so the same p.
            return (
                f"replicates repeat exactly {where}: more rounds cannot change the differences, and p "
                f"{p:.3g} is above the decision's level {self.alpha:.3g} (gain {gain:+.3f})"
            )
        left = open_tasks(scores)
        if 2.0**-left > self.alpha:
            return (
                f"{len(scores) - left} task(s) tied in every round {where}: the {left} other(s) can give a "
                f"p of 2^-{left} = {2.0**-left:.3g} at best, above the decision's level {self.alpha:.3g} "
                f"(gain {gain:+.3f})"
            )
        return None

    def _verdict(
        self, decision: Decision, reason: str, rounds: list[Round], check: HarmCheck | None = None
    ) -> Verdict:
        return (
            super()._verdict(decision, reason, rounds).model_copy(update={"test": "signflip", "harm": check})
        )


def _pairs(cand: list[RolloutRecord], inc: list[RolloutRecord], metric: Metric) -> list[Pair]:
    """One pair per unit (task, or (agent, task)) of a round, in unit order: the two arms' replicate
    and score, named as the files name the unit."""
    a = {unit_of(r): r for r in inc}
    b = {unit_of(r): r for r in cand}
    return [
        Pair(
            task=str(unit),
            candidate_replicate=b[unit].replicate,
            incumbent_replicate=a[unit].replicate,
            candidate=_metric(b[unit], metric),
            incumbent=_metric(a[unit], metric),
        )
        for unit in sorted(set(a) & set(b))
    ]


def _metric(record: RolloutRecord, metric: Metric) -> float | None:
    return record.score.metric(metric) if record.score is not None else None


def _task_means(pairs: list[Pair]) -> tuple[float, float] | None:
    """A task's (incumbent, candidate) means over the rounds both arms scored (None: none)."""
    both = [(p.incumbent, p.candidate) for p in pairs if p.incumbent is not None and p.candidate is not None]
    if not both:
        return None
    return mean([a for a, _ in both]), mean([b for _, b in both])
