"""skilltune: tune agent skills by evidence instead of by feel.

The Python API comes first; the ``skilltune`` command is a thin layer over it.
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from skilltune.compare import compare
from skilltune.errors import ScoringError, SkilltuneError, UsageError
from skilltune.evaluate import EvalSummary, evaluate
from skilltune.runfiles import Comparison
from skilltune.skill import Candidate, lint_candidate, load_skill
from skilltune.smoke import smoke
from skilltune.suite import Suite, Task, load_suite, validate_suite
from skilltune.train import TrainResult, resume, train

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
    "compare",
    "evaluate",
    "lint_candidate",
    "load_skill",
    "load_suite",
    "resume",
    "smoke",
    "train",
    "validate_suite",
]
