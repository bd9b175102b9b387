"""The scores a gate or a comparison can test: hard, soft or mixed (a module of its own, imported by the CLI at start-up)."""

from __future__ import annotations

from typing import Literal, get_args

from skilltune.errors import UsageError

Metric = Literal["hard", "soft", "mixed"]
METRICS: tuple[Metric, ...] = get_args(Metric)


def as_metric(name: str) -> Metric:
    """``name`` as a Metric, or a UsageError saying which names there are (the Python API's edge:
    the CLI and the config files check their choices themselves)."""
    for metric in METRICS:
        if name == metric:
            return metric
    raise UsageError(f"unknown metric {name!r}: use hard, soft or mixed")
