"""The harm veto's rule: a val task that lost more than a share of its score, with confidence.

The sign-flip test behind the sequential gate is exact when each task's effect is symmetric
about zero. An edit that helps many tasks a little and breaks a few badly is not: a val split
that happens to hold few of the broken tasks lets its sum pass. The veto looks at the tasks
one by one, on their rounds' (incumbent, candidate) scores.

**Harm.** A task is harmed when its expected score falls by more than ``tolerance`` of its
incumbent's expected score *and* by more than ``floor``: E[b] < (1 - tolerance) E[a] and
E[b] < E[a] - floor (a the incumbent's score, b the candidate's). The relative part sees a harm
at any level of the incumbent (a task at 0.4 that falls to 0.1 lost three quarters of its
score; an absolute tolerance of 0.5 could never see it); the floor keeps a fall too small to
matter (0.04 -> 0.0 is all of a tiny score) from counting, and keeps unchanged tasks near zero,
whose relative margin is tiny, from being suspects on every noisy round. Both conditions are
linear in the scores: per round, ``e = b - (1 - tolerance) a`` and ``d = b - a``; harm is
E[e] < 0 and E[d] < -floor.

**Suspects** are the tasks whose means are in that region (mean e < 0 and mean d < -floor). A
suspect is **harmed** (confirmed) when both one-sided ``confidence`` upper bounds are in it:
``mean + z * s / sqrt(r)`` for e below 0 and for d below -floor, with ``z`` the normal quantile
at ``1 - (1 - confidence) / (looks * suspects)``: Bonferroni over the suspects (among 60 noisy
tasks a few fall by chance) and over the looks of a decision (the gate asks again after every
round while a suspect is unresolved, up to its ``max_reps``). The two bounds together are an
intersection-union test: no further correction.

**Noise.** ``s`` is the task's own replicate sd or, when larger, the sd pooled over the *noisy*
tasks (those whose rounds differ). Tasks whose replicates repeat exactly add nothing to the pool:
on a suite of deterministic tasks and a few flaky ones, the flaky ones set the noise, so a flaky,
unchanged 0/1 task that fell twice by chance (1 in 16 for a 50/50 task) is judged against the
noise of flaky tasks, not against the zero of the deterministic ones. When no task is noisy
(every task repeated: a deterministic target) the noise is zero and a repeated fall is a harm.
With one round there is no estimate at all (``noise`` None).

A suspect neither harmed nor cleared (its means back out of the region) is **open** when the
rounds the decision may still run could confirm it, its means and noise staying as they are (or
while there is no noise estimate yet): the gate runs another round before it keeps anything
(gate/veto.py). A suspect that even the cap's rounds could not confirm does not hold the keep: its
fall is within what its noise lets the decision tell (a 50/50 task that fell once or twice). More
rounds only turn a keep into a reject: the gate's level is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

EPS = 1e-9  # scores are means of floats: a mean this close to a boundary is on it (not harm)

Scores = tuple[float, float]  # one round of a task: (incumbent, candidate)


@dataclass(frozen=True)
class Harm:
    """What the veto saw: suspects (task -> mean difference, candidate minus incumbent), the harmed
    among them (task -> the upper bound of its difference), the suspects more rounds could still
    confirm (``open``), and the pooled noise of the differences (None: no task has two rounds yet)."""

    suspects: dict[str, float] = field(default_factory=dict)
    harmed: dict[str, float] = field(default_factory=dict)
    noise: float | None = None
    open: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Stat:
    """One per-round statistic of every task: means, own sds and counts, and the noisy tasks' pool."""

    means: dict[str, float]
    sds: dict[str, float | None]  # None: one round
    counts: dict[str, int]
    pooled: float | None  # sd pooled over the noisy tasks; 0.0 when none is noisy; None: no 2 rounds

    @classmethod
    def of(cls, values: Mapping[str, Sequence[float]]) -> _Stat:
        means, sds, counts = {}, {}, {}
        squares, df, repeated = 0.0, 0, False
        for task, v in values.items():
            n = len(v)
            m = sum(v) / n
            ss = sum((x - m) ** 2 for x in v)
            means[task], counts[task] = m, n
            sds[task] = math.sqrt(ss / (n - 1)) if n >= 2 else None
            if n >= 2 and ss > EPS * EPS:
                squares, df = squares + ss, df + n - 1
            repeated = repeated or n >= 2
        pooled = math.sqrt(squares / df) if df else (0.0 if repeated else None)
        return cls(means, sds, counts, pooled)

    def upper(self, task: str, z: float, grow: float = 1.0) -> float | None:
        """The one-sided upper bound of the task's mean (None: no noise estimate for it); ``grow``:
        as it would be with that many times the values, were its mean and noise to stay."""
        own, pooled = self.sds[task], self.pooled
        if own is None and pooled is None:
            return None
        s = max(own or 0.0, pooled or 0.0)
        return self.means[task] + z * s / math.sqrt(self.counts[task] * grow)


def harm(
    rounds: Mapping[str, Sequence[Scores]],
    tolerance: float,
    confidence: float,
    floor: float,
    looks: int = 1,
    grow: float = 1.0,
) -> Harm:
    """The veto on ``rounds`` (task -> its rounds' (incumbent, candidate) scores), one of at most
    ``looks`` that a decision makes: the confidence is spent over them. ``grow``: how many times
    the rounds so far the decision may still reach (its cap over the rounds so far); a suspect is
    ``open`` when, its mean and noise staying as they are, that many would confirm it."""
    scored = {task: r for task, r in rounds.items() if r}
    diff = _Stat.of({t: [b - a for a, b in r] for t, r in scored.items()})
    share = _Stat.of({t: [b - (1.0 - tolerance) * a for a, b in r] for t, r in scored.items()})
    suspects = [t for t in scored if share.means[t] < -EPS and diff.means[t] < -floor - EPS]
    harmed, open_ = {}, []
    if suspects:
        z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / (looks * len(suspects)))
        for task in suspects:
            up_share, up_diff = share.upper(task, z), diff.upper(task, z)
            if up_share is not None and up_diff is not None and _beyond(up_share, up_diff, floor):
                harmed[task] = up_diff
            elif grow > 1.0 and _beyond(share.upper(task, z, grow), diff.upper(task, z, grow), floor, True):
                open_.append(task)
    return Harm({t: diff.means[t] for t in suspects}, harmed, diff.pooled, open_)


def _beyond(share: float | None, diff: float | None, floor: float, unknown: bool = False) -> bool:
    """Whether both upper bounds lie in the harm region (``unknown``: the answer without a noise
    estimate)."""
    if share is None or diff is None:
        return unknown
    return share < -EPS and diff < -floor - EPS
