"""Task suites: jsonl folders (skill-trainer format) and Python envs (SkillOpt contract)."""

from __future__ import annotations

from pathlib import Path

from skilltune.errors import UsageError
from skilltune.suite.base import Suite
from skilltune.suite.jsonl import JsonlSuite, read_jsonl_suite
from skilltune.suite.model import SPLITS, Problem, SuiteConfig, Task, safe_id
from skilltune.suite.pyenv import PythonSuite, is_python_suite, read_python_suite

__all__ = [
    "SPLITS",
    "JsonlSuite",
    "Problem",
    "PythonSuite",
    "Suite",
    "SuiteConfig",
    "Task",
    "load_suite",
    "safe_id",
    "validate_suite",
]

_SHOWN = 15


def _read(path: Path) -> tuple[Suite | None, list[Problem]]:
    if not path.exists():
        return None, [
            Problem(file=str(path), message="does not exist: give a suite folder or a Python env file")
        ]
    if is_python_suite(path):
        return read_python_suite(path)
    if not path.is_dir():
        return None, [
            Problem(
                file=str(path),
                message="not a suite: give a folder with train.jsonl, val.jsonl and scoring.md, or a .py env",
            )
        ]
    return read_jsonl_suite(path)


def validate_suite(path: Path | str) -> list[Problem]:
    """Every problem found in the suite at ``path`` (empty when it is valid). Writes nothing."""
    return _read(Path(path))[1]


def load_suite(path: Path | str) -> Suite:
    """Load a valid suite or raise UsageError listing its problems."""
    suite, problems = _read(Path(path))
    if suite is None or problems:
        shown = "\n".join(f"  {p}" for p in problems[:_SHOWN])
        more = f"\n  ... and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        raise UsageError(
            f"the suite at {path} is not valid:\n{shown}{more}\nrun `skilltune validate {path}` for the full list"
        )
    return suite
