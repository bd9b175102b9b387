"""Statistics for paired comparisons of skills: t-intervals, and the sequential sign-flip test.

The unit of analysis is the task: replicates of one task are averaged first (they are
nested in the task), then tasks are paired across arms. A verdict is then about the
population of tasks the split samples, not about the replicates of the tasks at hand.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

# What tasks are keyed by: a task id, or a gate's (agent, task) unit (rollout/tally.py's ``Unit``)
Key = TypeVar("Key", bound="SupportsRichComparison")

ZERO = 1e-12  # a per-task difference this small is float noise around an exact zero


@dataclass(frozen=True)
class PairedResult:
    n: int
    diff: float  # mean of b - a over paired tasks
    se: float | None
    ci95: tuple[float, float] | None
    p_value: float | None  # two-sided paired t-test

    @property
    def verdict(self) -> str:
        if self.ci95 is None:
            return "no_difference"
        lo, hi = self.ci95
        if lo > 0:
            return "b_better"
        if hi < 0:
            return "a_better"
        return "no_difference"


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def task_means(per_task: Mapping[Key, Sequence[float | None]]) -> dict[Key, float]:
    """Each task's mean over its scored replicates (tasks with none are left out)."""
    out = {}
    for task, scores in per_task.items():
        got = [s for s in scores if s is not None]
        if got:
            out[task] = mean(got)
    return out


def paired_differences(a: Mapping[Key, float], b: Mapping[Key, float]) -> list[float]:
    """b - a for every task both arms scored, in task order (a gate's units: in their names' order)."""
    return [b[t] - a[t] for t in sorted(set(a) & set(b))]


def sample_variance(values: Sequence[float]) -> float:
    """The unbiased sample variance (n - 1 in the denominator), 0.0 below two values. The one
    place skilltune computes it: every sd and variance it reports (tasks, gates, the judge)."""
    if len(values) < 2:
        return 0.0
    centre = mean(values)
    return math.fsum((x - centre) ** 2 for x in values) / (len(values) - 1)


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation: the square root of ``sample_variance``."""
    return math.sqrt(sample_variance(values))


def paired_t(diffs: Sequence[float], confidence: float = 0.95) -> PairedResult:
    """t-interval and two-sided p-value for the mean of paired differences."""
    n = len(diffs)
    if n == 0:
        return PairedResult(0, 0.0, None, None, None)
    d = mean(diffs)
    if n < 2:
        return PairedResult(n, d, None, None, None)
    se = sample_sd(diffs) / math.sqrt(n)
    if se <= ZERO * max(1.0, abs(d)):
        # Every task moved by exactly the same amount: no sampling uncertainty left to report.
        p = 1.0 if d == 0 else 0.0
        return PairedResult(n, d, 0.0, (d, d), p)  # float noise in the mean is not uncertainty
    from scipy import stats as sps

    q = float(sps.t.ppf(0.5 + confidence / 2, n - 1))
    t = d / se
    p = float(2 * sps.t.sf(abs(t), n - 1))
    return PairedResult(n, d, se, (d - q * se, d + q * se), p)


def p_below_zero(diffs: Sequence[float]) -> float | None:
    """The one-sided p-value that the mean of ``diffs`` is below 0: scipy's one-sample t-test
    (``alternative="less"``); None below two differences. Differences all equal leave the
    t-test nothing to measure: 0 when they are negative, 1 when positive, 0.5 when zero."""
    n = len(diffs)
    if n < 2:
        return None
    d = mean(diffs)
    if sample_sd(diffs) / math.sqrt(n) <= ZERO * max(1.0, abs(d)):
        return 0.0 if d < 0 else 1.0 if d > 0 else 0.5
    from scipy import stats as sps

    return float(sps.ttest_1samp(diffs, 0.0, alternative="less").pvalue)


# --- the sequential sign-flip test ---------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _t_isf(q: float, df: int) -> float:
    from scipy import stats as sps

    return float(sps.t.isf(q, df))


def upper_bound(diffs: Sequence[float], confidence: float) -> float:
    """One-sided t upper confidence bound of the mean of per-task differences (inf below 2 tasks)."""
    n = len(diffs)
    if n < 2:
        return math.inf
    d = mean(diffs)
    sd = sample_sd(diffs)
    if sd <= ZERO * max(1.0, abs(d)):
        return d
    return d + _t_isf(1 - confidence, n - 1) * sd / math.sqrt(n)


def tasks_to_accept(alpha: float) -> int:
    """The fewest tasks that must all improve (the others unchanged) before the sequential sign-flip
    test can accept at level ``alpha``: the smallest p-value of m changed tasks is 2^-m."""
    return max(1, math.ceil(math.log2(1.0 / alpha) - 1e-9))


class SequentialTest:
    """The task-level group-sequential sign-flip test behind the ``sequential`` gate (no records).

    ``look(k, diffs)`` is called after each look k = 0, 1, ... in order, with one difference
    per task of the design: candidate minus incumbent, the task's replicates so far averaged
    (the task is the unit), None for a task not yet scored by both arms (it adds nothing). Every look's statistic is the sum of the differences; the reference is the
    same set of sign vectors at every look (``signflip.Reference``: all of them for few
    tasks, else seeded ones); by look k at most ``alpha * (k / max_looks) ** rho`` of the
    reference may have crossed (``signflip.Crossings``), and the candidate is accepted when
    the observed path crosses. Answers ``accept``, ``futility`` (from ``futility_from``
    replicates on, the one-sided ``futility_confidence`` t upper bound of the mean gain is
    below ``min_effect``), ``cap`` (the last look passed undecided) or None (look again).

    Validity: under sign symmetry of the per-task differences (on each task the arms are
    exchangeable, or the tasks' effects are symmetric about zero) the chance of accepting
    is at most ``alpha`` at every level and task count, however the looks correlate;
    futility never accepts, so it only lowers it. The smallest p-value of n tasks is 2^-n:
    equal differences on every task accept once 2^-n fits the look's share, never before.
    """

    def __init__(
        self,
        alpha: float,
        tasks: int,
        max_looks: int = 8,
        min_effect: float = 0.10,
        futility_confidence: float = 0.85,
        rho: float = 2.0,
        futility_from: int = 1,
        seed: int = 0,
    ) -> None:
        from skilltune.stats.signflip import Crossings, Reference, budgets

        self.alpha = alpha
        self.max_looks = max_looks
        self.min_effect = min_effect
        self.futility_confidence = futility_confidence
        self.futility_from = futility_from
        self.reference = Reference(tasks, alpha, seed)
        self.budgets = budgets(alpha, max_looks, rho, self.reference.size)
        self.crossings = Crossings(self.reference.size)

    def look(self, k: int, diffs: Sequence[float | None]) -> tuple[str | None, dict[str, Any]]:
        import numpy as np

        from skilltune.stats.signflip import lattice, p_value

        if len(diffs) != self.reference.tasks:
            raise ValueError(f"the test was designed for {self.reference.tasks} tasks, got {len(diffs)}")
        q = lattice(np.asarray([0.0 if d is None else d for d in diffs], dtype=np.float64))
        crossed = self.crossings.look(self.reference.values(q), self.budgets[k])
        scored = [d for d in diffs if d is not None]
        n = len(scored)
        gain = mean(scored) if n else 0.0
        upper = upper_bound(scored, self.futility_confidence)
        info: dict[str, Any] = {
            "alpha": self.alpha,
            "tasks": n,
            "nonzero": int(np.count_nonzero(q)),
            "mean_gain": round(gain, 6),
            "sd": None if n < 2 else round(sample_sd(scored), 6),
            "p": float(f"{p_value(q):.6g}"),
            "crossed": self.crossings.count,
            "budget": self.budgets[k],
            "reference": self.reference.size,
            "upper": None if math.isinf(upper) else round(upper, 6),
        }
        if crossed:
            return "accept", info
        if k + 1 >= self.futility_from and upper < self.min_effect:
            return "futility", info
        return ("cap" if k + 1 >= self.max_looks else None), info
