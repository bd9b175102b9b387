"""Task suites: jsonl folders (skill-trainer format) and Python envs (SkillOpt contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skilltune.errors import UsageError
from skilltune.suite.base import Suite
from skilltune.suite.catalogue import read_catalogue
from skilltune.suite.jsonl import JsonlSuite, read_jsonl_suite
from skilltune.suite.model import (
    PROMPT_VARIANTS,
    SPLITS,
    Problem,
    PromptVariant,
    SuiteConfig,
    SuiteOptions,
    Task,
    safe_id,
)
from skilltune.suite.pyenv import PythonSuite, is_python_suite, read_python_suite

__all__ = [
    "PROMPT_VARIANTS",
    "SPLITS",
    "JsonlSuite",
    "Problem",
    "PromptVariant",
    "PythonSuite",
    "Suite",
    "SuiteConfig",
    "SuiteOptions",
    "Task",
    "load_suite",
    "read_suite",
    "safe_id",
    "validate_suite",
]

_SHOWN = 15


def _read(path: Path) -> tuple[Suite | None, list[Problem]]:
    if not path.exists():
        return None, [
            Problem(file=str(path), message="does not exist: give a suite folder or a Python env file")
        ]
    suite: Suite | None
    if is_python_suite(path):
        suite, problems = read_python_suite(path)
        return suite, problems + (read_catalogue(suite.root)[1] if suite is not None else [])
    if not path.is_dir():
        return None, [
            Problem(
                file=str(path),
                message="not a suite: give a folder with train.jsonl, val.jsonl and scoring.md, or a .py env",
            )
        ]
    suite, problems = read_jsonl_suite(path)
    return suite, problems + read_catalogue(path)[1]


def validate_suite(path: Path | str) -> list[Problem]:
    """Every problem found in the suite at ``path``, warnings included (``Problem.warning``):
    the suite is valid when none is an error. Writes nothing."""
    return _read(Path(path))[1]


def read_suite(path: Path | str) -> tuple[Suite | None, list[Problem]]:
    """The suite at ``path`` as ``load_suite`` gives it with the default options (None when it is
    not valid) and every problem ``validate_suite`` finds in it: one reading for both."""
    suite, problems = _read(Path(path))
    if suite is None or any(not p.warning for p in problems):
        return None, problems
    return suite.configure(SuiteOptions()), problems


def load_suite(
    path: Path | str,
    *,
    prompt_variant: PromptVariant = "cheap",
    judge_options: dict[str, Any] | None = None,
) -> Suite:
    """Load a valid suite, read with ``prompt_variant`` and judge overrides (``--judge-opt``), or
    raise UsageError listing its problems (warnings do not stop it)."""
    suite, problems = _read(Path(path))
    errors = [p for p in problems if not p.warning]
    if suite is None or errors:
        shown = "\n".join(f"  {p}" for p in errors[:_SHOWN])
        more = f"\n  ... and {len(errors) - _SHOWN} more" if len(errors) > _SHOWN else ""
        raise UsageError(
            f"the suite at {path} is not valid:\n{shown}{more}\nrun `skilltune validate {path}` for the full list"
        )
    return suite.configure(SuiteOptions(prompt_variant=prompt_variant, judge_options=judge_options or {}))
