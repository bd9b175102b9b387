"""The one-pass gates: ``strict`` and ``paired-z``, one round of ``reps`` replicates, no level."""

from __future__ import annotations

import math

from skilltune.gate.base import Gate, GateOptions, Sampler
from skilltune.runfiles import Verdict
from skilltune.runfiles.units import PairedZStatistic, StrictStatistic
from skilltune.stats import mean, sample_sd


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
