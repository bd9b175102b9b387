"""Vectorised simulation of gate decisions (the engine of verdicts.py).

Two designs, on 0/1 outcomes or graded scores on a grid (one replicate per val task per arm and
round):

- ``signflip``: skilltune's sequential gate: per-task mean differences, the sign-flip reference
  of skilltune.stats.signflip (the same ``Reference``, ``budgets``, ``Crossings`` and ``tail`` the
  gate uses), futility by the t upper bound on task means. Decisions are simulated in bulk;
  only those whose single-look sign-flip p-value could put them inside a look's budget run the
  sequential crossing test (a decision outside every look's budget cannot cross: the screen
  is exact for a full reference and misses with chance < 1e-12 per look for a sampled one).
  Graded scores on a grid of 1/g (a judge's 0-100) are sums in units of 1/g: the gate's lattice
  of the task means. ``harm_tolerance``: the harm veto (stats/harm.py) on crossings (``settle``:
  it needs both arms' scores, not only their differences), today's or, with ``harm_rule``
  "absolute", the one before issue 33 (for comparison).
- ``replicate-t``: the gate before issue 12, for comparison (benchmarks/replicate_t.py).

Training runs built on these decisions: benchmarks/runsim.py.

``tests/test_sequential.py`` checks that ``decide`` gives the gate's own decisions.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.random import Generator
from scipy import stats as sps

from benchmarks.replicate_t import decide_today
from skilltune.stats.signflip import Crossings, Reference, budgets, reference_size, tail

MISS = 1e-12  # a sampled reference's screen skips a look when crossing it is less likely than this
_EPS = 1e-9  # stats/harm.py's EPS: a mean this close to a boundary of the harm region is on it


@dataclass(frozen=True)
class Design:
    kind: str = "signflip"  # or "replicate-t"
    max_looks: int = 8
    rho: float = 2.0
    min_effect: float = 0.10
    futility_confidence: float = 0.85
    futility_from: int = 1
    margin: float = 0.8  # replicate-t only
    harm_tolerance: float | None = None  # the harm veto (skilltune/stats/harm.py); None: off
    harm_confidence: float = 0.9
    harm_floor: float = 0.1
    harm_rule: str = "relative"  # or "absolute": the veto before issue 33 (one look, pooled noise)
    harm_wait: str = "confirmable"  # or "all": a keep waits for every suspect not harmed, not only those

    @classmethod
    def today(cls) -> Design:
        return cls(kind="replicate-t", futility_confidence=0.90, futility_from=1)


TODAY = Design.today()
NEW = Design()
NEW_VETO = Design(harm_tolerance=0.5)  # the gate with the harm veto at its defaults
OLD_VETO = Design(harm_tolerance=0.5, harm_rule="absolute")  # the harm veto before issue 33


# --- the sign-flip design -----------------------------------------------------------------------


AUDIT = 0.01  # share of the rows the normal pre-screen rules out that get the exact screen anyway
AUDITS = {"checked": 0, "missed": 0}  # the pre-screen's record: rows it ruled out that could cross


def _screen(sums: np.ndarray, budget: int, size: int, exact: bool, rng: np.random.Generator) -> np.ndarray:
    """Rows whose look could cross: its single-look p-value fits the budget (see module docstring).

    A normal approximation with a 100x margin rules rows out first (the exact tail is a dynamic
    program); a random 1% of what it rules out is checked exactly and recorded in AUDITS."""
    out = np.zeros(sums.shape[0], dtype=bool)
    if budget < 1:
        return out
    total = sums.sum(axis=1)
    live = np.nonzero(total > 0)[0]  # a sum <= 0 has p >= 1/2
    if live.size == 0:
        return out
    spread = np.sqrt((sums[live].astype(np.float64) ** 2).sum(axis=1))
    rough = sps.norm.sf(total[live] / spread)
    near = rough <= 100 * budget / size
    audit = ~near & (rng.random(live.size) < AUDIT)
    chosen = near | audit
    check = live[chosen]
    if check.size == 0:
        return out
    p = tail(sums[check], sums[check].sum(axis=1))
    ok = np.asarray(
        p * size <= budget + 1e-6
        if exact
        else sps.binom.cdf(budget - 1, size - 1, np.minimum(p, 1.0)) > MISS,
        dtype=bool,
    )
    AUDITS["checked"] += int(audit.sum())
    AUDITS["missed"] += int((ok & audit[chosen]).sum())
    out[check[ok]] = True
    return out


@functools.lru_cache(maxsize=8)
def _reference(n: int, alpha: float, seed: int) -> Reference:
    """References are costly to draw (up to 2^20 sign vectors); decisions sharing a seed share one."""
    return Reference(n, alpha, seed)


def _cross(
    design: Design, alpha: float, n: int, sums: np.ndarray, stops: np.ndarray, seeds: np.ndarray
) -> np.ndarray:
    """The look (0-based) at which each row's path crosses, or -1: the gate's own test, batched.
    ``stops[r]``: the last look row r could cross at (the screen's last open look)."""
    size, exact = reference_size(n, alpha)
    spend = budgets(alpha, design.max_looks, design.rho, size)
    out = np.full(sums.shape[0], -1)
    batch = 64 if size <= 1 << 17 else 16
    groups = [np.arange(sums.shape[0])] if exact else [np.nonzero(seeds == s)[0] for s in np.unique(seeds)]
    for group in groups:
        for start in range(0, group.size, batch):
            rows = group[start : start + batch]
            reference = _reference(n, alpha, int(seeds[rows[0]]))
            if sums.shape[1] == 1:  # one look: the observed crosses iff it and all above fit the budget
                values = reference.values_many(sums[rows, 0])
                out[rows[(values >= values[:1]).sum(axis=0) <= spend[0]]] = 0
                continue
            sets = [Crossings(size) for _ in rows]
            for k in range(int(stops[rows].max()) + 1):
                alive = [j for j, r in enumerate(rows) if out[r] < 0 and k <= stops[r]]
                if not alive:
                    break
                values = reference.values_many(sums[rows[alive], k])
                for col, j in enumerate(alive):
                    if sets[j].look(values[:, col], spend[k]):
                        out[rows[j]] = k
    return out


def _units(diffs: np.ndarray, grid: int | None) -> tuple[np.ndarray, int]:
    """Differences as integers in units of 1/g, and g: 1 for 0/1 outcomes, 100 for scores on a 0.01
    grid (found for floats; given as ``grid`` for integers already in units)."""
    if grid is None and not np.issubdtype(diffs.dtype, np.integer):
        steps = range(1, 5040 // diffs.shape[1] + 1)
        grid = next((g for g in steps if np.abs(diffs * g - np.rint(diffs * g)).max() < 1e-9), 0)
        diffs = np.rint(diffs * grid)
    g = 1 if grid is None else grid
    # on a grid the gate's lattice of the task means (signflip.lattice) is exact: proportional to the sums
    if not g or g * diffs.shape[1] > min(5040, 262144 * g / max(diffs.shape[2] * np.abs(diffs).max(), 1.0)):
        raise ValueError("differences must lie on a grid of 1/g, g * looks within the gate's lattice")
    return diffs.astype(np.int64), g


def crossings(
    design: Design,
    alphas: np.ndarray,
    sums: np.ndarray,
    grid: int,
    seeds: np.ndarray,
    rng: Generator,
    limit: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The sign-flip test on per-task sums by look: (the look each decision crosses at or -1, the
    look futility stops it at, or the last). ``limit[d]``: the last look decision d may run to
    (another early stop, e.g. the gate's stop_on_repeat; it can still cross at that look)."""
    rows, looks, n = sums.shape
    t_upper = sps.t.isf(1 - design.futility_confidence, n - 1) if n >= 2 else math.inf
    stops = np.full(rows, looks - 1) if limit is None else np.minimum(limit, looks - 1)
    for k in range(looks - 1, -1, -1):
        if k + 1 < design.futility_from or n < 2:
            continue
        means = sums[:, k] / (grid * (k + 1))
        centre = means.mean(axis=1)
        sd = means.std(axis=1, ddof=1)
        futile = centre + t_upper * sd / math.sqrt(n) < design.min_effect
        stops[futile] = np.minimum(stops[futile], k)
    crossed = np.full(rows, -1)
    for alpha in np.unique(alphas):
        mine = np.nonzero(alphas == alpha)[0]
        size, exact = reference_size(n, float(alpha))
        spend = budgets(float(alpha), looks, design.rho, size)
        last = np.full(mine.size, -1)  # the last look each decision could cross at
        for k in range(looks):
            open_ = k <= stops[mine]
            if open_.any():
                idx = np.nonzero(open_)[0]
                last[idx[_screen(sums[mine[idx], k], spend[k], size, exact, rng)]] = k
        maybe = last >= 0
        if maybe.any():
            chosen = mine[maybe]
            crossed[chosen] = _cross(design, float(alpha), n, sums[chosen], last[maybe], seeds[chosen])
    return crossed, stops


def _settle_absolute(
    design: Design, crossed: np.ndarray, stops: np.ndarray, units: np.ndarray, grid: int
) -> tuple[np.ndarray, np.ndarray]:
    """The harm veto before issue 33 (``harm_rule`` "absolute"), for comparison.

    After the crossing at look c, the task means m (r = c + 1 rounds each): no task at or below
    -tolerance keeps at c; suspects without a noise estimate (c = 0) wait for look 1 if any (at the
    cap they keep); else a suspect with m + z s / sqrt(r) <= -tolerance rejects at that look (s: the
    pooled within-task sd of the rounds' differences; z at 1 - (1 - confidence) / suspects)."""
    accepted = crossed >= 0
    at = np.where(accepted, crossed, stops)
    tol = (design.harm_tolerance or 0.0) - 1e-12
    idx, (looks, n) = np.nonzero(accepted)[0], units.shape[1:]
    wait = (crossed[idx] == 0) & (units[idx, 0] / grid <= -tol).any(axis=1) & (looks > 1)
    at[idx] = np.where(wait, 1, crossed[idx])
    r = at[idx] + 1
    got = np.where((np.arange(looks)[None, :] < r[:, None])[:, :, None], units[idx], 0).astype(np.float64)
    sums = got.sum(axis=1)
    means = sums / (grid * r[:, None])
    within = (got * got).sum(axis=1) - sums * sums / r[:, None]  # squared deviations, in units
    with np.errstate(invalid="ignore", divide="ignore"):
        noise = np.sqrt(np.maximum(within.sum(axis=1), 0.0) / (n * (r - 1))) / grid
    z = sps.norm.isf((1.0 - design.harm_confidence) / np.maximum((means <= -tol).sum(axis=1), 1))
    upper = means + (z * noise / np.sqrt(r))[:, None]
    harmed = (means <= -tol) & (upper <= -tol) & (r >= 2)[:, None]
    accepted[idx[harmed.any(axis=1)]] = False
    return accepted, at + 1


def settle(
    design: Design,
    crossed: np.ndarray,
    stops: np.ndarray,
    inc: np.ndarray,
    cand: np.ndarray,
    grid: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(accepted, rounds used): the crossings, less the harm veto's rejections when the design has it.

    ``inc``, ``cand``: the arms' scores (rows, looks, tasks) in units of 1/grid. The veto of
    stats/harm.py, batched: from the crossing look on, at each look t (r = t + 1 rounds) a task is a
    suspect when its mean e = b - (1 - tolerance) a is below 0 and its mean d = b - a below -floor;
    it is harmed when both upper bounds mean + z s / sqrt(r) are (s: the task's own sd or, when
    larger, the sd pooled over the tasks whose rounds differ, 0 when none does, unknown at r = 1;
    z at 1 - (1 - confidence) / (looks * suspects)). A harmed task rejects at t; a suspect not
    harmed goes on to look t + 1 while looks remain; else the decision keeps at t."""
    accepted = crossed >= 0
    at = np.where(accepted, crossed, stops)
    if design.harm_tolerance is None or not accepted.any():
        return accepted, at + 1
    if design.harm_rule == "absolute":
        return _settle_absolute(design, crossed, stops, (cand - inc).astype(np.int64), grid)
    looks = inc.shape[1]
    a = inc.astype(np.float64) / grid
    b = cand.astype(np.float64) / grid
    stats = {"d": b - a, "e": b - (1.0 - design.harm_tolerance) * a}
    pending = np.nonzero(accepted)[0]
    for t in range(looks):
        now = pending[crossed[pending] <= t]
        if now.size == 0:
            continue
        r = t + 1
        means, upper = {}, {}
        for key, values in stats.items():
            got = values[now, :r]
            m = got.sum(axis=1) / r
            ss = ((got - m[:, None, :]) ** 2).sum(axis=1)
            own = np.sqrt(ss / (r - 1)) if r >= 2 else np.full(m.shape, np.nan)
            noisy = ss > _EPS * _EPS
            df = noisy.sum(axis=1) * (r - 1)
            with np.errstate(invalid="ignore", divide="ignore"):
                pooled = np.where(df > 0, np.sqrt(np.where(noisy, ss, 0.0).sum(axis=1) / df), 0.0)
            sd = np.maximum(own, pooled[:, None])  # NaN at r = 1: no noise estimate
            means[key], upper[key] = m, (m, sd)
        tol = design.harm_floor + _EPS
        suspect = (means["e"] < -_EPS) & (means["d"] < -tol)
        count = suspect.sum(axis=1)
        z = sps.norm.isf((1.0 - design.harm_confidence) / (design.max_looks * np.maximum(count, 1)))[:, None]
        bound = {k: m + z * sd / math.sqrt(r) for k, (m, sd) in upper.items()}
        harmed = suspect & (bound["e"] < -_EPS) & (bound["d"] < -tol)  # NaN compares False
        vetoed = harmed.any(axis=1)
        if design.harm_wait == "all":  # every suspect not harmed holds the keep (measured, not adopted)
            waiting = suspect & ~harmed
        else:  # those that the cap's rounds could confirm, their mean and noise staying as they are
            cap = {k: m + z * sd / math.sqrt(design.max_looks) for k, (m, sd) in upper.items()}
            unknown = np.isnan(upper["e"][1]) | np.isnan(upper["d"][1])
            waiting = suspect & ~harmed & (unknown | ((cap["e"] < -_EPS) & (cap["d"] < -tol)))
        waits = ~vetoed & waiting.any(axis=1) & (t + 1 < looks)
        accepted[now[vetoed]] = False
        done = now[~waits]
        at[done] = t
        pending = np.setdiff1d(pending, done, assume_unique=True)
    return accepted, at + 1


def decide(
    design: Design,
    alphas: np.ndarray,
    diffs: np.ndarray,
    seeds: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    grid: int | None = None,
    inc: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decisions on per-round differences ``diffs[d, k, i]`` (candidate - incumbent) at levels
    ``alphas[d]``: (accepted, rounds used). Differences: 0/1 outcomes' -1, 0, 1; graded scores on a
    grid of 1/g as floats; or integers in units of 1/``grid``. ``seeds[d]``: the sampled
    reference's seed (decisions sharing one share the reference; the gate draws one per decision).
    ``inc``: the incumbent's scores, as ``diffs`` are given (the harm veto needs both arms)."""
    if design.kind == "replicate-t":
        return decide_today(design, alphas, diffs)
    units, g = _units(diffs, grid)
    seeds = np.zeros(units.shape[0], dtype=np.int64) if seeds is None else seeds
    crossed, stops = crossings(
        design, alphas, np.cumsum(units, axis=1), g, seeds, rng or np.random.default_rng(0)
    )
    if inc is None:
        if design.harm_tolerance is not None:
            raise ValueError("the harm veto needs the incumbent's scores (inc)")
        base = np.zeros_like(units)
    else:
        given = np.asarray(inc)  # integers are in units already; floats are scores on the grid
        base = (given if np.issubdtype(given.dtype, np.integer) else np.rint(given * g)).astype(np.int64)
    return settle(design, crossed, stops, base, base + units, g)


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95% interval of a share ``hits / n``."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def outcomes(rng: np.random.Generator, rates: np.ndarray, looks: int) -> np.ndarray:
    """0/1 outcomes (rows, looks, tasks) of independent rollouts at per-(row, task) ``rates``."""
    return (rng.random((rates.shape[0], looks, rates.shape[1])) < rates[:, None, :]).astype(np.int8)
