"""A training run's gate (``RunGate``): its options checked once, then one gate per decision at
the level the run's error control (``RunAlpha``) gives it.

Error control over a whole run: how much alpha each gate decision may use. A run makes many
gate decisions; testing each at 0.05 would keep a useless edit in most long runs. Two
policies share the run's ``alpha`` (default 0.05) among decisions,
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
from typing import Any, Literal

from skilltune.errors import UsageError
from skilltune.gate.base import Gate
from skilltune.gate.registry import GATES, make_gate
from skilltune.gate.veto import HarmScope
from skilltune.metric import Metric
from skilltune.stats.alpha import harmonic_weights

Policy = Literal["lord", "spend"]


@dataclass(frozen=True)
class RunAlpha:
    """The run's ``alpha`` shared among its ``planned`` decisions under ``policy`` (above)."""

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


class RunGate:
    """The gate of a training run: built and checked once, then one gate per decision.

    A gate whose options hold ``alpha`` tests each decision at the level the run's
    error-control policy gives it from the outcomes of the decisions before (so a resumed
    run computes the same levels); ``alpha`` is then the run's to set, never an option.
    """

    def __init__(
        self,
        name: str,
        metric: Metric,
        reps: int,
        options: dict[str, Any],
        alpha: float,
        policy: Policy,
        planned: int,
    ) -> None:
        self.name = name
        cls = GATES.get(name)
        self.leveled = "alpha" in cls.Options.model_fields
        self.seeded = "seed" in cls.Options.model_fields
        if "alpha" in options:
            raise UsageError(
                "gate option alpha: a training run sets each decision's level from the run-wide alpha "
                "(--alpha, default 0.05, spent over the run's decisions); drop alpha from the gate options"
            )
        if "seed" in options and self.seeded:
            raise UsageError(
                "gate option seed: a training run derives each decision's seed from the run's --seed; "
                "drop seed from the gate options"
            )
        self._options = dict(options)
        self.run_alpha = RunAlpha(alpha, policy, planned)
        # Checked now, before anything runs: an unknown or invalid option is bad input.
        self._template = make_gate(name, metric, reps, **self._with_level(alpha))

    def _with_level(self, level: float) -> dict[str, Any]:
        return self._options | {"alpha": level} if self.leveled else self._options

    @property
    def max_replicates(self) -> int:
        return self._template.max_replicates

    def for_decision(
        self, earlier: list[bool], seed: int = 0, scope: HarmScope | None = None
    ) -> tuple[Gate | None, float | None]:
        """The gate of the next decision and its level (None for a gate without one), given the
        outcomes of the run's earlier decisions (True = accepted), the decision's ``seed`` (for a
        gate with one) and its val units' ``scope`` (for a gate with a harm veto). No gate (and
        level 0.0) when the run's alpha is spent: such a decision cannot accept."""
        level = self.run_alpha.level(earlier) if self.leveled else None
        if level is not None and level <= 0.0:
            return None, 0.0
        if level is None and scope is None:
            return self._template, None
        settings = self._options | ({} if level is None else {"alpha": level})
        settings |= {"seed": seed} if self.seeded and level is not None else {}
        gate = make_gate(self.name, self._template.metric, self._template.reps, scope, **settings)
        return gate, level
