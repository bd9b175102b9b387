"""The harm veto: a val task hurt beyond a tolerance, with confidence, blocks a keep.

The sign-flip test behind the sequential gate is exact when each task's effect is symmetric
about zero. An edit that helps many tasks a little and breaks a few badly is not: a val
split that happens to hold few of the broken tasks lets its sum pass. The veto looks at the
tasks one by one: a task whose mean difference (candidate minus incumbent over its paired
replicates) is at most ``-tolerance`` is a *suspect*; it is *harmed* when even the upper
``confidence`` bound of its difference, ``mean + z * s / sqrt(r)``, is at most
``-tolerance``, with ``s`` the replicate noise pooled over every task that has two or more
rounds (the within-task sd of the per-round differences) and ``z`` the normal quantile at
``1 - (1 - confidence) / suspects`` (Bonferroni over the suspects: among 60 noisy tasks a few
fall by chance, and each would otherwise be tested at the full confidence). A suspect on a noisy 0/1 task
(one flip from 1 to 0) is not harmed; the same drop repeated, or on a graded score whose
replicates agree, is.

With one round there is no noise estimate: the gate runs one more round before it keeps an
edit that has suspects (``noise is None``). Adding the veto to a test that is exact under
symmetry keeps it exact: a keep still needs the test to accept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist


@dataclass(frozen=True)
class Harm:
    """What the veto saw: suspects (mean <= -tolerance), the harmed among them, and the noise."""

    suspects: dict[str, float] = field(default_factory=dict)  # task -> mean difference
    harmed: dict[str, float] = field(default_factory=dict)  # task -> upper bound of its difference
    noise: float | None = None  # pooled within-task sd of per-round differences (None: one round)

    @property
    def undetermined(self) -> bool:
        """Suspects whose harm cannot be told from noise yet (no task has two rounds)."""
        return bool(self.suspects) and self.noise is None


def pooled_noise(rounds: Mapping[str, Sequence[float]]) -> float | None:
    """The within-task sd of per-round differences, pooled over tasks with two or more rounds."""
    squares, df = 0.0, 0
    for diffs in rounds.values():
        if len(diffs) >= 2:
            m = sum(diffs) / len(diffs)
            squares += sum((d - m) ** 2 for d in diffs)
            df += len(diffs) - 1
    return math.sqrt(squares / df) if df else None


def harm(rounds: Mapping[str, Sequence[float]], tolerance: float, confidence: float) -> Harm:
    """The veto on ``rounds`` (task -> its per-round differences, candidate minus incumbent)."""
    means = {task: sum(d) / len(d) for task, d in rounds.items() if d}
    suspects = {task: m for task, m in means.items() if m <= -tolerance + 1e-12}
    noise = pooled_noise(rounds)
    if not suspects or noise is None:
        return Harm(suspects, {}, noise)
    # Bonferroni over the suspects: with many noisy tasks some fall by chance, and each is tested
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / len(suspects))
    harmed = {}
    for task, m in suspects.items():
        upper = m + z * noise / math.sqrt(len(rounds[task]))
        if upper <= -tolerance + 1e-12:
            harmed[task] = upper
    return Harm(suspects, harmed, noise)
