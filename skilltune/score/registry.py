"""The scoring-mode registry (entry-point group ``skilltune.scorers``)."""

from __future__ import annotations

from skilltune.plugins import Registry
from skilltune.score.base import Scorer

SCORERS: Registry[type[Scorer]] = Registry("skilltune.scorers", "scoring mode")


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    """Class decorator registering a scoring mode at run time (entry points are the usual door)."""
    SCORERS.register(cls.mode, cls)
    return cls


def scorer_class(mode: str) -> type[Scorer] | None:
    return SCORERS.find(mode)


def scoring_modes() -> list[str]:
    return SCORERS.names()
