"""Statistics for paired comparisons of skills.

The unit of analysis is the task: replicates of one task are averaged first
(they are nested in the task), then tasks are paired across arms. With 8-20
tasks a t-interval on the per-task mean differences keeps its coverage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as sps


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
    q = float(sps.t.ppf(0.5 + confidence / 2, n - 1))
    t = d / se
    p = float(2 * sps.t.sf(abs(t), n - 1))
    return PairedResult(n, d, se, (d - q * se, d + q * se), p)
