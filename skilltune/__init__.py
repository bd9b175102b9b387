"""skilltune: tune agent skills by evidence instead of by feel.

The Python API comes first; the ``skilltune`` command is a thin layer over it.

The API is loaded on first use (PEP 562): ``import skilltune`` costs almost nothing, so the
command's start-up (``--version``, ``--help``, ``validate``) does not pay for the rollout,
training and statistics machinery (numpy, scipy) it does not run. No API name is also the name
of a submodule (the commands live in ``skilltune.measure``, the loop in ``skilltune.training``), so
importing a submodule never replaces a function of the API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skilltune.errors import ScoringError, SkilltuneError, UsageError

__version__ = "0.1.0.dev0"

if TYPE_CHECKING:
    from skilltune.draft.review import apply_review
    from skilltune.draft.triggers import draft_triggers
    from skilltune.measure.compare import compare
    from skilltune.measure.evaluate import EvalSummary, evaluate
    from skilltune.measure.smoke import smoke
    from skilltune.runfiles import Comparison
    from skilltune.skill import Candidate, lint_candidate, load_skill
    from skilltune.suite import Suite, Task, load_suite, validate_suite
    from skilltune.training import TrainResult, resume, train

# name -> the module that defines it (imported when the name is first read)
_LAZY = {
    "apply_review": "skilltune.draft.review",
    "draft_triggers": "skilltune.draft.triggers",
    "Comparison": "skilltune.runfiles",
    "compare": "skilltune.measure.compare",
    "EvalSummary": "skilltune.measure.evaluate",
    "evaluate": "skilltune.measure.evaluate",
    "Candidate": "skilltune.skill",
    "lint_candidate": "skilltune.skill",
    "load_skill": "skilltune.skill",
    "smoke": "skilltune.measure.smoke",
    "Suite": "skilltune.suite",
    "Task": "skilltune.suite",
    "load_suite": "skilltune.suite",
    "validate_suite": "skilltune.suite",
    "TrainResult": "skilltune.training",
    "resume": "skilltune.training",
    "train": "skilltune.training",
}

__all__ = [
    "Candidate",
    "Comparison",
    "EvalSummary",
    "ScoringError",
    "SkilltuneError",
    "Suite",
    "Task",
    "TrainResult",
    "UsageError",
    "__version__",
    "apply_review",
    "compare",
    "draft_triggers",
    "evaluate",
    "lint_candidate",
    "load_skill",
    "load_suite",
    "resume",
    "smoke",
    "train",
    "validate_suite",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
