"""Error control over a whole run: how much alpha each gate decision may use.

A run makes many gate decisions; testing each at 0.05 would keep a useless edit
in most long runs. Two policies share the run's ``alpha`` (default 0.05) among
decisions, in order, using only the outcomes of earlier decisions (so a resumed
run computes the same levels):

- ``spend``: decision j gets ``alpha * gamma_j`` with ``sum(gamma) = 1`` over the
  planned decisions (harmonic weights, front-loaded). The chance that a run keeps
  any edit that does not help is at most ``alpha`` (family-wise).
- ``lord`` (default; LORD++, an alpha-investing rule of Ramdas et al. 2017): as
  ``spend`` until the first accept; each accept after it earns ``alpha * gamma``
  back for the decisions that follow. On a pure-noise suite it equals ``spend``
  (at most ``alpha`` chance of accepting anything); after real improvements it
  keeps more power, controlling the expected share of useless accepts (FDR).
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
    policy: Policy = "lord"
    planned: int = 10  # gate decisions the run may make (steps + epoch updates)

    def level(self, accepted: list[bool]) -> float:
        """The level of the next decision, given the outcomes of the earlier ones (True = accepted)."""
        gamma = harmonic_weights(max(self.planned, len(accepted) + 1))
        t = len(accepted)  # 0-based index of the next decision
        level = self.alpha * gamma[t]
        if self.policy == "lord":
            # LORD++ with initial wealth W0 = alpha: the first accept earns (alpha - W0) = 0,
            # every later accept at decision tau earns alpha * gamma[t - tau].
            accepts = [i for i, ok in enumerate(accepted) if ok]
            level += sum(self.alpha * gamma[t - tau - 1] for tau in accepts[1:])
        return min(level, self.alpha)
