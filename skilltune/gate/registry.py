"""The gates' registry: built-ins and plug-ins alike through the ``skilltune.gates`` entry points."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from skilltune.errors import UsageError
from skilltune.gate.base import Gate, GateOptions
from skilltune.gate.veto import HarmScope
from skilltune.metric import Metric
from skilltune.plugins import Registry
from skilltune.validation import field_problems

GATES: Registry[type[Gate]] = Registry("skilltune.gates", "gate")


def make_gate(
    name: str, metric: Metric, reps: int, scope: HarmScope | None = None, /, **settings: Any
) -> Gate:
    """The gate ``name`` with its options; unknown or invalid options are bad input. ``scope``: the
    decision's val units as the harm veto sees them, handed to a gate that looks at tasks one by one
    (``vetoes``); other gates do not take it."""
    cls = GATES.get(name)
    given = {"scope": scope} if scope is not None and vetoes(cls) else {}
    try:
        return cls(metric=metric, reps=reps, **given, **settings)
    except ValidationError as exc:
        problems = field_problems(exc, model=cls.Options, noun=f"{name} gate option")
        raise UsageError("; ".join(problems)) from None


def gate_options(name: str, settings: dict[str, Any]) -> GateOptions | None:
    """A run's gate options with their defaults (None: the gate is not installed here, or they no
    longer suit it)."""
    cls = GATES.find(name)
    try:
        return cls.Options.model_validate(settings) if cls is not None else None
    except ValidationError:
        return None


def vetoes(cls: type[Gate]) -> bool:
    """Whether the gate looks at val tasks one by one (its options hold ``harm_tolerance``), and so
    takes the decision's ``HarmScope``."""
    return "harm_tolerance" in cls.Options.model_fields
