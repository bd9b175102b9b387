"""Scorers: one class per scoring mode, found through the ``skilltune.scorers`` entry points."""

from __future__ import annotations

from skilltune.metric import METRICS, Metric, as_metric
from skilltune.score.base import (
    SCORE_SCHEMA_VERSION,
    OpenFields,
    Score,
    Scored,
    Scorer,
    ScoringFields,
    ScoringUsage,
    make_score,
    require_same_contract,
    score_from_mapping,
)
from skilltune.score.context import ScoringContext
from skilltune.score.expected import ExpectedAnswer, expected_answer, plain_answer
from skilltune.score.registry import register_scorer, scorer_class, scoring_modes

__all__ = [
    "METRICS",
    "SCORE_SCHEMA_VERSION",
    "ExpectedAnswer",
    "Metric",
    "OpenFields",
    "Score",
    "Scored",
    "Scorer",
    "ScoringContext",
    "ScoringFields",
    "ScoringUsage",
    "as_metric",
    "expected_answer",
    "make_score",
    "plain_answer",
    "register_scorer",
    "require_same_contract",
    "score_from_mapping",
    "scorer_class",
    "scoring_modes",
]
