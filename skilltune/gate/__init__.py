"""Gates: should a candidate replace the incumbent? Decided on val, paired by task.

The gate concern in one package, in layers of its own:

- ``base``: the contract (``Gate``, ``GateOptions``, ``Sampler``, ``contaminated``);
- ``onepass``: ``strict`` and ``paired-z``; ``sequential``: the default gate, a task-level
  group-sequential sign-flip test with early stops and ``veto``, the harm veto (its
  ``HarmScope`` handed to the gate when it is built);
- ``registry``: ``GATES`` (the ``skilltune.gates`` entry points), ``make_gate``;
- ``run``: a training run's gate, ``RunGate``, each decision's level from ``RunAlpha``;
- ``sizing``: what the run's levels ask of the val split.

The statistics (the sign-flip test, the harm rule, the spending weights) are in ``stats/``.
A plug-in gate imports what it needs from here (``from skilltune.gate import Gate``).
"""

from __future__ import annotations

from skilltune.gate.base import Gate, GateOptions, Sampler, contaminated
from skilltune.gate.onepass import PairedZGate, StrictGate
from skilltune.gate.registry import GATES, gate_options, make_gate, vetoes
from skilltune.gate.run import Policy, RunAlpha, RunGate
from skilltune.gate.sequential import SequentialGate, SequentialOptions
from skilltune.gate.sizing import suite_size_notes, trigger_size_notes, val_size_notes
from skilltune.gate.veto import HarmScope, HarmVeto

__all__ = [
    "GATES",
    "Gate",
    "GateOptions",
    "HarmScope",
    "HarmVeto",
    "PairedZGate",
    "Policy",
    "RunAlpha",
    "RunGate",
    "Sampler",
    "SequentialGate",
    "SequentialOptions",
    "StrictGate",
    "contaminated",
    "gate_options",
    "make_gate",
    "suite_size_notes",
    "trigger_size_notes",
    "val_size_notes",
    "vetoes",
]
