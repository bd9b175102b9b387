"""A proportion and its Wilson score interval: trigger precision, recall and accuracy.

Wilson's interval stays inside [0, 1] and keeps close to its nominal coverage for the small
counts a trigger suite has (tens of queries), where the normal (Wald) interval collapses to a
point at 0/n or n/n. Each count is taken as n independent trials: replicates of one query are
counted as separate trials, so with several replicates the interval is somewhat narrow.
"""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` out of ``trials`` (None when there is no trial)."""
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, trials], got {successes} of {trials}")
    if trials == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # exact ends at 0/n and n/n (float noise would put them a hair inside)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high
