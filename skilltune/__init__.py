"""skilltune: tune agent skills by evidence instead of by feel.

The Python API comes first; the ``skilltune`` command is a thin layer over it.

The API is loaded on first use (PEP 562): ``import skilltune`` costs almost nothing, so the
command's start-up (``--version``, ``--help``, ``validate``) does not pay for the rollout,
training and statistics machinery (numpy, scipy) it does not run.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from skilltune.errors import ScoringError, SkilltuneError, UsageError

__version__ = "0.1.0.dev0"

if TYPE_CHECKING:
    from skilltune.compare import compare
    from skilltune.evaluate import EvalSummary, evaluate
    from skilltune.runfiles import Comparison
    from skilltune.skill import Candidate, lint_candidate, load_skill
    from skilltune.smoke import smoke
    from skilltune.suite import Suite, Task, load_suite, validate_suite
    from skilltune.train import TrainResult, resume, train

# name -> the module that defines it (imported when the name is first read)
_LAZY = {
    "Comparison": "skilltune.runfiles",
    "compare": "skilltune.compare",
    "EvalSummary": "skilltune.evaluate",
    "evaluate": "skilltune.evaluate",
    "Candidate": "skilltune.skill",
    "lint_candidate": "skilltune.skill",
    "load_skill": "skilltune.skill",
    "smoke": "skilltune.smoke",
    "Suite": "skilltune.suite",
    "Task": "skilltune.suite",
    "load_suite": "skilltune.suite",
    "validate_suite": "skilltune.suite",
    "TrainResult": "skilltune.train",
    "resume": "skilltune.train",
    "train": "skilltune.train",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps ``skilltune.compare`` (and evaluate, smoke, train) the API function, as an eager
    ``from skilltune.compare import compare`` here would: the import system binds a submodule to
    its package when the submodule is first loaded, which would otherwise replace the function
    with the module of the same name (the module stays in ``sys.modules``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _LAZY and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
