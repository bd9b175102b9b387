"""Error control over a whole run: how much alpha each gate decision may use.

A run makes many gate decisions; testing each at 0.05 would keep a useless edit in
most long runs. Two policies share the run's ``alpha`` (default 0.05) among decisions,
in order, using only the outcomes of earlier decisions (so a resumed run computes the
same levels). Both give decision j at most ``alpha * gamma_j``-shaped shares of a
budget planned for ``planned`` decisions (harmonic weights, front-loaded, summing to 1
over the plan) and never more: a decision past the plan gets what is left (nothing,
under ``spend``: the plan is exhausted), never a re-spread of alpha already spent.

- ``spend`` (default): decision j gets ``alpha * gamma_j``. The levels sum to at most
  ``alpha`` whatever happens, so the chance that a run keeps any edit that does not
  help is at most ``alpha`` (family-wise, by the union bound: it holds whatever the
  dependence between decisions, including decisions that share the incumbent's rollouts).
- ``lord`` (LORD++, an alpha-investing rule of Ramdas et al. 2017): as ``spend`` until
  the first accept; each accept after it earns ``alpha * gamma`` back for the decisions
  that follow. Until the first accept its levels are those of ``spend``, so on a suite
  where no edit helps it too keeps anything with chance at most ``alpha`` under any
  dependence. Its further promise (the expected share of useless accepts, FDR, at most
  ``alpha``) is proven for independent decisions; decisions that share rollouts are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Policy = Literal["lord", "spend"]


def harmonic_weights(planned: int) -> list[float]:
    total = sum(1.0 / j for j in range(1, planned + 1))
    return [1.0 / (j * total) for j in range(1, planned + 1)]


@dataclass(frozen=True)
class RunAlpha:
    alpha: float = 0.05
    policy: Policy = "spend"
    planned: int = 10  # gate decisions the run plans (steps + epoch updates)

    def _gamma(self, j: int) -> float:
        return harmonic_weights(self.planned)[j] if 0 <= j < self.planned else 0.0

    def level(self, accepted: list[bool]) -> float:
        """The level of the next decision, given the outcomes of the earlier ones (True = accepted).

        0.0 when nothing is left (a decision past the plan under ``spend``): such a decision
        cannot accept."""
        t = len(accepted)  # 0-based index of the next decision
        level = self.alpha * self._gamma(t)
        if self.policy == "lord":
            # LORD++ with initial wealth W0 = alpha: the first accept earns (alpha - W0) = 0,
            # every later accept at decision tau earns alpha * gamma[t - tau - 1].
            accepts = [i for i, ok in enumerate(accepted) if ok]
            level += sum(self.alpha * self._gamma(t - tau - 1) for tau in accepts[1:])
        return min(level, self.alpha)

    def planned_levels(self) -> list[float]:
        """The levels of the planned decisions when none accepts (under ``spend``: whatever happens)."""
        return [self.level([False] * j) for j in range(self.planned)]
