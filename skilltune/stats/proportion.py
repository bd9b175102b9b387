"""A proportion and its Wilson score interval: trigger precision, recall and accuracy.

Wilson's interval stays inside [0, 1] and keeps close to its nominal coverage for the small
counts a trigger suite has (tens of queries), where the normal (Wald) interval collapses to a
point at 0/n or n/n. Each count is taken as n independent trials: replicates of one query are
counted as separate trials, so with several replicates the interval is somewhat narrow.
"""

from __future__ import annotations


def wilson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` out of ``trials`` (None when there is no trial):
    scipy's ``binomtest(...).proportion_ci(method="wilson")``."""
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, trials], got {successes} of {trials}")
    if trials == 0:
        return None
    from scipy.stats import binomtest  # imported here: a command that shows no interval never loads scipy

    ci = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
