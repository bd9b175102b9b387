"""Statistics for paired comparisons of skills.

The unit of analysis is the task: replicates of one task are averaged first
(they are nested in the task), then tasks are paired across arms. With 8-20
tasks a t-interval on the per-task mean differences keeps its coverage.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


def task_means(per_task: Mapping[str, Sequence[float | None]]) -> dict[str, float]:
    """Each task's mean over its scored replicates (tasks with none are left out)."""
    out = {}
    for task, scores in per_task.items():
        got = [s for s in scores if s is not None]
        if got:
            out[task] = mean(got)
    return out


def paired_differences(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """b - a for every task both arms scored, in task-id order."""
    return [b[t] - a[t] for t in sorted(set(a) & set(b))]


def paired_t(diffs: Sequence[float], confidence: float = 0.95) -> PairedResult:
    """t-interval and two-sided p-value for the mean of paired differences."""
    n = len(diffs)
    if n == 0:
        return PairedResult(0, 0.0, None, None, None)
    d = mean(diffs)
    if n < 2:
        return PairedResult(n, d, None, None, None)
    sd = math.sqrt(math.fsum((x - d) ** 2 for x in diffs) / (n - 1))
    se = sd / math.sqrt(n)
    if se <= 1e-12 * max(1.0, abs(d)):
        # Every task moved by exactly the same amount: no sampling uncertainty left to report.
        p = 1.0 if d == 0 else 0.0
        return PairedResult(n, d, 0.0, (d, d), p)  # float noise in the mean is not uncertainty
    from scipy import stats as sps

    q = float(sps.t.ppf(0.5 + confidence / 2, n - 1))
    t = d / se
    p = float(2 * sps.t.sf(abs(t), n - 1))
    return PairedResult(n, d, se, (d - q * se, d + q * se), p)


@functools.lru_cache(maxsize=256)
def group_sequential_bounds(alpha: float, looks: int, rho: float = 2.0, grid: int = 600) -> tuple[float, ...]:
    """One-sided efficacy bounds (z scale) for ``looks`` equally spaced looks.

    Alpha is spent with the power family ``alpha * t**rho`` (rho 1 ~ Pocock, 3 ~
    O'Brien-Fleming); the bounds come from recursive numerical integration of the
    null Brownian motion (Armitage, McPherson and Rowe), so the chance of crossing
    any bound under the null is ``alpha``. Futility stopping is non-binding: it can
    only lower the error rate.
    """
    if not 0.0 < alpha < 0.5 or looks < 1:
        raise ValueError("need 0 < alpha < 0.5 and at least one look")
    import numpy as np
    from scipy import optimize
    from scipy import stats as sps

    times = np.arange(1, looks + 1) / looks
    spent = alpha * times**rho
    increments = np.diff(np.concatenate([[0.0], spent]))
    bounds = [float(sps.norm.isf(increments[0]))]
    upper = bounds[0] * math.sqrt(times[0])
    x = np.linspace(-10.0 * math.sqrt(times[0]), upper, grid)
    density = sps.norm.pdf(x / math.sqrt(times[0])) / math.sqrt(times[0])
    for k in range(1, looks):
        sd = math.sqrt(times[k] - times[k - 1])

        def excess(
            u: float, x: Any = x, density: Any = density, sd: float = sd, target: float = float(increments[k])
        ) -> float:
            return float(np.trapezoid(density * sps.norm.sf((u - x) / sd), x)) - target

        u = float(optimize.brentq(excess, float(x[0]) - 10.0, upper + 20.0))
        bounds.append(u / math.sqrt(times[k]))
        nxt = np.linspace(-10.0 * math.sqrt(times[k]), u, grid)
        kernel = sps.norm.pdf((nxt[:, None] - x[None, :]) / sd) / sd
        density = np.asarray(np.trapezoid(kernel * density[None, :], x, axis=1))
        x, upper = nxt, u
    return tuple(bounds)


@functools.lru_cache(maxsize=4096)
def t_bound(z_bound: float, df: int) -> float:
    """The t-scale bound with the same one-sided tail as ``z_bound`` (conservative at small df)."""
    from scipy import stats as sps

    return float(sps.t.isf(sps.norm.sf(z_bound), df))


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.n) if self.n else math.inf

    def t(self) -> float | None:
        if self.n < 2 or self.se == 0:
            return None
        return self.mean / self.se

    def upper(self, confidence: float) -> float:
        """One-sided upper confidence bound of the mean (t-based)."""
        if self.n < 2:
            return math.inf
        return self.mean + _t_isf(1 - confidence, self.n - 1) * self.se


@functools.lru_cache(maxsize=4096)
def _t_isf(q: float, df: int) -> float:
    from scipy import stats as sps

    return float(sps.t.isf(q, df))


def summarize(values: Sequence[float]) -> Summary:
    n = len(values)
    if n == 0:
        return Summary(0, 0.0, 0.0)
    m = mean(values)
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Summary(n, m, sd)


@dataclass(frozen=True)
class SequentialTest:
    """The group-sequential paired test behind the ``sequential`` gate (pure: no records).

    ``look(k, diffs)`` is called after look k (0-based) with every paired
    difference so far; it answers ``accept`` (the t statistic crossed the k-th
    efficacy bound), ``futility`` (the one-sided upper confidence bound of the mean
    gain is below ``min_effect``), ``cap`` (the last look passed undecided) or None
    (take another look). When every difference is the same positive number (a
    deterministic agent), there is no variance to test: it accepts once there are
    at least log2(1/alpha) of them (a sign test at level alpha).

    The bounds are computed at ``margin * alpha``: the t statistic's estimated
    variance makes the Brownian-motion bounds a little generous (simulated error
    rates of 1.00-1.06 alpha without the margin, 0.98-1.02 alpha at 0.9); the default
    margin of 0.8 keeps the measured rate below alpha with room for the run-wide
    spending over steps (tests/test_sequential.py, benchmarks/verdicts.py).
    """

    alpha: float
    max_looks: int = 8
    min_effect: float = 0.10
    futility_confidence: float = 0.90
    rho: float = 2.0
    margin: float = 0.8

    def bounds(self) -> tuple[float, ...]:
        return group_sequential_bounds(self.alpha * self.margin, self.max_looks, self.rho)

    def look(self, k: int, diffs: Sequence[float]) -> tuple[str | None, dict[str, Any]]:
        stat = summarize(diffs)
        z_bound = self.bounds()[k]
        t = stat.t()
        bound = t_bound(z_bound, stat.n - 1) if stat.n >= 2 else math.inf
        upper = stat.upper(self.futility_confidence)
        info: dict[str, Any] = {
            "alpha": self.alpha,
            "n": stat.n,
            "mean_gain": round(stat.mean, 6),
            "se": None if stat.n < 2 else round(stat.se, 6),
            "t": None if t is None else round(t, 4),
            "bound_t": None if math.isinf(bound) else round(bound, 4),
            "bound_z": round(z_bound, 4),
            "upper": None if math.isinf(upper) else round(upper, 6),
        }
        if stat.n == 0:
            return ("cap" if k + 1 >= self.max_looks else None), info
        constant = stat.n >= 2 and stat.sd == 0
        if (t is not None and t >= bound) or (
            constant and stat.mean > 0 and stat.n >= math.log2(1 / self.alpha)
        ):
            return "accept", info
        if upper < self.min_effect:
            return "futility", info
        return ("cap" if k + 1 >= self.max_looks else None), info
