"""Where a suite sits for a gate: the pass-rate regimes and the flakiness threshold (calibrate, report, findings)."""

from __future__ import annotations

from typing import Literal

SATURATED = 0.8  # a pass rate above this leaves a gate little room to see a gain
TOO_HARD = 0.3  # below this, little for an edit to fix that the gate can see
FLAKY_SD = 0.3  # within-task standard deviation of the gate metric above which a task is flaky
Regime = Literal["saturated", "too hard", "gradient"]


def regime_of(rate: float | None) -> Regime | None:
    if rate is None:
        return None
    if rate > SATURATED:
        return "saturated"
    if rate < TOO_HARD:
        return "too hard"
    return "gradient"
