"""The gate before issue 12, simulated for comparison (gatesim's ``replicate-t`` design).

A t statistic on the pooled per-(task, replicate) differences against Brownian-motion
group-sequential bounds at ``margin * alpha``, a sign test for equal differences, futility from
the first look.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

if TYPE_CHECKING:
    from benchmarks.gatesim import Design


@functools.lru_cache(maxsize=256)
def brownian_bounds(alpha: float, looks: int, rho: float = 2.0, grid: int = 600) -> tuple[float, ...]:
    """One-sided group-sequential z bounds spending ``alpha * t**rho`` (recursive integration)."""
    times = np.arange(1, looks + 1) / looks
    increments = np.diff(np.concatenate([[0.0], alpha * times**rho]))
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


def decide_today(design: Design, alphas: np.ndarray, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, looks, n = diffs.shape
    s = np.cumsum(diffs.sum(axis=2), axis=1).astype(float)  # sum of differences by look
    q = np.cumsum(np.abs(diffs).sum(axis=2), axis=1).astype(float)  # sum of squares (d in -1, 0, 1)
    pairs = n * np.arange(1, looks + 1)[None, :]
    mean = s / pairs
    var = np.maximum(q - pairs * mean**2, 0.0) / (pairs - 1)
    se = np.sqrt(var / pairs)
    accepted = np.zeros(rows, dtype=bool)
    used = np.full(rows, looks)
    open_ = np.ones(rows, dtype=bool)
    t_upper = np.array([sps.t.isf(1 - design.futility_confidence, p - 1) for p in pairs[0]])
    for alpha in np.unique(alphas):
        mine = alphas == alpha
        z = brownian_bounds(float(alpha) * design.margin, looks, design.rho)
        for k in range(looks):
            df = int(pairs[0, k]) - 1
            bound = float(sps.t.isf(sps.norm.sf(z[k]), df))
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(se[:, k] > 0, mean[:, k] / se[:, k], np.nan)
            constant = (se[:, k] == 0) & (mean[:, k] > 0) & (pairs[0, k] >= math.log2(1 / alpha))
            acc = mine & open_ & ((t >= bound) | constant)
            fut = mine & open_ & ~acc & (mean[:, k] + t_upper[k] * se[:, k] < design.min_effect)
            accepted |= acc
            used[acc | fut] = k + 1
            open_ &= ~(acc | fut)
    return accepted, used
