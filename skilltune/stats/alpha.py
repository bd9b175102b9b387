"""The weights that share a run's alpha among its planned gate decisions (gate/run.py's
``RunAlpha`` spends them)."""

from __future__ import annotations


def harmonic_weights(planned: int) -> list[float]:
    """Weights 1 / (j H_planned) for decisions j = 1..planned: front-loaded, summing to 1."""
    total = sum(1.0 / j for j in range(1, planned + 1))
    return [1.0 / (j * total) for j in range(1, planned + 1)]
