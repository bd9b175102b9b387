"""The sign-flip reference of per-task differences: exact tails, reference sets, sequential crossings.

Under the null that on each task the candidate and the incumbent are exchangeable (or a
population of tasks whose effects are symmetric about zero), flipping the sign of a task's
difference -- which arm is which, on all of its replicates at once -- leaves the data's
distribution unchanged. A test that compares the observed statistic with its values under
sign vectors is then exact at every level and task count.

- ``lattice`` turns differences into integers (scores lie on a lattice: 0/1, k/m, means
  over k replicates), so ties are exact and equal float differences (0.2 - 0.1) are equal.
- ``tail`` is the exact sign-flip distribution of a sum of integers (dynamic programming
  over values): the one-sided p-value of a single look, for any number of tasks.
- ``Reference`` is the set of sign vectors a sequential decision compares its whole path
  with: every vector when there are few tasks, else the identity and seeded random ones
  (the "+1" correction keeps the test exact). The same vector flips a task at every look.
- ``Crossings`` spends a look's budget (vectors allowed to have crossed by that look)
  over the reference: the observed data are accepted when the identity crosses.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Floats = npt.NDArray[np.float64]

ZERO = 1e-12  # a difference this small is float noise around an exact zero
MAX_CELLS = 1 << 18  # integers of a look sum to at most this (exact in float arithmetic)
_LATTICE_STEPS = 5040  # denominators tried for the data's lattice (lcm of 1..10 is 2520)
EXACT_MAX = 1 << 16  # enumerate every sign vector when there are at most this many
MC_SCALE = 128  # a Monte Carlo reference holds about MC_SCALE / alpha vectors
MC_MIN, MC_MAX = 1 << 12, 1 << 20
_MC_BYTES = 1 << 26  # memory for a Monte Carlo reference's signs, at most
_CHUNK = 1 << 16  # reference rows multiplied at a time


def lattice(values: Floats) -> Ints:
    """Integers proportional to ``values``: exact when the values lie on a lattice of denominator
    up to 5040, else ``values`` rounded onto a grid of about ``MAX_CELLS`` cells.

    The scale depends on |values| only and rounding is odd (round(-x) = -round(x)), so the
    integers are sign-flipped exactly when the values are: a sign-flip test on them is a valid
    sign-flip test of the values."""
    import numpy as np

    size = float(np.abs(values).sum())
    if size <= ZERO:
        return np.zeros(values.shape, dtype=np.int64)
    top = max(1, min(_LATTICE_STEPS, int(MAX_CELLS / size)))
    steps = np.arange(1, top + 1, dtype=np.float64)[:, None]
    scaled = steps * values[None, :]
    off = np.abs(scaled - np.rint(scaled)).max(axis=1)
    hits = np.nonzero(off <= 1e-6)[0]
    scale = float(steps[hits[0], 0]) if hits.size else float(top)
    return np.asarray(np.rint(values * scale), dtype=np.int64)


def tail(q: Ints, threshold: Ints) -> Floats:
    """P(sum_i s_i q[d, i] >= threshold[d]) for independent fair signs s, row by row; exact.

    Only |q| matters: with U the sum of a random half of the |q| (each in with chance 1/2),
    sum_i s_i q_i = 2U - A where A = sum |q|. U's distribution is built by multiplying
    (1 + x^v) / 2 in for every nonzero |q| = v, values in ascending order, so a row's
    arithmetic does not depend on the other rows.
    """
    import numpy as np

    a = np.abs(np.asarray(q, dtype=np.int64))
    total = a.sum(axis=1)
    width = int(total.max(initial=0)) + 1
    dist = np.zeros((a.shape[0], width))
    dist[:, 0] = 1.0
    for value in np.unique(a[a > 0]):
        v = int(value)
        count = (a == v).sum(axis=1)
        for j in range(int(count.max())):
            sel = np.nonzero(count > j)[0]
            block = dist[sel]
            shifted = np.zeros_like(block)
            shifted[:, v:] = block[:, :-v]
            dist[sel] = (block + shifted) * 0.5
    above = np.cumsum(dist[:, ::-1], axis=1)[:, ::-1]  # above[:, u] = P(U >= u)
    need = np.ceil((np.asarray(threshold, dtype=np.float64) + total) / 2).astype(np.int64)
    out = np.where(need <= 0, 1.0, 0.0)
    inside = (need > 0) & (need < width)
    out[inside] = above[np.nonzero(inside)[0], need[inside]]
    return np.asarray(out, dtype=np.float64)


def p_value(q: Ints) -> float:
    """One look's exact sign-flip p-value of the integers ``q``: P(sum s_i q_i >= sum q_i)."""
    import numpy as np

    return float(tail(q[None, :], np.asarray([int(q.sum())]))[0])


def reference_size(tasks: int, alpha: float) -> tuple[int, bool]:
    """(vectors in the reference, whether that is every sign vector) for ``tasks`` tasks at ``alpha``."""
    full = 1 << tasks if tasks < 62 else 1 << 62
    wanted = 1 << max(0, math.ceil(math.log2(MC_SCALE / alpha)))
    memory = 1 << max(12, int(math.log2(_MC_BYTES / max(tasks, 1))))
    sampled = max(MC_MIN, min(wanted, MC_MAX, memory))
    if full <= max(EXACT_MAX, sampled):
        return full, True
    return sampled, False


@functools.lru_cache(maxsize=4)
def _every_sign(tasks: int) -> npt.NDArray[np.int8]:
    import numpy as np

    rows = np.arange(1 << tasks, dtype=np.int64)[:, None]
    bits = (rows >> np.arange(tasks, dtype=np.int64)[None, :]) & 1
    return np.asarray(1 - 2 * bits, dtype=np.int8)  # row 0 is the identity


class Reference:
    """The sign vectors of one decision: row 0 is the identity (the observed data).

    Every vector when 2^tasks is small enough; else the identity and ``size - 1`` vectors
    drawn from ``seed`` (independent of the data, so the observed path is exchangeable with
    theirs under the null: the Monte Carlo test is exact too). Each vector flips a task the
    same way at every look.
    """

    def __init__(self, tasks: int, alpha: float, seed: int) -> None:
        import numpy as np

        self.tasks = tasks
        self.size, self.exact = reference_size(tasks, alpha)
        signs: npt.NDArray[np.int8]
        if self.exact:
            signs = _every_sign(tasks)
        else:
            rng = np.random.default_rng([seed, tasks, self.size])
            bits = rng.integers(0, 2, size=(self.size, tasks), dtype=np.int8)
            bits[0] = 0
            signs = np.asarray(1 - 2 * bits, dtype=np.int8)
        # float32 when it fits (no conversion per look), else int8 converted a chunk at a time
        self.signs: npt.NDArray[np.int8] | npt.NDArray[np.float32] = (
            signs.astype(np.float32) if signs.size * 4 <= _MC_BYTES else signs
        )

    def values(self, q: Ints) -> Floats:
        """The statistic sum_i s_i q_i under every vector."""
        return self.values_many(q[None, :])[:, 0]

    def values_many(self, q: Ints) -> Floats:
        """``values`` for many data sets at once: q is (data sets, tasks); returns (size, data sets).

        Sums of at most ``MAX_CELLS`` in magnitude are integers float32 holds exactly, in any
        order of addition, so the result does not depend on the BLAS or the batch."""
        import numpy as np

        right = np.asarray(q, dtype=np.float32).T
        out = np.empty((self.size, right.shape[1]), dtype=np.float64)
        if self.signs.dtype == np.float32:
            out[:] = self.signs @ right
            return out
        for start in range(0, self.size, _CHUNK):
            out[start : start + _CHUNK] = self.signs[start : start + _CHUNK].astype(np.float32) @ right
        return out


def budgets(alpha: float, looks: int, rho: float, size: int) -> tuple[int, ...]:
    """Reference vectors allowed to have crossed by each look: alpha spent as alpha * (k / looks)^rho."""
    return tuple(math.floor(alpha * (k / looks) ** rho * size + 1e-9) for k in range(1, looks + 1))


class Crossings:
    """Which reference vectors have crossed their boundary so far.

    At each look the vectors not yet crossed whose statistic is largest cross, as many as
    the look's budget allows (a group tied at the edge crosses whole or not at all), so at
    most ``budget`` of ``size`` vectors have ever crossed: the chance that the observed one
    (the identity, row 0) is among them is at most ``budget / size`` under the null.
    """

    def __init__(self, size: int) -> None:
        import numpy as np

        self.crossed = np.zeros(size, dtype=bool)
        self.count = 0

    def look(self, values: Floats, budget: int) -> bool:
        """Spend the look's budget over ``values`` (row 0 observed); True when the observed crosses."""
        import numpy as np

        room = budget - self.count
        if room <= 0 or self.crossed[0]:
            return bool(self.crossed[0])
        free = np.nonzero(~self.crossed)[0]
        v = values[free]
        if room >= v.size:
            new = free
        else:
            edge = np.partition(v, [v.size - room - 1, v.size - room])
            last, first_out = edge[v.size - room], edge[v.size - room - 1]
            new = free[v >= last] if last > first_out else free[v > last]
        self.crossed[new] = True
        self.count += int(new.size)
        return bool(self.crossed[0])
