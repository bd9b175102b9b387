"""The gate of a training run: its options checked once, each decision's level from the run's alpha."""

from __future__ import annotations

from typing import Any

from skilltune.errors import UsageError
from skilltune.gate import GATES, Gate, make_gate
from skilltune.metric import Metric
from skilltune.stats.alpha import Policy, RunAlpha


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

    def for_decision(self, earlier: list[bool], seed: int = 0) -> tuple[Gate | None, float | None]:
        """The gate of the next decision and its level (None for a gate without one), given the
        outcomes of the run's earlier decisions (True = accepted) and the decision's ``seed``
        (for a gate with one). No gate (and level 0.0) when the run's alpha is spent: such a
        decision cannot accept."""
        if not self.leveled:
            return self._template, None
        level = self.run_alpha.level(earlier)
        if level <= 0.0:
            return None, 0.0
        settings = self._with_level(level) | ({"seed": seed} if self.seeded else {})
        gate = make_gate(self.name, self._template.metric, self._template.reps, **settings)
        return gate, level
